"""How every tfrl entry point ends on bad input: one line, non-zero exit.

    if __name__ == "__main__":
      cli.run(main, "tfrl.td3")

Flag values that fail a config's checks (ValueError), usage errors, missing
optional dependencies (ImportError) and missing files end the process with
`<prog>: error: <message>` on stderr and exit code 2, instead of a traceback
or the whole help text. A run that cannot go on (`tfrl.errors.RunFailed`,
e.g. every Ray worker lost, or a write that meets a full disk) ends with one
line and exit code 1. Errors of any other kind keep their traceback: they are bugs, not bad
input.

`run` also gives every entry point that has presets (`tfrl.presets`) a
`--preset=NAME` flag: on the command line it stands for the preset's flags
(`presets.expand`: the file's flags, with the presets it starts from read
from the same folder), so it works the same from any folder, a clone or an
installed package.
"""

import errno
import sys
from typing import Callable, NoReturn

from absl import app
from absl import flags

from tfrl import errors
from tfrl import logdir_lock
from tfrl import presets
from tfrl.errors import RunFailed

BAD_INPUT = (app.UsageError, ValueError, ImportError, FileNotFoundError)
# A full disk or quota, a read-only file system: the machine, not a bug. A
# write that meets one (a flags file, a summary) ends the run in one line, exit 1.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
# The flags TensorFlow (2.21) defines when imported, absl's test flags among
# them. The entry points parse theirs before importing it, so a flags.txt
# written when they imported it first lists flags unknown at parse time: on
# one of these, `run` imports TensorFlow and parses again, and the file still
# replays (tests/test_cli.py checks the list against TensorFlow's import).
TENSORFLOW_FLAGS = frozenset({
    "delta_threshold", "hbm_oom_exit", "op_conversion_fallback_to_while_loop",
    "runtime_oom_exit", "test_random_seed", "test_randomize_ordering_seed", "test_srcdir",
    "test_tmpdir", "tt_check_filter", "tt_single_core_summaries", "xml_output_file"})


def prog() -> str:
  """The running entry point's name, e.g. "tfrl.ga" (set by `run`)."""
  return errors.program()


def fail(prog: str, message, code: int = 2) -> NoReturn:
  print(f"{prog}: error: {message}", file=sys.stderr)
  sys.exit(code)


def _define_preset_flag(prog: str) -> bool:
  """Declares --preset for --help (listing `prog`'s presets) if it has any."""
  names = presets.names(prog)
  if names and "preset" not in flags.FLAGS:
    flags.DEFINE_string(
        "preset", None, "A ready-made flag file shipped with tfrl, by name: read as "
        "its file's flags at its place on the command line, so later flags "
        f"override it. Presets of {prog}: {', '.join(names)}.",
        module_name=sys.argv[0])   # the entry point's own flags: listed by --help
  return bool(names)


def _check_preset_flag() -> None:
  # Every --preset of the command line became its flags; one that is still
  # set came from a flag file, where it would silently do nothing.
  if "preset" in flags.FLAGS and flags.FLAGS.preset is not None:
    raise app.UsageError(f"--preset={flags.FLAGS.preset} works on the command line "
                         "only; in a flag file, use --flagfile=<the preset's file>.")


def run(main: Callable, prog: str) -> None:
  """absl's app.run(main), with bad input reported by `fail`, and --preset."""
  errors.set_program(prog)
  argv = sys.argv
  if _define_preset_flag(prog):
    try:
      argv = presets.expand(sys.argv, prog)
    except ValueError as e:
      fail(prog, e)

  def checked_main(argv):
    try:
      _check_preset_flag()
      # A run's one --logdir (tfrl.plot's --logdir is a list of runs to read).
      if "logdir" in flags.FLAGS and isinstance(flags.FLAGS.logdir, str):
        logdir_lock.check(flags.FLAGS.logdir)
      return main(argv)
    except BAD_INPUT as e:
      fail(prog, e)
    except RunFailed as e:
      fail(prog, e, code=1)
    except OSError as e:
      if e.errno not in DISK_ERRNOS:
        raise
      fail(prog, f"cannot write {e.filename or 'a file'}: {e.strerror}", code=1)

  def parse(argv):
    # absl would print "FATAL Flags parsing error" and a hint, exit 1.
    try:
      return flags.FLAGS(argv)
    except flags.UnrecognizedFlagError as e:
      if e.flagname not in TENSORFLOW_FLAGS:
        fail(prog, e)
    except flags.Error as e:
      fail(prog, e)
    # A flags.txt of an older run: TensorFlow defines these when imported.
    import tensorflow  # pylint: disable=import-outside-toplevel,unused-import
    flags.FLAGS.unparse_flags()
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      fail(prog, e)

  app.run(checked_main, argv=argv, flags_parser=parse)
