"""MujocoEnv: gymnasium's MuJoCo tasks stepped by the MuJoCo ops, checked
step by step against GymEnv (gymnasium's own envs) with the same seeds and
actions: observations bit for bit, rewards and episode ends equal."""

import os
import sys

import numpy as np
import tensorflow as tf

from tfrl.envs import EnvProtocol, GymEnv, make_env
from tfrl.envs import mujoco_env
from tfrl.envs.mujoco_env import MujocoEnv
from tfrl.ops import mujoco as mujoco_ops

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from benchmarks import preset_runs  # pylint: disable=g-import-not-at-top


def random_actions(rng, env, n):
  # Past the bounds too: MuJoCo clamps ctrl, the costs see the raw action.
  low, high = env.action_space.low, env.action_space.high
  return rng.uniform(1.5 * low, 1.5 * high, (n,) + env.action_shape).astype(np.float32)


class MujocoEnvTest(tf.test.TestCase):

  def assert_same_episodes(self, env_id, num_envs, steps, **kwargs):
    """Plays both envs the evaluator's way (seeded resets of finished slots,
    auto_reset off) and compares every output."""
    ours = MujocoEnv(env_id, num_envs, seed=3, auto_reset=False, **kwargs)
    theirs = GymEnv(env_id, num_envs, seed=3, auto_reset=False, **kwargs)
    self.assertEqual(ours.observation_shape, theirs.observation_shape)
    self.assertEqual(ours.observation_dtype, theirs.observation_dtype)
    self.assertAllEqual(ours.action_space.low, theirs.action_space.low)
    self.assertAllEqual(ours.reset(), theirs.reset())
    rng = np.random.default_rng(0)
    episodes, next_seed = 0, 100
    for _ in range(steps):
      actions = random_actions(rng, ours, num_envs)
      a, b = ours.step(actions), theirs.step(actions)
      for x, y in zip(a, b):
        self.assertAllEqual(x, y)
      done = np.flatnonzero((a[2] | a[3]).numpy()).astype(np.int32)
      if done.size:
        episodes += done.size
        seeds = list(range(next_seed, next_seed + done.size))
        next_seed += done.size
        self.assertAllEqual(ours.reset(done, seeds=seeds), theirs.reset(done, seeds=seeds))
    return episodes

  def test_half_cheetah_matches_gymnasium(self):
    # Capped at 40 steps so that episodes end and restart from seeds.
    self.assertGreater(self.assert_same_episodes("HalfCheetah-v5", 3, 130,
                                                 max_episode_steps=40), 6)

  def test_humanoid_matches_gymnasium(self):
    # Random actions topple it within tens of steps: terminations and resets.
    self.assertGreater(self.assert_same_episodes("Humanoid-v5", 3, 120), 3)

  def test_auto_reset_and_only_played_as_gymnasium(self):
    ours = MujocoEnv("Humanoid-v5", 2, seed=5)
    theirs = GymEnv("Humanoid-v5", 2, seed=5)
    self.assertAllEqual(ours.reset(), theirs.reset())
    self.assertAllEqual(ours.reset(only_played=True), theirs.reset(only_played=True))
    rng = np.random.default_rng(1)
    ends = 0
    for t in range(80):
      indices = [t % 2] if t % 3 == 0 else [0, 1]
      actions = random_actions(rng, ours, len(indices))
      a, b = ours.step(actions, indices), theirs.step(actions, indices)
      for x, y in zip(a, b):
        self.assertAllEqual(x, y)
      ends += int(np.sum(a[2].numpy()))
      if t == 40:
        self.assertAllEqual(ours.reset([1, 0], only_played=True),
                            theirs.reset([1, 0], only_played=True))
    self.assertGreater(ends, 1)  # auto-resets (gymnasium's unseeded next episode) ran

  def test_steps_inside_tf_function(self):
    env = MujocoEnv("HalfCheetah-v5", 2, seed=1, auto_reset=False)
    eager = MujocoEnv("HalfCheetah-v5", 2, seed=1, auto_reset=False)
    env.reset()
    eager.reset()
    actions = np.full((2, 6), 0.3, np.float32)

    @tf.function
    def play(n):
      total = tf.zeros([2])
      for _ in tf.range(n):
        _, reward, _, _ = env.step(actions)
        total += reward
      return total
    want = sum(eager.step(actions)[1] for _ in range(5))
    self.assertAllEqual(play(tf.constant(5)), want)

  def test_make_env_picks_the_ops_unless_told_not_to(self):
    protocol = EnvProtocol(env="HalfCheetah-v5")
    self.assertIsInstance(make_env(protocol, 2), MujocoEnv)
    self.assertEqual(protocol.resolved().env_implementation, "ops")  # what a run records
    on_gymnasium = EnvProtocol(env="HalfCheetah-v5", env_implementation="gymnasium")
    self.assertIsInstance(make_env(on_gymnasium, 2), GymEnv)
    self.assertEqual(on_gymnasium.identity()["env_implementation"], "gymnasium")
    explicit = EnvProtocol(env="HalfCheetah-v5", env_implementation="ops")
    self.assertIsInstance(make_env(explicit, 1), MujocoEnv)
    # A render mode needs gymnasium's renderer; other tasks are gymnasium's.
    self.assertIsInstance(make_env(protocol, 1, render_mode="rgb_array"), GymEnv)
    self.assertIsInstance(make_env(EnvProtocol(env="InvertedPendulum-v5"), 1), GymEnv)
    self.assertEqual(EnvProtocol(env="InvertedPendulum-v5").resolved().env_implementation,
                     "gymnasium")
    with self.assertRaisesRegex(ValueError, "do not take \\['render_mode'\\].*use gymnasium"):
      make_env(explicit, 1, render_mode="rgb_array")
    with self.assertRaisesRegex(ValueError, "the MuJoCo ops serve HalfCheetah-v5, Humanoid-v5, "
                                "not InvertedPendulum-v5"):
      make_env(EnvProtocol(env="InvertedPendulum-v5", env_implementation="ops"), 1)

  def test_bad_input_is_refused_and_changes_nothing(self):
    env = MujocoEnv("HalfCheetah-v5", 2, seed=0, auto_reset=False)
    first = env.reset().numpy()
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"out of range: allowed 0\.\.1"):
      env.step(np.zeros((1, 6), np.float32), [2])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "appears twice"):
      env.step(np.zeros((2, 6), np.float32), [1, 1])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"actions must have shape \[1, 6\]"):
      mujoco_ops.step(env._handle, [0], np.zeros((1, 5), np.float32))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "only finite values"):
      mujoco_ops.reset(env._handle, [0], np.full((1, 9), np.nan), np.zeros((1, 9)))
    self.assertAllEqual(env.reset(only_played=True), first)  # nothing moved
    capped = MujocoEnv("HalfCheetah-v5", 1, auto_reset=False, max_episode_steps=2)
    capped.reset()
    capped.step(np.zeros((1, 6), np.float32))
    self.assertAllEqual(capped.step(np.zeros((1, 6), np.float32))[3], [True])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "needs a reset"):
      capped.step(np.zeros((1, 6), np.float32))

  def test_bad_model_or_task_is_one_error(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "unknown MuJoCo task 'ant'"):
      mujoco_ops.env_create(model_path="x.xml", task="ant", num_envs=1)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "could not load"):
      mujoco_ops.env_create(model_path="/nonexistent.xml", task="humanoid", num_envs=1)
    cheetah = GymEnv("HalfCheetah-v5", 1)._envs[0].unwrapped.fullpath
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "is not the model of task"):
      mujoco_ops.env_create(model_path=cheetah, task="humanoid", num_envs=1)
    self.assertTrue(mujoco_env.ops_available())


