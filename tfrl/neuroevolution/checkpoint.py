"""One checkpoint per generation: a JSON state plus an optional .npz of arrays.

The GA's population is stored as seed chains (a few numbers per individual),
so its checkpoint is tiny; ES stores its centre and Adam moments in the .npz.

Crash safety: each file is written to a temporary name and renamed
(`tfrl.atomic_files`). The arrays of generation g go to their own file,
`checkpoint_arrays-<g>.npz`, which the state names; the state is renamed
into place last, and only then are older arrays files removed. So at every
moment `checkpoint.json` and the arrays it names are one complete checkpoint,
whatever kills the process or fills the disk.

`load` reports a missing, truncated or unreadable file as
`resume.CorruptCheckpoint` (one line naming the file) and touches nothing.
`Store` is these files as the run skeleton's checkpoint store (`tfrl.run_loop`).
"""

import contextlib
import glob
import json
import os
import zipfile
from typing import Dict, Optional, Tuple

import numpy as np

from tfrl import atomic_files
from tfrl import errors
from tfrl import run_loop
from tfrl.resume import CorruptCheckpoint

STATE_FILE = "checkpoint.json"
_REQUIRED = ("algorithm", "generation", "frames")


def exists(logdir: str) -> bool:
  return os.path.exists(os.path.join(logdir, STATE_FILE))


def arrays_file(generation: int) -> str:
  return f"checkpoint_arrays-{int(generation):06d}.npz"


def arrays_path(logdir: str) -> Optional[str]:
  """The arrays file the checkpoint in `logdir` names (None: it has none)."""
  with open(os.path.join(logdir, STATE_FILE)) as f:
    name = json.load(f).get("arrays_file")
  return os.path.join(logdir, name) if name else None


def save(logdir: str, state: dict, arrays: Optional[Dict[str, np.ndarray]] = None) -> None:
  """Writes a checkpoint; raises OSError (e.g. a full disk) with the old one intact."""
  os.makedirs(logdir, exist_ok=True)
  state = dict(state)
  if arrays:
    state["arrays_file"] = arrays_file(state.get("generation", 0))
    atomic_files.save_npz(os.path.join(logdir, state["arrays_file"]), **arrays)
  else:
    state.pop("arrays_file", None)
  atomic_files.write_json(os.path.join(logdir, STATE_FILE), state)
  keep = state.get("arrays_file")
  # Older generations' arrays, and temporary files a killed save left.
  for path in glob.glob(os.path.join(logdir, "checkpoint_arrays*")):
    if os.path.basename(path) != keep:
      with contextlib.suppress(OSError):
        os.remove(path)


def _load_state(path: str) -> dict:
  try:
    with open(path) as f:
      state = json.load(f)
  except FileNotFoundError:
    raise FileNotFoundError(
        f"no checkpoint in {os.path.dirname(path)} (looked for {path}).") from None
  except (OSError, UnicodeDecodeError) as e:
    raise CorruptCheckpoint(path, f"unreadable ({e})") from e
  except ValueError as e:
    raise CorruptCheckpoint(path, f"not valid JSON, truncated? ({e})") from e
  if not isinstance(state, dict):
    raise CorruptCheckpoint(path, f"holds a {type(state).__name__}, not a checkpoint state")
  missing = [k for k in _REQUIRED if k not in state]
  if missing:
    raise CorruptCheckpoint(path, f"has no {', '.join(repr(k) for k in missing)}")
  return state


def _load_arrays(path: str, named_by: Optional[str]) -> Dict[str, np.ndarray]:
  if not os.path.exists(path):
    raise CorruptCheckpoint(path, f"missing ({named_by} names it)")
  try:
    with np.load(path, allow_pickle=False) as data:
      return {k: data[k] for k in data.files}
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise CorruptCheckpoint(path, f"unreadable, truncated? ({e})") from e


def load(logdir: str) -> Tuple[dict, Dict[str, np.ndarray]]:
  """(state, arrays) of the last checkpoint in `logdir`."""
  path = os.path.join(logdir, STATE_FILE)
  state = _load_state(path)
  name = state.get("arrays_file")
  if name is None:
    return state, {}
  return state, _load_arrays(os.path.join(logdir, name), STATE_FILE)


class Store(run_loop.CheckpointStore):
  """The checkpoint of a GA, ES or random-search run in `logdir`, for `tfrl.run_loop`.

  It saves the algorithm's `state()` (a JSON state and a dict of arrays) with
  the run's identity under "run", and loads it back with `restore(state, arrays)`.
  """

  description = f"a checkpoint ({STATE_FILE})"

  def __init__(self, logdir: str):
    self.directory = logdir

  def exists(self) -> bool:
    return exists(self.directory)

  def check(self) -> None:
    load(self.directory)

  def saved_identity(self) -> Optional[dict]:
    return _load_state(os.path.join(self.directory, STATE_FILE)).get("run")

  @property
  def latest(self) -> Optional[str]:
    return os.path.join(self.directory, STATE_FILE) if self.exists() else None

  def restore(self, algorithm) -> str:
    state, arrays = load(self.directory)
    try:
      algorithm.restore(state, arrays)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
      raise CorruptCheckpoint(os.path.join(self.directory, STATE_FILE),
                              f"a malformed or missing entry ({e!r})") from e
    return self.directory

  def save(self, algorithm, number: int, identity) -> str:
    state, arrays = algorithm.state()
    try:
      save(self.directory, dict(state, run=dict(identity)), arrays)
    except OSError as e:
      raise errors.RunFailed(
          f"cannot write the checkpoint of generation {number} in {self.directory}: "
          f"{e.strerror or e}; the checkpoint there still holds generation "
          f"{self.saved_generation()} (resume with --resume)") from e
    return os.path.join(self.directory, STATE_FILE)

  def saved_generation(self) -> int:
    """The generation of the checkpoint on disk (0: none, or unreadable)."""
    try:
      return load(self.directory)[0]["generation"] if self.exists() else 0
    except ValueError:
      return 0
