"""How a run ends on purpose, below every module that reports it.

Library code (the run skeleton, the checkpoint stores, the evaluators) raises
`RunFailed`; `tfrl.cli` turns it into one line and exit code 1. The running
entry point's name, which such lines start with, is kept here too, so that a
signal handler (tfrl.stopping) can name it without importing the CLI.
"""

_program = "tfrl"


def program() -> str:
  """The running entry point's name, e.g. "tfrl.ga" (set by `tfrl.cli.run`)."""
  return _program


def set_program(name: str) -> None:
  global _program
  _program = name


class RunFailed(RuntimeError):
  """The run cannot go on; what it saved (its last checkpoint) stays."""
