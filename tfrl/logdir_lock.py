"""One run per logdir: a lock file holding the owner's pid.

    with logdir_lock.hold(FLAGS.logdir):
      ...  # the whole run: checkpoints, summaries, exports

The lock is `<logdir>/run.lock`, flock(2)-ed for as long as the run lives;
the file records who holds it (pid, host, command, start time) for the one
line a second run prints before it exits. The kernel drops an flock when its
process dies, however it dies (SIGKILL, OOM killer, power loss included), so
the file a dead run leaves behind is a stale lock by construction: the next
run takes it over and says whose it was. On file systems without flock the
recorded pid decides (a live pid on this host holds the logdir).

Bad logdirs (a file, an unwritable folder) are reported as ValueError, so the
entry points end them in one line (`tfrl.cli`).
"""

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from typing import Callable, Iterator, Optional

LOCK_FILE = "run.lock"


class LogdirInUse(ValueError):
  """Another live run holds the logdir."""


def _warn(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


def _describe(owner: dict) -> str:
  pid = owner.get("pid", "?")
  parts = [f"pid {pid}"]
  if owner.get("host") and owner.get("host") != socket.gethostname():
    parts.append(f"on {owner['host']}")
  if owner.get("command"):
    parts.append(f"`{owner['command']}`")
  if owner.get("started"):
    parts.append(f"since {owner['started']}")
  return " ".join(parts)


def _read_owner(fd: int) -> dict:
  try:
    owner = json.loads(os.pread(fd, 65536, 0).decode() or "{}")
  except (OSError, ValueError):
    return {}
  return owner if isinstance(owner, dict) else {}


def _pid_alive(pid) -> bool:
  try:
    os.kill(int(pid), 0)
  except (ProcessLookupError, ValueError, TypeError):
    return False
  except PermissionError:  # alive, but someone else's
    return True
  return True


def check(logdir: str) -> None:
  """Raises ValueError if `logdir` is a file or sits below one, without
  creating anything (the entry points ask before TensorFlow is imported)."""
  if os.path.exists(logdir) and not os.path.isdir(logdir):
    raise ValueError(f"--logdir={logdir} is a file, not a directory.")
  parent = os.path.dirname(os.path.abspath(logdir))
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise ValueError(f"--logdir={logdir} cannot be created: "
                     f"{os.strerror(errno.ENOTDIR)}.")


def _prepare(logdir: str) -> None:
  check(logdir)
  try:
    os.makedirs(logdir, exist_ok=True)
  except OSError as e:
    raise ValueError(f"--logdir={logdir} cannot be created: {e.strerror or e}.") from e


class Lock:
  """A held logdir lock; `release()` (or the end of `hold`) gives it back."""

  def __init__(self, path: str, fd: int):
    self.path = path
    self._fd: Optional[int] = fd

  @property
  def held(self) -> bool:
    return self._fd is not None

  def release(self) -> None:
    if self._fd is None:
      return
    # Unlink while still holding the flock: a run that opened the file in the
    # meantime notices (its inode is gone from the path) and retries.
    with contextlib.suppress(OSError):
      if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
        os.unlink(self.path)
    os.close(self._fd)
    self._fd = None


def acquire(logdir: str, warn: Callable[[str], None] = _warn) -> Lock:
  """Takes the lock of `logdir` (created if missing) or raises ValueError."""
  _prepare(logdir)
  path = os.path.join(logdir, LOCK_FILE)
  while True:
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
      raise ValueError(f"--logdir={logdir} is not writable: {e.strerror or e}.") from e
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      owner = _read_owner(fd)
      held = e.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)
      if not held:  # no flock on this file system: trust a live pid on this host.
        held = (owner.get("host") in (None, socket.gethostname())
                and owner.get("pid") not in (None, os.getpid())
                and _pid_alive(owner.get("pid")))
      if held:
        os.close(fd)
        raise LogdirInUse(
            f"--logdir={logdir} is in use by another run ({_describe(owner)}); wait for "
            f"it to end or pick another --logdir.") from None
    try:
      same_file = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
      same_file = False
    if same_file:
      break
    os.close(fd)  # its owner unlinked it as we opened it: lock the new file.
  previous = _read_owner(fd)
  owner = {"pid": os.getpid(), "host": socket.gethostname(),
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv)[:300],
           "started": time.strftime("%Y-%m-%d %H:%M:%S")}
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(owner).encode(), 0)
  except OSError as e:
    os.close(fd)
    raise ValueError(f"--logdir={logdir} is not writable: {e.strerror or e}.") from e
  if previous:
    warn(f"{path}: took over the lock of {_describe(previous)}, which is no longer running.")
  return Lock(path, fd)


@contextlib.contextmanager
def hold(logdir: str, warn: Callable[[str], None] = _warn) -> Iterator[Lock]:
  """Holds the lock of `logdir` for the block (released on any exit of it)."""
  lock = acquire(logdir, warn)
  try:
    yield lock
  finally:
    lock.release()
