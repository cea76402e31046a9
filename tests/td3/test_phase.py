"""TD3's compiled training phase (tfrl/td3/phase.py): its env steps are the
env's own episodes with the behaviour actions it says, and its updates give
the losses and weights of the Python-loop phase (sampled batches handed to
`learner.update`) on the same draws."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.envs import EnvProtocol
from tfrl.envs.mujoco_env import MujocoEnv
from tfrl.envs.single_env import make_single_env
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner
from tfrl.td3 import ReplayBuffer
from tfrl.td3 import loop
from tfrl.td3 import phase as phase_lib

_SEED = 5


def _phase(protocol, learner_seed=0, **changes):
  """(phase, learner, replay, env_steps, episodes) of a small TD3 on `protocol`."""
  config = TD3Config(protocol=protocol, hidden_sizes=(16, 16), batch_size=8, update_every=6,
                     seed=_SEED, **changes)
  env = loop.continuous_env(protocol, _SEED)
  obs_dim = env.observation_space.shape[0]
  tf.random.set_seed(learner_seed)
  learner = TD3Learner(config, obs_dim, env.action_space.low, env.action_space.high)
  replay = ReplayBuffer(obs_dim, learner.action_dim, 500)
  env_steps = tf.Variable(0, dtype=tf.int64)
  episodes = tf.Variable(0, dtype=tf.int64)
  phase = phase_lib.TrainingPhase(env, learner, replay, config, env_steps, episodes)
  phase.reseed(_SEED, 0)
  phase.start_episode(_SEED)
  return phase, learner, replay, env_steps, episodes


def _expected_actions(learner, obs, config, count):
  """The behaviour actions of steps 0..count-1 at observations `obs`, drawn as
  the phase draws them (its exploration stream from (seed, step 0))."""
  rng = tf.random.Generator.from_seed(phase_lib.stream_seed(_SEED, 0, phase_lib.EXPLORE))
  low, high = learner.action_low, learner.action_high
  actions = []
  for t in range(count):
    if t < config.start_steps:
      actions.append(rng.uniform(tf.shape(low), low, high))
    else:
      noise = rng.normal(tf.shape(low)) * config.exploration_noise * (high - low) / 2.0
      actions.append(tf.clip_by_value(learner.actor(obs[t][None])[0] + noise, low, high))
  return np.stack(actions)


class CollectTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(
      ("gymnasium_pendulum", EnvProtocol(env="Pendulum-v1", max_episode_frames=9), 40),
      ("ops_halfcheetah", EnvProtocol(env="HalfCheetah-v5", max_episode_frames=9,
                                      env_implementation="ops"), 40),
      ("ops_humanoid_terminates", EnvProtocol(env="Humanoid-v5", env_implementation="ops"),
       120))
  def test_steps_are_the_envs_episodes(self, protocol, steps):
    phase, learner, replay, env_steps, episodes = _phase(protocol, start_steps=steps // 2)
    if protocol.env_implementation == "ops":
      self.assertIsInstance(phase._env, MujocoEnv)  # stepped by the op, in the graph
    out = phase.run(tf.constant(steps), False)
    self.assertEqual((int(env_steps), replay.size), (steps, steps))
    obs, action, reward, next_obs, discount = (f.numpy() for f in replay.gather(tf.range(steps)))
    # The same episodes stepped in Python (gymnasium's API) with those actions.
    env = make_single_env(protocol, _SEED)
    current, _ = env.reset(seed=_SEED)
    episode, total, returns = 0, 0.0, []
    for t in range(steps):
      self.assertAllEqual(obs[t], current.astype(np.float32))
      current, r, terminated, truncated, _ = env.step(action[t])
      self.assertAllEqual(next_obs[t], current.astype(np.float32))
      self.assertEqual(reward[t], np.float32(r))
      self.assertEqual(discount[t], 0.0 if terminated else 1.0)
      total += r
      if terminated or truncated:
        returns.append(total)
        episode, total = episode + 1, 0.0
        current, _ = env.reset(seed=_SEED + episode)
    self.assertGreaterEqual(len(returns), 2)
    self.assertEqual(int(episodes), len(returns))
    self.assertAllClose(out["returns"].numpy()[out["ended"].numpy()], returns, rtol=1e-12)
    if protocol.env == "Humanoid-v5":
      self.assertIn(0.0, discount)  # it fell: a true termination
    self.assertAllClose(action, _expected_actions(learner, obs, phase._config, steps),
                        atol=1e-6)
    # The next call goes on from the episode under way.
    phase.run(tf.constant(3), False)
    self.assertAllEqual(replay.gather(tf.constant(steps))[0], current.astype(np.float32))


class UpdatesTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None

  @parameterized.parameters(False, True)
  def test_compiled_phase_equals_the_python_loop_phase(self, jit_compile):
    protocol = EnvProtocol(env="Pendulum-v1")
    phase, learner, replay, _, _ = _phase(protocol, start_steps=10, jit_compile=jit_compile)
    phase.run(tf.constant(12), False)  # random, then policy steps: the replay's rows
    # The Python-loop phase: a copy of the learner, batches sampled in Python
    # and handed to `learner.update`, the same random streams.
    config = phase._config
    twin = TD3Learner(config, learner.obs_dim, learner.action_low, learner.action_high)
    tl.copy_variables(learner, twin)
    sample_rng, smooth_rng = (
        tf.random.Generator.from_state(g.state.numpy(), g.algorithm)
        for g in (phase.generators[phase_lib.SAMPLE], phase.generators[phase_lib.SMOOTH]))
    out = phase.run(tf.constant(6), True)  # the step at t = 18 trains
    k, b = config.update_every, config.batch_size
    batch = [f.numpy() for f in replay.sample(sample_rng, k, b)]
    normal = smooth_rng.normal([k, b, learner.action_dim]).numpy()
    metrics = twin.update(*batch, normal)
    self.assertEqual(int(learner.num_updates), k)
    # Equal up to float32 rounding (grappler optimizes each graph as a whole:
    # a loss may differ in its last bit).
    for key in ("critic_loss", "actor_loss", "q_mean"):
      self.assertAllClose(out[key], metrics[key], rtol=1e-6, msg=key)
    for mine, theirs in zip(learner.variables, twin.variables):
      self.assertAllClose(mine, theirs, rtol=1e-5, atol=1e-7, msg=mine.name)


if __name__ == "__main__":
  tf.test.main()
