"""AtariVectorEnv: the op-backed Atari batch as a gymnasium VectorEnv."""

from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tfrl.envs.atari_env import AtariEnv


class AtariVectorEnv(VectorEnv):
  """`AtariEnv` for any gymnasium user, with gymnasium's next-step autoreset.

  A slot whose episode ended returns its final observation; the next `step`
  resets it (its action is ignored, reward 0), as gymnasium's own vector envs
  do by default. Takes the arguments of `AtariEnv` (an `EnvProtocol`, or a
  game name with the protocol's fields as keywords; without `auto_reset`).
  """

  metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

  def __init__(self, game, num_envs: int, **kwargs):
    if "auto_reset" in kwargs:
      raise ValueError("AtariVectorEnv resets finished slots itself; drop auto_reset.")
    self._game, self._kwargs = game, kwargs
    self.env = AtariEnv(game, num_envs, auto_reset=False, **kwargs)
    self.num_envs = num_envs
    self.single_observation_space = gym.spaces.Box(
        0, 255, self.env.observation_shape, np.uint8)
    self.single_action_space = gym.spaces.Discrete(self.env.num_actions)
    self.observation_space = batch_space(self.single_observation_space, num_envs)
    self.action_space = batch_space(self.single_action_space, num_envs)
    self._needs_reset = np.zeros(num_envs, bool)

  def reset(self, *, seed: Optional[int] = None,
            options: Optional[dict[str, Any]] = None):
    """Resets every slot; a seed rebuilds the emulators with that seed."""
    del options  # No options are defined.
    if seed is not None:
      self.env.close()
      self._kwargs["seed"] = int(seed)
      self.env = AtariEnv(self._game, self.num_envs, auto_reset=False, **self._kwargs)
    self._needs_reset[:] = False
    return self.env.reset().numpy(), {}

  def step(self, actions):
    actions = np.asarray(actions, np.int32).reshape(self.num_envs)
    if not self.action_space.contains(actions.astype(self.action_space.dtype)):
      raise ValueError(f"actions {actions.tolist()} are outside the action set "
                       f"0..{self.env.num_actions - 1}.")
    reward = np.zeros(self.num_envs, np.float32)
    terminated = np.zeros(self.num_envs, bool)
    truncated = np.zeros(self.num_envs, bool)
    resetting = np.flatnonzero(self._needs_reset).astype(np.int32)
    stepping = np.flatnonzero(~self._needs_reset).astype(np.int32)
    if resetting.size:
      self.env.reset(resetting)
    if stepping.size:
      _, r, term, trunc, over = self.env.step_detailed(actions[stepping], stepping)
      reward[stepping] = r.numpy()
      terminated[stepping] = term.numpy()
      truncated[stepping] = trunc.numpy()
      self._needs_reset[:] = False
      self._needs_reset[stepping] = over.numpy()
    else:
      self._needs_reset[:] = False
    return self.env.observe().numpy(), reward, terminated, truncated, {}

  def close_extras(self, **kwargs):
    self.env.close()
