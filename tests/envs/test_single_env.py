"""make_single_env (TD3's training env) plays gymnasium's own env's episodes:
the same observations bit for bit, rewards (to float32), ends and resets."""

import numpy as np
import tensorflow as tf

from tfrl.envs import EnvProtocol
from tfrl.envs.gym_make import make_gymnasium
from tfrl.envs.mujoco_env import MujocoEnv
from tfrl.envs.single_env import SingleEnv, make_single_env


class SingleEnvTest(tf.test.TestCase):

  def play_both(self, protocol, steps):
    ours = make_single_env(protocol, seed=3)
    theirs = make_gymnasium(protocol.env, protocol.max_episode_steps)
    self.assertEqual(ours.observation_space, theirs.observation_space)
    self.assertEqual(ours.action_space, theirs.action_space)
    rng = np.random.default_rng(0)
    episode = 0
    a, _ = ours.reset(seed=episode)
    b, _ = theirs.reset(seed=episode)
    ends = []
    for t in range(steps):
      self.assertAllEqual(a, b)
      self.assertEqual(a.dtype, b.dtype)
      action = rng.uniform(-1, 1, ours.action_space.shape).astype(np.float32)
      a, reward, terminated, truncated, _ = ours.step(action)
      b, their_reward, their_terminated, their_truncated, _ = theirs.step(action)
      self.assertIsInstance(reward, float)
      self.assertEqual(reward, float(np.float32(their_reward)))
      self.assertEqual((terminated, truncated), (their_terminated, their_truncated))
      if terminated or truncated:
        ends.append((t, terminated))
        episode += 1
        a, _ = ours.reset(seed=episode)
        b, _ = theirs.reset(seed=episode)
    return ours, ends

  def test_half_cheetah_on_the_ops_is_gymnasiums(self):
    ours, ends = self.play_both(EnvProtocol(env="HalfCheetah-v5", max_episode_frames=40), 90)
    self.assertIsInstance(ours.env, MujocoEnv)
    self.assertEqual(ends, [(39, False), (79, False)])  # truncated at the cap

  def test_humanoid_terminates_as_gymnasiums(self):
    _, ends = self.play_both(EnvProtocol(env="Humanoid-v5"), 60)
    self.assertTrue(any(terminated for _, terminated in ends))

  def test_random_actions_depend_on_the_seed(self):
    protocol = EnvProtocol(env="Pendulum-v1")
    draws = [[make_single_env(protocol, seed).action_space.sample() for _ in range(1)]
             for seed in (1, 1, 2)]
    self.assertAllEqual(draws[0], draws[1])
    self.assertNotAllEqual(draws[0], draws[2])

  def test_an_ended_episode_needs_a_reset(self):
    env = make_single_env(EnvProtocol(env="HalfCheetah-v5", max_episode_frames=1))
    env.reset(seed=0)
    self.assertTrue(env.step(np.zeros(6, np.float32))[3])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "needs a reset"):
      env.step(np.zeros(6, np.float32))

  def test_only_one_slot_of_a_gymnasium_env(self):
    from tfrl.envs import make_env  # pylint: disable=import-outside-toplevel
    with self.assertRaisesRegex(ValueError, "one-slot env, got 2 slots"):
      SingleEnv(make_env(EnvProtocol(env="Pendulum-v1"), 2))


if __name__ == "__main__":
  tf.test.main()
