"""One checkpoint per generation: a JSON state plus an optional .npz of arrays.

The GA's population is stored as seed chains (a few numbers per individual),
so its checkpoint is tiny; ES stores its centre and Adam moments in the .npz.
Both files are written next to their final name and renamed, arrays first, so
a crash never leaves a half-written checkpoint.
"""

import json
import os
from typing import Dict, Optional, Tuple

import numpy as np

STATE_FILE = "checkpoint.json"
ARRAYS_FILE = "checkpoint_arrays.npz"


def exists(logdir: str) -> bool:
  return os.path.exists(os.path.join(logdir, STATE_FILE))


def save(logdir: str, state: dict, arrays: Optional[Dict[str, np.ndarray]] = None) -> None:
  os.makedirs(logdir, exist_ok=True)
  if arrays:
    path = os.path.join(logdir, ARRAYS_FILE)
    with open(path + ".tmp", "wb") as f:
      np.savez(f, **arrays)
    os.replace(path + ".tmp", path)
  path = os.path.join(logdir, STATE_FILE)
  with open(path + ".tmp", "w") as f:
    json.dump(state, f)
  os.replace(path + ".tmp", path)


def load(logdir: str) -> Tuple[dict, Dict[str, np.ndarray]]:
  """(state, arrays) of the last checkpoint in `logdir`."""
  path = os.path.join(logdir, STATE_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no checkpoint in {logdir} (looked for {path}).")
  with open(path) as f:
    state = json.load(f)
  arrays = {}
  apath = os.path.join(logdir, ARRAYS_FILE)
  if os.path.exists(apath):
    with np.load(apath) as data:
      arrays = {k: data[k] for k in data.files}
  return state, arrays
