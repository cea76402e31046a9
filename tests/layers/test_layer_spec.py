"""LayerSpec / LayerPlan validation, parsing and the absl flags."""

from absl import flags
from absl.testing import parameterized
import tensorflow as tf

from tfrl import layers as tl
from tfrl.layers import flags as layer_flags


class LayerSpecTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  @parameterized.named_parameters(
      ("kind", dict(kind="conv"), "kind"),
      ("schedule", dict(schedule="cubic"), "schedule"),
      ("block", dict(block_size=0), "block_size"),
      ("nm", dict(nm=(4, 2)), "nm"),
      ("steps", dict(begin_step=10, end_step=5), "begin_step"),
      ("frequency", dict(frequency=0), "frequency"),
      ("regrow", dict(regrow="magic"), "regrow"),
  )
  def test_invalid(self, changes, message):
    with self.assertRaisesRegex(ValueError, message):
      tl.LayerSpec(**changes)

  def test_plan_exact_wins_over_glob(self):
    plan = tl.LayerPlan.parse("critic*/dense_0=pruned:schedule=nm:nm=1x4;"
                              "critic_1/dense_0=circulant:block_size=16",
                              default=tl.LayerSpec(kind="dense"))
    self.assertEqual(plan.spec_for("critic_1/dense_0").kind, "circulant")
    self.assertEqual(plan.spec_for("critic_1/dense_0").block_size, 16)
    self.assertEqual(plan.spec_for("critic_2/dense_0").nm, (1, 4))
    self.assertEqual(plan.spec_for("actor/dense_0").kind, "dense")

  def test_plan_rejects_bad_entries(self):
    with self.assertRaisesRegex(ValueError, "unknown LayerSpec field"):
      tl.LayerPlan.parse("a=pruned:sparsity=0.5")
    with self.assertRaisesRegex(ValueError, "kind"):
      tl.LayerPlan.parse("a=conv")
    with self.assertRaisesRegex(ValueError, "name=kind"):
      tl.LayerPlan.parse("just_a_name")

  def test_flags(self):
    fv = flags.FlagValues()
    layer_flags.define_layer_flags(fv)
    layer_flags.define_layer_flags(fv)  # idempotent.
    fv(["prog", "--dense_layer=pruned", "--pruning_schedule=nm", "--nm=1:4",
        "--circulant_block_size=32", "--layer_plan=policy=dense", "--gst_window=3",
        "--target_sparsity=0.8"])
    plan = layer_flags.layer_plan_from_flags(fv)
    self.assertEqual(plan.default.kind, "pruned")
    self.assertEqual(plan.default.nm, (1, 4))
    self.assertEqual(plan.default.block_size, 32)
    self.assertEqual(plan.spec_for("policy").kind, "dense")
    config = layer_flags.reward_aware_config_from_flags(fv)
    self.assertEqual(config.window, 3)
    self.assertEqual(config.max_sparsity, 0.8)

  def test_make_dense_validates(self):
    with self.assertRaisesRegex(ValueError, "LayerSpec"):
      tl.make_dense(4, "dense")
    with self.assertRaisesRegex(ValueError, "units"):
      tl.make_dense(0, tl.LayerSpec())
    with self.assertRaisesRegex(ValueError, "padding"):
      tl.make_conv2d(4, 3, 1, tl.LayerSpec(), padding="FULL")
    layer = tl.make_dense(4, tl.LayerSpec(), name="torso/dense_0")
    self.assertEqual(layer.name, "dense_0")
    self.assertEqual(layer.plan_name, "torso/dense_0")


if __name__ == "__main__":
  tf.test.main()
