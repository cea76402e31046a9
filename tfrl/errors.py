"""The error with which a run ends on purpose, below every module that raises it.

Library code (the run skeleton, the checkpoint stores, the evaluators) raises
`RunFailed`; `tfrl.cli` turns it into one line and exit code 1.
"""


class RunFailed(RuntimeError):
  """The run cannot go on; what it saved (its last checkpoint) stays."""
