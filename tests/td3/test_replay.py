"""TD3's graph-side replay buffer: rows as written, uniform sampling over the
filled rows only (never an unwritten row), the ring's wrap, save and load."""

import os

import numpy as np
import tensorflow as tf

from tfrl import resume
from tfrl.td3 import ReplayBuffer

_OBS, _ACT = 3, 2


def _fill(replay, count, start=0):
  """Transition i: obs = i, action = -i, reward = i + 1 (never 0: a written
  row), next_obs = i + 0.5, terminated every 4th."""
  for i in range(start, start + count):
    replay.add(np.full(_OBS, i, np.float64), np.full(_ACT, -i, np.float32), np.float32(i + 1),
               np.full(_OBS, i + 0.5), i % 4 == 3)


class ReplayTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_rows_hold_the_transitions(self):
    replay = ReplayBuffer(_OBS, _ACT, 10)
    _fill(replay, 4)
    self.assertEqual((replay.size, replay.index), (4, 4))
    obs, action, reward, next_obs, discount = replay.gather(tf.constant([[3, 0]]))
    self.assertAllEqual(obs, [[[3.0] * _OBS, [0.0] * _OBS]])
    self.assertAllEqual(action, [[[-3.0] * _ACT, [0.0] * _ACT]])
    self.assertAllEqual(reward, [[4.0, 1.0]])
    self.assertAllEqual(next_obs, [[[3.5] * _OBS, [0.5] * _OBS]])
    self.assertAllEqual(discount, [[0.0, 1.0]])  # 0 after a termination

  def test_sampling_is_uniform_over_the_filled_rows(self):
    replay = ReplayBuffer(_OBS, _ACT, 100)
    _fill(replay, 37)
    rng = tf.random.Generator.from_seed(1)
    indices = replay.sample_indices(rng, 40, 5000).numpy()
    self.assertEqual(indices.shape, (40, 5000))
    self.assertGreaterEqual(indices.min(), 0)
    self.assertLess(indices.max(), 37)  # never an unwritten row
    counts = np.bincount(indices.ravel(), minlength=37)
    expected = indices.size / 37
    # Chi-square with 36 degrees of freedom: 80 is beyond its 99.99th percentile.
    self.assertLess(np.sum((counts - expected) ** 2 / expected), 80.0)
    _, _, reward, _, _ = replay.sample(rng, 8, 256)
    self.assertTrue(np.all(reward.numpy() >= 1.0))  # written rows only

  def test_the_ring_overwrites_the_oldest_rows(self):
    replay = ReplayBuffer(_OBS, _ACT, 8)
    _fill(replay, 11)
    self.assertEqual((replay.size, replay.index), (8, 3))
    _, _, reward, _, _ = replay.gather(tf.range(8))
    self.assertAllEqual(reward, [9, 10, 11, 4, 5, 6, 7, 8])
    indices = replay.sample_indices(tf.random.Generator.from_seed(2), 1, 8000).numpy()
    self.assertEqual(set(indices.ravel().tolist()), set(range(8)))

  def test_sampling_an_empty_buffer_is_refused(self):
    replay = ReplayBuffer(_OBS, _ACT, 8)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "empty buffer"):
      replay.sample(tf.random.Generator.from_seed(0), 1, 2)

  def test_save_and_load(self):
    replay = ReplayBuffer(_OBS, _ACT, 8)
    _fill(replay, 11)
    path = os.path.join(self.get_temp_dir(), "replay.npz")
    replay.save(path)
    with np.load(path) as data:
      self.assertEqual(sorted(data.files), ["action", "discount", "index", "next_obs", "obs",
                                            "reward", "size"])
      self.assertEqual(data["obs"].shape, (8, _OBS))
      self.assertEqual(data["reward"].shape, (8,))
    loaded = ReplayBuffer(_OBS, _ACT, 8)
    loaded.load(path)
    self.assertEqual((loaded.size, loaded.index), (8, 3))
    for mine, theirs in zip(replay.gather(tf.range(8)), loaded.gather(tf.range(8))):
      self.assertAllEqual(mine, theirs)
    with self.assertRaisesRegex(resume.CorruptCheckpoint, "capacity 4"):
      ReplayBuffer(_OBS, _ACT, 4).load(path)
    with self.assertRaisesRegex(resume.CorruptCheckpoint, "obs has shape"):
      ReplayBuffer(_OBS + 1, _ACT, 8).load(path)

  def test_bad_sizes_are_named(self):
    with self.assertRaisesRegex(ValueError, "capacity must be a positive int, got 0"):
      ReplayBuffer(_OBS, _ACT, 0)


if __name__ == "__main__":
  tf.test.main()
