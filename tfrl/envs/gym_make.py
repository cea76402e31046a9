"""The one place a gymnasium env is made (no TensorFlow here: the render worker
process imports it too)."""

from typing import Optional

import gymnasium as gym


def make_gymnasium(env_id: str, max_episode_steps: Optional[int] = None, **make_kwargs):
  """One gymnasium env, truncated after `max_episode_steps` steps on top of its id's
  own limit (None or 0: its own only; `EnvProtocol.max_episode_steps` says how
  many).

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
  if max_episode_steps:
    env = gym.wrappers.TimeLimit(env, max_episode_steps)
  return env
