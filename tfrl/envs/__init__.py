"""Batched environments with one interface: reset(indices) / step(actions, indices).

`EnvProtocol` says what an env is (`tfrl/envs/protocol.py`) and `make_env`
makes it (`tfrl/envs/make.py`); `play_episodes` plays a policy on one
(`tfrl/envs/episodes.py`).
"""

from tfrl.envs.episodes import play_episodes
from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol

__all__ = ["GymEnv", "AtariEnv", "AtariVectorEnv", "EnvProtocol", "make_env",
           "play_episodes"]


def __getattr__(name):
  # Imported when asked for: the Atari env needs the compiled ALE ops (GymEnv
  # works on a machine where they are not built), and the package itself
  # imports no TensorFlow (tfrl.render_worker's process must not load it).
  if name == "GymEnv":
    from tfrl.envs.gym_env import GymEnv
    return GymEnv
  if name == "AtariEnv":
    from tfrl.envs.atari_env import AtariEnv
    return AtariEnv
  if name == "AtariVectorEnv":
    from tfrl.envs.vector_env import AtariVectorEnv
    return AtariVectorEnv
  raise AttributeError(f"module 'tfrl.envs' has no attribute {name!r}")
