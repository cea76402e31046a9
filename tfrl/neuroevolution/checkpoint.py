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
"""

import contextlib
import glob
import json
import os
import zipfile
from typing import Dict, Optional, Tuple

import numpy as np

from tfrl import atomic_files
from tfrl.resume import CorruptCheckpoint

STATE_FILE = "checkpoint.json"
LEGACY_ARRAYS_FILE = "checkpoint_arrays.npz"  # before arrays files were per generation
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
  if name is not None:
    return state, _load_arrays(os.path.join(logdir, name), STATE_FILE)
  legacy = os.path.join(logdir, LEGACY_ARRAYS_FILE)
  return state, _load_arrays(legacy, None) if os.path.exists(legacy) else {}
