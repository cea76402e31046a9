"""AtariVectorEnv: the op env through gymnasium's VectorEnv API."""

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.envs import AtariEnv, AtariVectorEnv


class AtariVectorEnvTest(tf.test.TestCase):

  def test_spaces_and_step_api(self):
    env = AtariVectorEnv("PongNoFrameskip-v4", 3)
    self.assertIsInstance(env, gym.vector.VectorEnv)
    self.assertEqual(env.single_observation_space.shape, (84, 84, 4))
    self.assertEqual(env.single_action_space.n, 6)
    obs, info = env.reset(seed=3)
    self.assertIsInstance(info, dict)
    self.assertTrue(env.observation_space.contains(obs))
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    self.assertTrue(env.observation_space.contains(obs))
    self.assertEqual(reward.shape, (3,))
    self.assertEqual((terminated.dtype, truncated.dtype), (np.bool_, np.bool_))
    env.close()

  def test_same_frames_as_atari_env(self):
    vec = AtariVectorEnv("Breakout", 2, seed=9)
    ops = AtariEnv("Breakout", 2, seed=9)
    obs, _ = vec.reset()
    self.assertAllEqual(obs, ops.reset())
    for _ in range(20):
      self.assertAllEqual(vec.step([1, 3])[0], ops.step([1, 3])[0])

  def test_next_step_autoreset(self):
    env = AtariVectorEnv("Pong", 1, max_episode_frames=40, noop_max=0,
                         fire_reset=False)
    first, _ = env.reset()
    ends = []
    for t in range(12):
      obs, reward, _, truncated, _ = env.step([2])
      if truncated[0]:
        ends.append(t)
        final = obs
      if ends and t == ends[0] + 1:  # The step after the end resets.
        self.assertEqual(reward[0], 0.0)
        self.assertAllEqual(obs, first)
        self.assertNotAllEqual(final, first)
    self.assertEqual(ends[0], 9)  # 40 frames / 4 per step.

  def test_bad_actions(self):
    env = AtariVectorEnv("Pong", 2)
    env.reset()
    with self.assertRaisesRegex(ValueError, "outside the action set 0..5"):
      env.step([0, 9])


if __name__ == "__main__":
  tf.test.main()