class EpisodeLimitAndNonFiniteActionsTest(tf.test.TestCase):

  def test_episode_is_truncated_exactly_at_the_ids_1000_steps(self):
    # No max_episode_steps: the id's own limit (HalfCheetah never terminates).
    ours = MujocoEnv("HalfCheetah-v5", 2, seed=4, auto_reset=False)
    theirs = GymEnv("HalfCheetah-v5", 2, seed=4, auto_reset=False)
    self.assertAllEqual(ours.reset(), theirs.reset())
    rng = np.random.default_rng(2)
    truncated_at = []
    for t in range(1, 1001):
      actions = random_actions(rng, ours, 2)
      a, b = ours.step(actions), theirs.step(actions)
      for x, y in zip(a, b):
        self.assertAllEqual(x, y)
      self.assertFalse(np.any(a[2].numpy()))
      if np.any(a[3].numpy()):
        truncated_at.append((t, a[3].numpy().tolist()))
    self.assertEqual(truncated_at, [(1000, [True, True])])
    # Step 1,001 of the episode is refused; a reset starts the next one.
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "needs a reset"):
      ours.step(np.zeros((2, 6), np.float32))
    self.assertAllEqual(ours.reset(seeds=[7, 8]), theirs.reset(seeds=[7, 8]))
    a, b = ours.step(np.zeros((2, 6), np.float32)), theirs.step(np.zeros((2, 6), np.float32))
    for x, y in zip(a, b):
      self.assertAllEqual(x, y)
    self.assertAllEqual(a[3], [False, False])

  def test_auto_reset_plays_on_past_the_limit(self):
    env = MujocoEnv("HalfCheetah-v5", 1, seed=4)
    env.reset()
    actions = np.full((1, 6), 0.5, np.float32)

    @tf.function
    def play(n):
      ends = tf.TensorArray(tf.bool, size=n)
      for t in tf.range(n):
        ends = ends.write(t, env.step(actions)[3][0])
      return ends.stack()
    ends = play(tf.constant(2001)).numpy()
    self.assertEqual(np.flatnonzero(ends).tolist(), [999, 1999])

  def test_non_finite_actions_play_as_gymnasium_and_zero_the_controls(self):
    # As on gymnasium's envs: MuJoCo clamps the controls to their range (+-inf
    # and huge values to its ends) and, with a warning, zeroes a simulation's
    # controls that hold a NaN; the action's cost makes the reward NaN or -inf.
    for env_id in ("HalfCheetah-v5", "Humanoid-v5"):
      ours = MujocoEnv(env_id, 4, seed=6, auto_reset=False)
      theirs = GymEnv(env_id, 4, seed=6, auto_reset=False)
      self.assertAllEqual(ours.reset(), theirs.reset())
      clamped = MujocoEnv(env_id, 4, seed=6, auto_reset=False)
      clamped.reset()
      actions = np.zeros((4,) + ours.action_shape, np.float32)
      actions[0, 0] = np.nan
      actions[1, :] = np.inf
      actions[2, 1] = -np.inf
      actions[3, 0] = 3e38
      a, b = ours.step(actions), theirs.step(actions)
      for x, y in zip(a, b):
        self.assertAllEqual(x, y)  # NaN where gymnasium has NaN
      obs, reward = a[0].numpy(), a[1].numpy()
      self.assertTrue(np.all(np.isfinite(obs)), env_id)
      self.assertTrue(np.isnan(reward[0]), reward)
      self.assertEqual(reward[1], -np.inf)
      low, high = ours.action_space.low, ours.action_space.high
      controls = np.where(np.isnan(actions).any(axis=1, keepdims=True), 0.0,
                          np.clip(actions, low, high)).astype(np.float32)
      self.assertAllEqual(obs, clamped.step(controls)[0])
      # The episodes go on, as gymnasium's.
      rng = np.random.default_rng(3)
      for _ in range(5):
        actions = random_actions(rng, ours, 4)
        for x, y in zip(ours.step(actions), theirs.step(actions)):
          self.assertAllEqual(x, y)


