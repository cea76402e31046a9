"""`make_env`: the batched env of an `EnvProtocol` (tfrl/envs/protocol.py).

    env = make_env(EnvProtocol(game="ALE/Pong-v5"), num_envs=16, seed=0)   # AtariEnv

The env classes are imported when an env is made: AtariEnv needs the compiled
ALE ops (an ImportError that says how to build them), which gymnasium envs do
not, and the package imports no TensorFlow.
"""

import re

from tfrl.envs.protocol import EnvProtocol, implementation


def make_env(protocol: EnvProtocol, num_envs: int, seed: int = 0, *,
             auto_reset: bool = True, enforce_frame_cap: bool = True, **overrides):
  """The batched env of `protocol`: `AtariEnv` for a game, `GymEnv` for an env id,
  or `MujocoEnv` (the same episodes, stepped by the MuJoCo ops) where
  `env_implementation` picks the ops (`tfrl.envs.protocol.implementation`).

  Args:
    protocol: the `EnvProtocol`.
    num_envs: slots.
    seed: slot i's env is seeded from (seed, i).
    auto_reset: start a new episode in a slot as soon as one ends.
    enforce_frame_cap: False: the caller ends episodes at the protocol's frame
      cap itself (the population evaluator); the env keeps only its own limit.
    **overrides: the env's own settings that are not part of the protocol
      (Atari's screen: `screen_size`, `grayscale`, `max_pool`, `stack`;
      gymnasium's `render_mode`).

  Raises:
    ValueError: one line naming an unknown or unusable game or env, or ops
      that do not serve it.
    ImportError: the ops it needs are not built (how to build them).
  """
  if protocol.is_atari:
    return _make_atari_env(protocol, num_envs, seed, auto_reset, enforce_frame_cap,
                           overrides)
  # pylint: disable=import-outside-toplevel
  from tfrl.envs import mujoco_env
  from tfrl.envs.gym_env import GymEnv
  steps = protocol.max_episode_steps if enforce_frame_cap else None
  if implementation(protocol, **overrides) == "ops":
    # The same episodes as GymEnv's, stepped in C++ (tfrl/envs/mujoco_env.py).
    return mujoco_env.MujocoEnv(protocol.env, num_envs, seed=seed, auto_reset=auto_reset,
                                max_episode_steps=steps)
  try:
    return GymEnv(protocol.env, num_envs, seed=seed, auto_reset=auto_reset,
                  max_episode_steps=steps, **overrides)
  except ValueError as e:
    raise ValueError(f"unknown or unusable --env={protocol.env}: "
                     f"{str(e).splitlines()[0]}") from None


def _make_atari_env(protocol: EnvProtocol, num_envs: int, seed: int, auto_reset: bool,
                    enforce_frame_cap: bool, overrides):
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from tfrl.envs.atari_env import AtariEnv
  try:
    return AtariEnv(protocol.resolved(), num_envs, seed=seed, auto_reset=auto_reset,
                    enforce_frame_cap=enforce_frame_cap, **overrides)
  except (ValueError, RuntimeError) as e:
    message = str(e)
  except tf.errors.OpError as e:
    message = e.message  # a missing ROM, with the op's context in {{...}}
  message = re.sub(r"^\{\{[^}]*\}\}\s*", "", (message.strip().splitlines() or ["?"])[0])
  raise ValueError(f"unknown or unusable --game={protocol.game}: "
                   f"{message.split('; available')[0][:300]}")
