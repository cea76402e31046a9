"""Networks: shapes, stable layer names, the plan swapping variants."""

from absl.testing import parameterized
import tensorflow as tf

from tfrl import layers as tl
from tfrl import networks


class NetworksTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  @parameterized.named_parameters(
      ("atari", networks.AtariTorso, 256, 16 * 8 * 8 * 4 + 32 * 4 * 4 * 16 + 11 * 11 * 32 * 256),
      ("nature", networks.NatureTorso, 512,
       32 * 8 * 8 * 4 + 64 * 4 * 4 * 32 + 64 * 3 * 3 * 64 + 7 * 7 * 64 * 512),
  )
  def test_conv_torsos(self, cls, width, kernel_params):
    net = networks.ActorCritic(6, cls())
    logits, value = net(tf.zeros([3, 84, 84, 4], tf.uint8))
    self.assertEqual(logits.shape, (3, 6))
    self.assertEqual(value.shape, (3,))
    report = tl.compression_report(net)
    self.assertEqual(report["total"]["dense_params"], kernel_params + width * 6 + width)
    self.assertIn("torso/conv_0", report["layers"])
    self.assertIn("torso/dense_0", report["layers"])
    self.assertIn("policy", report["layers"])
    self.assertIn("value", report["layers"])

  def test_plan_swaps_variants_by_name(self):
    plan = tl.LayerPlan.parse("torso/dense_0=circulant:block_size=16;value=dense",
                              default=tl.LayerSpec(kind="pruned", schedule="constant",
                                                   target_sparsity=0.5))
    net = networks.ActorCritic(4, networks.AtariTorso(plan), plan)
    net(tf.zeros([1, 84, 84, 4], tf.uint8))
    self.assertIsInstance(net.torso.dense, tl.BlockCirculantDense)
    self.assertIsInstance(net.torso.convs[0], tl.PrunedConv2D)
    self.assertIsInstance(net.policy, tl.PrunedDense)
    self.assertIsInstance(net.value, tl.Dense)
    self.assertNotIsInstance(net.value, tl.PrunedDense)

  def test_mlp(self):
    net = networks.ActorCritic(2, networks.MLPTorso([32, 16], tl.LayerSpec(kind="circulant",
                                                                          block_size=4)))
    logits, value = net(tf.zeros([5, 3, 4]))
    self.assertEqual(logits.shape, (5, 2))
    self.assertEqual(value.shape, (5,))
    with self.assertRaisesRegex(ValueError, "hidden_sizes"):
      networks.MLPTorso([])
    with self.assertRaisesRegex(ValueError, "num_actions"):
      networks.ActorCritic(0, networks.MLPTorso([4]))


if __name__ == "__main__":
  tf.test.main()
