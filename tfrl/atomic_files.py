"""Files written whole or not at all: a temporary name, fsync, rename.

    atomic_files.write_json(os.path.join(logdir, "summary.json"), summary)
    atomic_files.save_npz(path, theta=theta, adam_m=m)

The content goes to `<path>.tmp`, is flushed to the disk and renamed over
`path` (rename is atomic on POSIX file systems). A kill, a crash or a full
disk at any moment therefore leaves under `path` either the previous file or
the new one, never half of one. A failed write removes its temporary file and
raises the OSError (e.g. ENOSPC), with `path` untouched.
"""

import contextlib
import json
import os
from typing import IO, Iterator

import numpy as np


def fsync_directory(directory: str) -> None:
  """Makes a rename in `directory` durable (best effort: not every FS allows it)."""
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


@contextlib.contextmanager
def replacing(path: str, mode: str = "wb") -> Iterator[IO]:
  """Yields a file open for writing that replaces `path` when the block ends.

  If the block raises, `path` stays as it was and the temporary file is
  removed. The temporary name is fixed (`<path>.tmp`), so one left by a
  killed process is overwritten by the next write, not accumulated.
  """
  tmp = path + ".tmp"
  try:
    with open(tmp, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise
  fsync_directory(os.path.dirname(os.path.abspath(path)))


def write_text(path: str, text: str) -> None:
  with replacing(path, "w") as f:
    f.write(text)


def write_json(path: str, value, **dump_kwargs) -> None:
  # Serialise first: a value json cannot encode must not cost the old file.
  write_text(path, json.dumps(value, **dump_kwargs))


def save_npz(path: str, **arrays: np.ndarray) -> None:
  """np.savez to `path` (exactly that name: a file object gets no ".npz" added)."""
  with replacing(path, "wb") as f:
    np.savez(f, **arrays)
