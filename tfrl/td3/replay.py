"""A uniform replay buffer in numpy (fast for one Python actor loop)."""

import numpy as np


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
    n = self.size
    np.savez(path, size=n, index=self.index, rng=np.array(self._rng.bit_generator.state, object),
             **{f: getattr(self, f)[:n] for f in self._FIELDS})

  def load(self, path: str):
    with np.load(path, allow_pickle=True) as data:
      n = int(data["size"])
      if n > self.capacity:
        raise ValueError(f"Saved replay holds {n} > capacity {self.capacity} transitions.")
      for f in self._FIELDS:
        getattr(self, f)[:n] = data[f]
      self.size = n
      self.index = int(data["index"]) % self.capacity
      self._rng.bit_generator.state = data["rng"].item()
