"""TD3's training phase as one graph: env steps, replay writes, sampling and updates.

    phase = TrainingPhase(env, learner, replay, config, env_steps, episodes)
    phase.reseed(config.seed, step)              # the random streams of (seed, step)
    phase.start_episode(config.seed + episodes)  # a new episode in the env's slot
    out = phase.run(tf.constant(50), True)       # 50 env steps, then 50 updates

One call of `run` is a tf.function: `num_steps` env steps of the actor with
Gaussian exploration noise (uniform random actions before `start_steps`),
each stepping slot 0 of the training env inside the graph (the MuJoCo ops'
step op; gymnasium's envs through their `tf.numpy_function`), each
transition written into the graph-side replay buffer, a finished episode
reset with seed `config.seed + episodes` (as TD3's Python loop reset it);
then, with `train`, `config.update_every` TD3 updates on batches sampled
uniformly in the graph (`learner.update`, XLA-compiled with --jit_compile).
Python runs once per phase, not once per step or sample.

The random draws come from three `tf.random.Generator`s (exploration,
replay sampling, target policy smoothing), each reseeded from (run seed,
env step, stream) when a run begins or resumes, so a run's draws depend on
its seed and where it (re)started, never on what else the process did.
"""

from typing import Dict

import numpy as np
import tensorflow as tf

from tfrl.td3 import config as config_lib
from tfrl.td3 import learner as learner_lib
from tfrl.td3 import replay as replay_lib

# Generator streams of a phase.
EXPLORE, SAMPLE, SMOOTH = 0, 1, 2


def stream_seed(seed: int, step: int, stream: int) -> int:
  """A 63-bit seed for random stream `stream` of a run of `seed` (re)started at `step`."""
  words = np.random.SeedSequence([seed, step, stream]).generate_state(2, np.uint32)
  return int(words[0]) << 31 | int(words[1]) >> 1


class TrainingPhase(tf.Module):
  """See the module docstring. `env` is a one-slot batched env without
  auto-reset (`make_env(protocol, 1, seed, auto_reset=False)`); `env_steps`
  and `episodes` are the run's int64 counters, advanced in the graph."""

  def __init__(self, env, learner: learner_lib.TD3Learner, replay: replay_lib.ReplayBuffer,
               config: config_lib.TD3Config, env_steps: tf.Variable, episodes: tf.Variable,
               name="phase"):
    super().__init__(name=name)
    if env.num_envs != 1 or env.auto_reset:
      raise ValueError("TrainingPhase steps a one-slot env without auto-reset (it keeps "
                       "the final observation of an episode for the replay buffer).")
    self._env = env
    self._learner = learner
    self._replay = replay
    self._config = config
    self._env_steps = env_steps
    self._episodes = episodes
    self._low, self._high = learner.action_low, learner.action_high
    with tf.init_scope():
      self.obs = tf.Variable(tf.zeros([learner.obs_dim]), trainable=False, name="obs")
      self.episode_return = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                        name="episode_return")
      self.generators = [tf.random.Generator.from_seed(stream) for stream in range(3)]
    self.run = tf.function(self._run)

  def reseed(self, seed: int, step: int) -> None:
    """Reseeds the three random streams from (seed, step)."""
    for stream, generator in enumerate(self.generators):
      generator.reset_from_seed(stream_seed(seed, step, stream))

  def start_episode(self, seed: int) -> None:
    """Starts a new episode in the env, seeded with `seed`."""
    self.obs.assign(self._first_obs(tf.constant([seed], tf.int64)))
    self.episode_return.assign(0.0)

  def _first_obs(self, seeds):
    return tf.cast(self._env.reset([0], seeds=seeds)[0], tf.float32)

  def _action(self, obs):
    """The behaviour action: uniform before `start_steps`, else actor + noise, clipped."""
    config, rng = self._config, self.generators[EXPLORE]
    shape = tf.shape(self._low)

    def uniform():
      return rng.uniform(shape, self._low, self._high)

    def explore():
      noise = rng.normal(shape) * config.exploration_noise * (self._high - self._low) / 2.0
      return tf.clip_by_value(self._learner.actor(obs[None])[0] + noise, self._low, self._high)

    return tf.cond(self._env_steps < config.start_steps, uniform, explore)

  def _env_step(self):
    """One env step into the replay buffer; (episode ended, its return so far)."""
    obs = self.obs.read_value()
    action = self._action(obs)
    next_obs, reward, terminated, truncated = self._env.step(action[None], [0])
    next_obs = tf.cast(next_obs[0], tf.float32)
    self._replay.add(obs, action, reward[0], next_obs, terminated[0])
    # Values, not the variables' lazily read assign results (reset below).
    episode_return = self.episode_return.read_value() + tf.cast(reward[0], tf.float64)
    self._env_steps.assign_add(1)
    done = terminated[0] | truncated[0]

    def new_episode():
      episodes = self._episodes.read_value() + 1
      self._episodes.assign(episodes)
      return self._first_obs(tf.reshape(self._config.seed + episodes, [1]))

    self.obs.assign(tf.cond(done, new_episode, lambda: next_obs))
    self.episode_return.assign(tf.where(done, tf.constant(0.0, tf.float64), episode_return))
    return done, episode_return

  def _updates(self) -> Dict[str, tf.Tensor]:
    """`update_every` TD3 updates on uniformly sampled batches."""
    config = self._config
    k, b = config.update_every, config.batch_size
    batch = self._replay.sample(self.generators[SAMPLE], k, b)
    normal = self.generators[SMOOTH].normal([k, b, self._learner.action_dim])
    return self._learner.update(*batch, normal)

  def _run(self, num_steps, train: bool) -> Dict[str, tf.Tensor]:
    """`num_steps` env steps, then (with `train`) the updates; per env step
    `ended` (an episode ended) and `returns` (its return), and the updates' metrics."""
    ended = tf.TensorArray(tf.bool, size=num_steps)
    returns = tf.TensorArray(tf.float64, size=num_steps)
    for i in tf.range(num_steps):
      done, episode_return = self._env_step()
      ended = ended.write(i, done)
      returns = returns.write(i, episode_return)
    out = {"ended": ended.stack(), "returns": returns.stack()}
    if train:
      out.update(self._updates())
    return out
