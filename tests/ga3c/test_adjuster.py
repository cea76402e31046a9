"""Dynamic adjustment of NA/NP/NT by hill climbing on the training rate."""

import tensorflow as tf

from tfrl.ga3c.adjuster import Bounds, DynamicAdjuster


class DynamicAdjusterTest(tf.test.TestCase):
  test_session = None

  def test_keeps_improvements_and_reverts_regressions(self):
    adj = DynamicAdjuster((4, 1, 1), Bounds(8, 2, 2), seed=3)
    trial = adj.update(100.0)            # Baseline measured, trial proposed.
    self.assertNotEqual(trial, (4, 1, 1))
    self.assertEqual(sum(abs(a - b) for a, b in zip(trial, (4, 1, 1))), 1)
    self.assertEqual(adj.update(150.0), trial)   # Better: kept.
    trial2 = adj.update(150.0)
    self.assertEqual(adj.update(10.0), trial)    # Worse: reverted.
    self.assertNotEqual(trial2, trial)

  def test_climbs_to_the_best_agent_count(self):
    # Rate peaks at 6 agents; predictors/trainers do not matter.
    rate = lambda c: 100 - (c[0] - 6) ** 2 - 5 * (c[1] - 1) - 5 * (c[2] - 1)
    adj = DynamicAdjuster((1, 1, 1), Bounds(10, 3, 3), seed=0)
    counts = adj.current
    for _ in range(200):
      counts = adj.update(rate(counts))
    self.assertEqual(adj.current, (6, 1, 1))

  def test_respects_bounds(self):
    adj = DynamicAdjuster((1, 1, 1), Bounds(1, 1, 2), seed=0)
    for i in range(20):
      counts = adj.update(float(i))
      self.assertTrue(counts[0] == 1 and counts[1] == 1 and 1 <= counts[2] <= 2)


if __name__ == "__main__":
  tf.test.main()
