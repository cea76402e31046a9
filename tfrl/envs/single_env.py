"""One env with gymnasium's single-env API, made by `make_env`, for actor loops
that step one env at a time in Python (TD3's training env):

    env = make_single_env(EnvProtocol(env="HalfCheetah-v5"), seed=0)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())

It is slot 0 of the protocol's batched env (the MuJoCo ops where they serve,
else gymnasium's env), so training plays the implementation evaluation plays.
"""

import numpy as np

from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol


class SingleEnv:
  """A one-slot batched env (without auto-reset) as one gymnasium env.

  `reset(seed=s)` starts the episode gymnasium's `reset(seed=s)` starts;
  `reset()` continues the slot's random stream. Observations are numpy arrays
  of the env's dtype; rewards are floats (of the env's float32 reward); after
  an episode ends the env must be reset before it steps again. Actions are
  stepped as the batched env's dtype (float32 for a Box space).
  """

  def __init__(self, env, seed: int = 0):
    if env.num_envs != 1:
      raise ValueError(f"SingleEnv takes a one-slot env, got {env.num_envs} slots.")
    if getattr(env, "action_space", None) is None:
      raise ValueError("SingleEnv needs an env with gymnasium spaces: a gymnasium id "
                       "(--env), not an Atari game.")
    self.env = env
    self.observation_space = env.observation_space
    self.action_space = env.action_space
    # Random actions (an actor's warm-up) then depend on the run's seed alone.
    self.action_space.seed(seed)

  def reset(self, *, seed=None, options=None):
    del options  # none are defined
    seeds = None if seed is None else [int(seed)]
    return self.env.reset([0], seeds=seeds).numpy()[0], {}

  def step(self, action):
    obs, reward, terminated, truncated = self.env.step(np.asarray(action)[None], [0])
    return (obs.numpy()[0], float(reward.numpy()[0]), bool(terminated.numpy()[0]),
            bool(truncated.numpy()[0]), {})

  def close(self) -> None:
    self.env.close()


def make_single_env(protocol: EnvProtocol, seed: int = 0) -> SingleEnv:
  """The env of `protocol` as one gymnasium env (`SingleEnv`), seeded from `seed`."""
  return SingleEnv(make_env(protocol, 1, seed, auto_reset=False), seed)
