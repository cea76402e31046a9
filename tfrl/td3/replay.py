"""A uniform replay buffer in numpy (fast for one Python actor loop)."""

import json
import pickle
import zipfile

import numpy as np

from tfrl import atomic_files
from tfrl import resume


class ReplayBuffer:
  """Ring buffer of (obs, action, reward, next_obs, discount) transitions.

  `discount` is 0 at a true termination and 1 otherwise (time-limit
  truncations bootstrap, as in Fujimoto et al.'s TD3).
  """

  _FIELDS = ("obs", "action", "reward", "next_obs", "discount")

  def __init__(self, obs_dim: int, action_dim: int, capacity: int, seed: int = 0):
    if capacity < 1:
      raise ValueError(f"ReplayBuffer capacity must be >= 1, got {capacity}.")
    self.capacity = capacity
    self.obs = np.zeros([capacity, obs_dim], np.float32)
    self.action = np.zeros([capacity, action_dim], np.float32)
    self.reward = np.zeros([capacity], np.float32)
    self.next_obs = np.zeros([capacity, obs_dim], np.float32)
    self.discount = np.zeros([capacity], np.float32)
    self.size = 0
    self.index = 0
    self._rng = np.random.default_rng(seed)

  def add(self, obs, action, reward, next_obs, terminated):
    i = self.index
    self.obs[i] = obs
    self.action[i] = action
    self.reward[i] = reward
    self.next_obs[i] = next_obs
    self.discount[i] = 0.0 if terminated else 1.0
    self.index = (i + 1) % self.capacity
    self.size = min(self.size + 1, self.capacity)

  def sample(self, num_batches: int, batch_size: int):
    """Returns a tuple of arrays shaped [num_batches, batch_size, ...]."""
    if self.size == 0:
      raise ValueError("ReplayBuffer.sample on an empty buffer.")
    idx = self._rng.integers(0, self.size, size=[num_batches, batch_size])
    return tuple(getattr(self, f)[idx] for f in self._FIELDS)

  def save(self, path: str):
    """Writes the buffer to `path` whole or not at all (raises OSError, old file intact)."""
    n = self.size
    atomic_files.save_npz(path, size=n, index=self.index,
                          rng=np.array(json.dumps(self._rng.bit_generator.state)),
                          **{f: getattr(self, f)[:n] for f in self._FIELDS})

  def load(self, path: str):
    """Restores a saved buffer; a bad file is one `resume.CorruptCheckpoint` line."""
    try:
      # allow_pickle: buffers saved before the RNG state was JSON hold it pickled.
      with np.load(path, allow_pickle=True) as data:
        n = int(data["size"])
        if n > self.capacity:
          raise ValueError(f"Saved replay holds {n} > capacity {self.capacity} transitions.")
        fields = {f: data[f] for f in self._FIELDS}
        for f, values in fields.items():
          if values.shape != (n,) + getattr(self, f).shape[1:]:
            raise ValueError(f"{f} has shape {values.shape}, expected "
                             f"{(n,) + getattr(self, f).shape[1:]}")
        index = int(data["index"]) % self.capacity
        rng = data["rng"]
        rng_state = json.loads(str(rng)) if rng.dtype.kind == "U" else rng.item()
        type(self._rng.bit_generator)().state = rng_state  # validates it
    except (OSError, ValueError, TypeError, EOFError, KeyError, zipfile.BadZipFile,
            pickle.UnpicklingError) as e:
      raise resume.CorruptCheckpoint(path, f"unreadable replay buffer, truncated? "
                                           f"({resume.first_line(e)})") from e
    # Only now, with the whole file read, does the buffer change.
    for f, values in fields.items():
      getattr(self, f)[:n] = values
    self.size = n
    self.index = index
    self._rng.bit_generator.state = rng_state
