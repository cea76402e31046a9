"""Batched environments with one interface: reset(indices) / step(actions, indices)."""

from tfrl.envs.gym_env import GymEnv

__all__ = ["GymEnv", "AtariEnv", "AtariVectorEnv"]


def __getattr__(name):
  # The Atari env needs the compiled ALE ops; import it only when asked for, so
  # that GymEnv works on a machine where the ops are not built.
  if name == "AtariEnv":
    from tfrl.envs.atari_env import AtariEnv
    return AtariEnv
  if name == "AtariVectorEnv":
    from tfrl.envs.vector_env import AtariVectorEnv
    return AtariVectorEnv
  raise AttributeError(f"module 'tfrl.envs' has no attribute {name!r}")
