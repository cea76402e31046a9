"""Gymnasium envs that fail inside their step, for GymEnv's child-process tests.

Importing the module registers them; GymEnv names them as
`tests.envs.failing_envs:<id>` (gymnasium imports the module, in a child
process too).
"""

import os

import gymnasium as gym
import numpy as np


class _Env(gym.Env):
  """Two float observations counting the steps; an action above 0.5 calls `fail`."""

  def __init__(self):
    self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    self._t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.zeros(2, np.float32), {}

  def step(self, action):
    self._t += 1
    if action[0] > 0.5:
      self.fail()
    return np.full(2, self._t, np.float32), 1.0, False, False, {}

  def fail(self):
    raise NotImplementedError


class RefusesAction(_Env):
  """Refuses an action as gymnasium's envs refuse bad input."""

  def fail(self):
    raise ValueError("this env refuses the action\nsecond line")


class Breaks(_Env):
  """An error of the env itself."""

  def fail(self):
    raise KeyError("a broken model")


class Dies(_Env):
  """Its process exits (as a crash in a C extension would)."""

  def fail(self):
    os._exit(3)  # pylint: disable=protected-access


for _cls in (RefusesAction, Breaks, Dies):
  _id = _cls.__name__ + "-v0"
  if _id not in gym.registry:
    gym.register(_id, entry_point=f"{__name__}:{_cls.__name__}")
