"""How one gymnasium env is made: for GymEnv, TD3, and child processes without TensorFlow.

This module imports gymnasium only, so `tfrl.env_worker` and
`tfrl.render_worker` (processes that must not load TensorFlow) make their
envs exactly as `tfrl.envs.GymEnv` makes them in the learner's process.
"""

from typing import Optional

import gymnasium as gym


def make_gymnasium(env_id: str, max_episode_steps: Optional[int] = None, **make_kwargs):
  """One gymnasium env, truncated after `max_episode_steps` steps on top of its id's
  own limit (None: its own only).

  Raises ValueError for an unknown or unusable id, ImportError (what to
  install) for one whose optional dependency is missing.
  """
  try:
    env = gym.make(env_id, **make_kwargs)
  except gym.error.DependencyNotInstalled as e:
    raise ImportError(f"{env_id} needs an optional dependency ({e}); for MuJoCo tasks "
                      "install `mujoco` (pip install 'tfrl[mujoco]').") from e
  except gym.error.Error as e:
    raise ValueError(f"Unknown or unusable gymnasium env '{env_id}': {e}") from e
  if max_episode_steps is not None:
    env = gym.wrappers.TimeLimit(env, max_episode_steps)
  return env


def is_mujoco(env_id: Optional[str]) -> bool:
  """Whether `env_id` is one of gymnasium's MuJoCo tasks (False for unknown ids)."""
  if not env_id:
    return False
  try:
    entry_point = gym.spec(env_id).entry_point
  except gym.error.Error:
    return False
  return isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.mujoco")
