"""GymEnv: any gymnasium env behind the batched interface."""

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv


class GymEnvTest(tf.test.TestCase):

  def test_discrete_env_steps_and_auto_resets(self):
    env = GymEnv("CartPole-v1", 3, seed=1)
    self.assertEqual((env.num_actions, env.observation_shape), (2, (4,)))
    obs = env.reset()
    self.assertEqual(obs.shape, (3, 4))
    episodes = 0
    for _ in range(200):  # Always pushing left ends episodes fast.
      obs, reward, terminated, truncated = env.step([0, 0, 0])
      self.assertAllEqual(reward, [1.0, 1.0, 1.0])
      episodes += int(tf.reduce_sum(tf.cast(terminated | truncated, tf.int32)))
    self.assertGreater(episodes, 3)
    # Auto-reset: observations stay inside the (reset) state space.
    self.assertLess(float(tf.reduce_max(tf.abs(obs[:, 2]))), 0.25)

  def test_only_played_resets_keep_unplayed_episodes(self):
    env = GymEnv("CartPole-v1", 2, seed=1)
    first = env.reset().numpy()
    self.assertAllEqual(env.reset(only_played=True), first)  # nothing played yet
    stepped = env.step([0], indices=[0])[0].numpy()
    again = env.reset(only_played=True).numpy()
    self.assertNotAllClose(again[0], stepped[0])  # slot 0 played: a new episode
    self.assertAllEqual(again[1], first[1])         # slot 1 kept its episode

  def test_seeded_and_deterministic(self):
    a, b = GymEnv("CartPole-v1", 2, seed=4), GymEnv("CartPole-v1", 2, seed=4)
    self.assertAllEqual(a.reset(), b.reset())
    for _ in range(20):
      self.assertAllEqual(a.step([1, 0])[0], b.step([1, 0])[0])

  def test_seeded_reset_matches_gymnasium(self):
    env = GymEnv("CartPole-v1", 3, seed=1)
    env.reset()
    for _ in range(5):  # the slots have played: a seeded reset does not care
      env.step([0, 1, 0])
    for seed in (0, 5, 2 ** 31 - 1):
      ref = gym.make("CartPole-v1")
      want, _ = ref.reset(seed=seed)
      other, _ = gym.make("CartPole-v1").reset(seed=seed // 2 + 1)
      obs = env.reset([2, 0], seeds=[seed, seed // 2 + 1]).numpy()
      self.assertAllEqual(obs[0], want)
      self.assertAllEqual(obs[1], other)
      for action in (1, 0, 0, 1):
        self.assertAllEqual(env.step([action], indices=[2])[0][0], ref.step(action)[0])
    self.assertNotAllEqual(env.reset([0], seeds=[1]), env.reset([0], seeds=[2]))
    with self.assertRaisesRegex(Exception, "one per index"):
      env.reset([0, 1], seeds=[1])
    with self.assertRaisesRegex(Exception, r"in \[0, 2\^31\)"):
      env.reset([0, 1], seeds=[1, 2 ** 31])
    env.step([0, 0, 0])  # still usable

  def test_without_auto_reset_the_final_observation_stays(self):
    ref = gym.make("CartPole-v1")
    ref.reset(seed=3)
    env = GymEnv("CartPole-v1", 2, seed=0, auto_reset=False)
    auto = GymEnv("CartPole-v1", 2, seed=0)
    env.reset(seeds=[3, 4])
    auto.reset(seeds=[3, 4])
    for t in range(100):  # always pushing left ends the episode fast
      want, _, ref_terminated, _, _ = ref.step(0)
      obs, _, terminated, _ = env.step([0], indices=[0])
      auto_obs, _, _, _ = auto.step([0], indices=[0])
      self.assertEqual(bool(terminated[0]), ref_terminated)
      self.assertAllEqual(obs[0], want)  # the final observation too
      if ref_terminated:
        break
    self.assertTrue(ref_terminated, f"not terminated after {t + 1} steps")
    self.assertGreater(abs(float(obs[0, 2])), 0.2)  # the pole past its end
    self.assertNotAllClose(auto_obs[0], want)      # auto-reset: a new episode
    self.assertLess(float(tf.reduce_max(tf.abs(auto_obs))), 0.05)
    # The other slot is untouched, and a reset starts the next episode.
    self.assertAllEqual(env.step([1], indices=[1])[0][0],
                        auto.step([1], indices=[1])[0][0])
    fresh = env.reset([0], only_played=True).numpy()[0]
    self.assertLess(float(np.abs(fresh).max()), 0.05)

  def test_inside_tf_function_with_subsets(self):
    env = GymEnv("CartPole-v1", 4)
    env.reset()

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int32),
                                  tf.TensorSpec([2], tf.int32)])
    def step(actions, indices):
      return env.step(actions, indices)

    obs, reward, _, _ = step(tf.constant([0, 1]), tf.constant([3, 1]))
    self.assertEqual(obs.shape, (2, 4))
    self.assertAllEqual(reward, [1.0, 1.0])

  def test_continuous_actions(self):
    env = GymEnv("Pendulum-v1", 2)
    self.assertIsNone(env.num_actions)
    self.assertEqual((env.action_shape, env.action_dtype), ((1,), tf.float32))
    env.reset()
    _, reward, _, _ = env.step(np.zeros((2, 1), np.float32))
    self.assertEqual(reward.shape, (2,))

  def test_bad_input(self):
    env = GymEnv("CartPole-v1", 2)
    env.reset()
    with self.assertRaisesRegex(Exception, r"action 7 .* outside the action set 0..1"):
      env.step([7, 0])
    with self.assertRaisesRegex(Exception, r"env index 2 is out of range: allowed 0..1"):
      env.step([0], indices=[2])
    with self.assertRaisesRegex(ValueError, "num_envs"):
      GymEnv("CartPole-v1", 0)
    with self.assertRaisesRegex(ValueError, "Unknown or unusable gymnasium env"):
      GymEnv("NoSuchEnv-v0", 1)


if __name__ == "__main__":
  tf.test.main()