class SameRunOnEitherEnvTest(tf.test.TestCase):

  def run_preset(self, implementation: str, env_class: str):
    """Three generations of a small es_halfcheetah on MujocoEnv (ops) or GymEnv (gymnasium)."""
    _, config = preset_runs.config(
        "es_halfcheetah", ["population=8", "num_envs=4", "max_episode_frames=80",
                           "center_episodes=1", "obs_norm_fraction=0.5", "seed=5",
                           f"env_implementation={implementation}"])
    setup, algorithm = preset_runs.build(config)
    try:
      self.assertIn(f"({env_class})", setup.evaluator.describe())
      scores = [{k: m[k] for k in ("best", "mean", "elite", "frames")}
                for m in (algorithm.step() for _ in range(3))]
      return scores, algorithm.theta.copy(), algorithm.normalizer.arrays()
    finally:
      setup.evaluator.close()

  def test_es_preset_gives_the_same_run_on_the_ops_and_on_gymnasium(self):
    ours, theirs = self.run_preset("ops", "MujocoEnv"), self.run_preset("gymnasium", "GymEnv")
    self.assertEqual(ours[0], theirs[0])
    self.assertAllEqual(ours[1], theirs[1])  # the centre, bit for bit
    self.assertEqual(sorted(ours[2]), sorted(theirs[2]))
    for name in ours[2]:  # and the observation statistics
      self.assertAllEqual(ours[2][name], theirs[2][name])


if __name__ == "__main__":
  tf.test.main()
