"""ES pieces: centered ranks, the mirrored gradient estimate, Adam on a quadratic."""

import numpy as np
import tensorflow as tf

from tfrl.es import evolution_strategy
from tfrl.neuroevolution import noise as noise_lib


class ESMathTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    self.table = noise_lib.NoiseTable(1, 200_000)
    self.dim = 20
    self.target = np.linspace(-1, 1, self.dim).astype(np.float32)

  def fitness(self, theta):
    return -np.sum((theta - self.target) ** 2, axis=-1)

  def sample(self, rng, count):
    offsets = self.table.sample_offsets(rng, self.dim, count)
    return np.stack([self.table.get(int(o), self.dim) for o in offsets])

  def test_centered_ranks(self):
    self.assertAllClose(evolution_strategy.centered_ranks([10.0, -3.0, 7.0]), [0.5, -0.5, 0.0])
    r = evolution_strategy.centered_ranks(np.random.default_rng(0).standard_normal(101))
    self.assertAllClose([r.min(), r.max(), r.mean()], [-0.5, 0.5, 0.0], atol=1e-12)

  def test_nan_returns_rank_last(self):
    # NaN would sort after every number (argsort), i.e. rank first: it ranks last.
    self.assertAllClose(evolution_strategy.centered_ranks([10.0, np.nan, 7.0, -3.0, np.nan]),
                        [0.5, -0.5, 0.25, 0.0, -0.25])
    self.assertAllClose(evolution_strategy.centered_ranks([np.nan, np.nan]), [-0.5, 0.5])
    # Unshaped fitness: the generation's lowest return, no NaN gradient.
    self.assertAllClose(evolution_strategy.worst_for_nan([3.0, np.nan, -2.0]), [3.0, -2.0, -2.0])
    self.assertAllClose(evolution_strategy.worst_for_nan([np.nan, np.nan]), [0.0, 0.0])
    self.assertAllClose(evolution_strategy.worst_for_nan([1.0, 2.0]), [1.0, 2.0])

  def test_gradient_estimate_on_quadratic(self):
    rng = np.random.default_rng(0)
    theta = np.zeros(self.dim, np.float32)
    true = -2.0 * (theta - self.target)
    eps = self.sample(rng, 4000)
    sigma = 0.05
    g = evolution_strategy.estimate_gradient(eps, self.fitness(theta + sigma * eps),
                             self.fitness(theta - sigma * eps), sigma)
    cosine = g @ true / (np.linalg.norm(g) * np.linalg.norm(true))
    self.assertGreater(cosine, 0.99)
    self.assertAllClose(np.linalg.norm(g) / np.linalg.norm(true), 1.0, atol=0.05)
    # With rank shaping the direction survives.
    f = evolution_strategy.centered_ranks(np.concatenate([self.fitness(theta + sigma * eps),
                                          self.fitness(theta - sigma * eps)]))
    g = evolution_strategy.estimate_gradient(eps, f[:4000], f[4000:], sigma)
    self.assertGreater(g @ true / (np.linalg.norm(g) * np.linalg.norm(true)), 0.9)

  def test_es_with_adam_minimises_quadratic(self):
    rng = np.random.default_rng(1)
    theta = np.zeros(self.dim, np.float32)
    adam = evolution_strategy.Adam(self.dim, 0.05)
    start = self.fitness(theta)
    for _ in range(300):
      eps = self.sample(rng, 16)
      f = evolution_strategy.centered_ranks(np.concatenate([self.fitness(theta + 0.05 * eps),
                                            self.fitness(theta - 0.05 * eps)]))
      theta = adam.ascent(theta, evolution_strategy.estimate_gradient(eps, f[:16], f[16:], 0.05))
    self.assertGreater(self.fitness(theta), -0.05)  # from about -7.4
    self.assertLess(start, -5.0)


if __name__ == "__main__":
  tf.test.main()
