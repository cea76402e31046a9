"""Gymnasium envs that the population network cannot play, for the bad-input tests.

Importing the module registers them; a command line names them as
`--env=tests.neuroevolution.bad_envs:<id>` (gymnasium imports the module).
"""

import gymnasium as gym
import numpy as np


class _Env(gym.Env):
  """Three float observations; one step in the episode turns them NaN (`nan_at`)."""

  nan_at = None

  def __init__(self, action_space):
    self.observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    self.action_space = action_space
    self._t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

  def step(self, action):
    self._t += 1
    obs = np.full(3, 0.1 * self._t, np.float32)
    if self.nan_at is not None and self._t >= self.nan_at:
      obs[1] = np.nan
    return obs, 1.0, False, False, {}


class NaNObservation(_Env):
  nan_at = 3

  def __init__(self):
    super().__init__(gym.spaces.Box(-1.0, 1.0, (1,), np.float32))


class MultiDiscreteActions(_Env):

  def __init__(self):
    super().__init__(gym.spaces.MultiDiscrete([3, 3]))


class UnboundedActions(_Env):

  def __init__(self):
    super().__init__(gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))


class MatrixActions(_Env):

  def __init__(self):
    super().__init__(gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32))


for _cls in (NaNObservation, MultiDiscreteActions, UnboundedActions, MatrixActions):
  _id = _cls.__name__ + "-v0"
  if _id not in gym.registry:
    gym.register(id=_id, entry_point=f"{__name__}:{_cls.__name__}", max_episode_steps=20)
