"""How every tfrl entry point ends on bad input: one line, non-zero exit.

    if __name__ == "__main__":
      cli.run(main, "tfrl.td3")

Flag values that fail a config's checks (ValueError), usage errors, missing
optional dependencies (ImportError) and missing files end the process with
`<prog>: error: <message>` on stderr and exit code 2, instead of a traceback
or the whole help text. A run that cannot go on (`RunFailed`, e.g. every Ray
worker lost, or a write that meets a full disk) ends with one line and exit
code 1. Errors of any other kind keep their traceback: they are bugs, not bad
input.
"""

import errno
import sys
from typing import Callable, NoReturn

from absl import app

BAD_INPUT = (app.UsageError, ValueError, ImportError, FileNotFoundError)
# A full disk or quota, a read-only file system: the machine, not a bug. A
# write that meets one (a flags file, a summary) ends the run in one line, exit 1.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


class RunFailed(RuntimeError):
  """The run cannot go on; what it saved (its last checkpoint) stays."""


_prog = "tfrl"


def prog() -> str:
  """The running entry point's name, e.g. "tfrl.ga" (set by `run`)."""
  return _prog


def fail(prog: str, message, code: int = 2) -> NoReturn:
  print(f"{prog}: error: {message}", file=sys.stderr)
  sys.exit(code)


def run(main: Callable, prog: str) -> None:
  """absl's app.run(main), with bad input reported by `fail`."""
  global _prog
  _prog = prog

  def checked_main(argv):
    try:
      return main(argv)
    except BAD_INPUT as e:
      fail(prog, e)
    except RunFailed as e:
      fail(prog, e, code=1)
    except OSError as e:
      if e.errno not in DISK_ERRNOS:
        raise
      fail(prog, f"cannot write {e.filename or 'a file'}: {e.strerror}", code=1)

  app.run(checked_main)
