"""GST: the per-layer rule, the reward-aware controller, compression metrics."""

import math

from absl.testing import parameterized
import tensorflow as tf

from tfrl import layers as tl
from tfrl import networks
from tfrl.layers.dual_mode import DualModeDense


class RewardAwareControllerTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_follows_documented_rule_on_scripted_returns(self):
    config = tl.RewardAwareConfig(initial_sparsity=0.0, max_sparsity=0.3, window=2,
                                  tolerance=0.05, backoff=0.2, step_up=0.1, step_down=0.1,
                                  reward_scale=1.0)
    c = tl.RewardAwareController(config)
    script = [
        # (new returns, expected decision, expected sparsity, expected reference)
        ([100.0], "wait", 0.0, -math.inf),
        ([100.0], "raise", 0.1, 100.0),      # first full window: m=100 >= -inf.
        ([98.0, 98.0], "raise", 0.2, 100.0),  # 98 >= 100 - 5: holds up; R stays max.
        ([90.0, 90.0], "hold", 0.2, 100.0),   # 80 <= 90 < 95: hold.
        ([70.0, 70.0], "backoff", 0.1, 100.0),  # 70 < 80: back off.
        ([60.0, 60.0], "backoff", 0.0, 100.0),
        ([60.0, 60.0], "backoff", 0.0, 100.0),  # clipped at min_sparsity.
        ([120.0, 120.0], "raise", 0.1, 120.0),
        ([130.0, 130.0], "raise", 0.2, 130.0),
        ([130.0, 130.0], "raise", 0.3, 130.0),
        ([130.0, 130.0], "raise", 0.3, 130.0),  # clipped at max_sparsity.
    ]
    for returns, decision, sparsity, reference in script:
      for r in returns:
        c.record_return(r)
      self.assertEqual(c.decide(), decision)
      self.assertAllClose(float(c.sparsity.numpy()), sparsity)
      self.assertEqual(float(c.reference.numpy()), reference)

  def test_each_decision_needs_a_fresh_window(self):
    # One bad stretch of episodes gives one back-off, not one per call.
    c = tl.RewardAwareController(tl.RewardAwareConfig(window=3, step_up=0.1, step_down=0.1,
                                                      max_sparsity=0.5))
    for r in (100.0, 100.0, 100.0):
      c.record_return(r)
    self.assertEqual(c.decide(), "raise")
    self.assertEqual(c.decide(), "wait")
    for r in (10.0, 10.0):
      c.record_return(r)
    self.assertEqual(c.decide(), "wait")   # 2 of 3 new returns.
    c.record_return(10.0)
    self.assertEqual(c.decide(), "backoff")
    for _ in range(5):
      self.assertEqual(c.decide(), "wait")
    self.assertAllClose(float(c.sparsity.numpy()), 0.0)
    for r in (10.0, 10.0, 10.0):
      c.record_return(r)
    self.assertEqual(c.decide(), "backoff")  # a second bad window: a second back-off.

  def test_decision_due_on_frequency_multiples_within_begin_end(self):
    spec = tl.LayerSpec(kind="gst", begin_step=2000, end_step=5000, frequency=1000)
    due = tl.RewardAwareController.decision_due
    self.assertFalse(due(spec, 900, 1900))    # crosses 1000 < begin.
    self.assertTrue(due(spec, 1950, 2000))    # reaches 2000 = begin.
    self.assertFalse(due(spec, 2000, 2999))   # no multiple crossed.
    self.assertTrue(due(spec, 2999, 3050))
    self.assertTrue(due(spec, 4990, 5000))    # end is inclusive.
    self.assertFalse(due(spec, 5000, 6000))   # past end.

  def test_negative_returns_use_abs_scale(self):
    c = tl.RewardAwareController(tl.RewardAwareConfig(window=1, tolerance=0.1, backoff=0.5,
                                                      step_up=0.1, max_sparsity=0.5))
    c.record_return(-200.0)
    self.assertEqual(c.decide(), "raise")
    c.record_return(-215.0)   # within 10 % of |-200|.
    self.assertEqual(c.decide(), "raise")
    c.record_return(-250.0)   # below -220, above -300.
    self.assertEqual(c.decide(), "hold")
    c.record_return(-400.0)
    self.assertEqual(c.decide(), "backoff")

  def test_update_drives_reward_aware_layers(self):
    spec = tl.LayerSpec(kind="gst", gst_mode="fixed", gst_min_dim=32, begin_step=0,
                        end_step=100, frequency=1)
    dual = networks.MLPTorso([64, 64], spec.replace(gst_mode="dual"))
    dual(tf.zeros([1, 8]))
    self.assertIsInstance(dual.hidden[1].inner, DualModeDense)          # 64 -> 64, dual mode
    net = networks.MLPTorso([64, 64], spec)
    head = tl.make_dense(2, spec, name="head")
    x = tf.random.normal([4, 8])
    head(net(x))
    self.assertIsInstance(net.hidden[0].inner, tl.PrunedDense)         # 8 -> 64
    self.assertIsInstance(net.hidden[1].inner, tl.BlockCirculantDense)  # 64 -> 64, fixed
    self.assertIsInstance(head.inner, tl.PrunedDense)                  # 64 -> 2
    c = tl.RewardAwareController(tl.RewardAwareConfig(window=1, step_up=0.5, max_sparsity=0.5))
    c.record_return(1.0)
    self.assertEqual(c.update([net, head]), "raise")
    tl.after_update([net, head])   # step 1 is a pruning step (frequency 1).
    self.assertAllClose(float(net.hidden[0].inner.sparsity()), 0.5, atol=0.01)
    self.assertAllClose(float(head.inner.sparsity()), 0.5, atol=0.01)

  def test_checkpoint(self):
    c = tl.RewardAwareController(tl.RewardAwareConfig(window=1))
    c.record_return(3.0)
    c.decide()
    path = tf.train.Checkpoint(c=c).save(self.get_temp_dir() + "/ck")
    c2 = tl.RewardAwareController(tl.RewardAwareConfig(window=1))
    tf.train.Checkpoint(c=c2).restore(path).assert_consumed()
    self.assertEqual(float(c2.sparsity.numpy()), float(c.sparsity.numpy()))
    self.assertEqual(float(c2.reference.numpy()), 3.0)

  def test_invalid_config(self):
    with self.assertRaisesRegex(ValueError, "backoff"):
      tl.RewardAwareConfig(tolerance=0.3, backoff=0.1)
    with self.assertRaisesRegex(ValueError, "window"):
      tl.RewardAwareConfig(window=0)


class CompressionTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_report_and_average(self):
    circ = tl.make_dense(64, tl.LayerSpec(kind="circulant", block_size=8), name="a/circ")
    prn = tl.make_dense(64, tl.LayerSpec(kind="pruned", schedule="constant",
                                         target_sparsity=0.5, begin_step=10, end_step=10),
                        name="a/prn")
    module = tf.Module()
    module.layers = [circ, prn]
    circ(tf.zeros([1, 64]))
    prn(tf.zeros([1, 64]))
    report = tl.compression_report(module)
    self.assertEqual(set(report["layers"]), {"a/circ", "a/prn"})
    self.assertAllClose(report["layers"]["a/circ"]["compression_ratio"], 1 - 1 / 8)
    self.assertEqual(report["layers"]["a/circ"]["stored_params"], 64 * 64 // 8)
    self.assertAllClose(report["layers"]["a/prn"]["compression_ratio"], 0.0)
    self.assertAllClose(report["total"]["compression_ratio"], (0.875 + 0.0) / 2)
    tracker = tl.CompressionTracker()
    tracker.record(10, module)          # steps 1..10 at 0.4375
    for _ in range(10):
      tl.after_update(module)           # step 10 prunes prn to 0.5.
    tracker.record(30, module)          # steps 11..30 at 0.6875
    self.assertAllClose(tracker.average(), (10 * 0.4375 + 20 * 0.6875) / 30)
    # Bitmask (n / 8 bytes) + 4 bytes per kept weight + 4 bytes per bias entry.
    self.assertEqual(report["layers"]["a/prn"]["bytes"], 64 * 64 // 8 + 4 * 64 * 64 + 4 * 64)


if __name__ == "__main__":
  tf.test.main()
