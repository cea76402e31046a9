"""Sparsity distributions: ERK's per-layer targets, their plan, TD3's masks."""

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.layers import distribution
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner
from tfrl.td3 import networks

# HalfCheetah's TD3 actor: 17 observations, 256x256, 6 actions.
_ACTOR = {"in": (17, 256), "hidden": (256, 256), "out": (256, 6)}


class ERKTest(tf.test.TestCase):

  def test_the_actor_of_halfcheetah(self):
    sparsity = distribution.erk_sparsities(_ACTOR, 0.9)
    sizes = {name: a * b for name, (a, b) in _ACTOR.items()}
    kept = sum((1 - sparsity[n]) * sizes[n] for n in sizes)
    self.assertAllClose(kept, 0.1 * sum(sizes.values()), rtol=1e-9)
    # (256 + 6) / (256 * 6) scaled would exceed 1: the output layer stays dense.
    self.assertEqual(sparsity["out"], 0.0)
    # Worked by hand: the other two share 7,142.4 - 1,536 kept weights in the
    # ratio of n_in + n_out (273 : 512).
    scale = (0.1 * 71_424 - 1_536) / (273 + 512)
    self.assertAllClose(sparsity["in"], 1 - scale * 273 / 4_352)
    self.assertAllClose(sparsity["hidden"], 1 - scale * 512 / 65_536)
    self.assertLess(sparsity["in"], 0.9)
    self.assertGreater(sparsity["hidden"], 0.9)

  def test_square_layers_of_one_size_are_uniform(self):
    sparsity = distribution.erk_sparsities({"a": (64, 64), "b": (64, 64)}, 0.75)
    self.assertAllClose(list(sparsity.values()), [0.75, 0.75])

  def test_bad_average_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"average must be in \[0, 1\), got 1.0"):
      distribution.erk_sparsities(_ACTOR, 1.0)


class ResolveTest(tf.test.TestCase):

  def _plan(self, text=""):
    spec = tl.LayerSpec(kind="pruned", schedule="constant", target_sparsity=0.9)
    return tl.LayerPlan.parse(text, default=spec, distribution="erk")

  def test_each_network_gets_its_own_spread(self):
    shapes = networks.layer_shapes(17, 6, (256, 256))
    plan = distribution.resolve(self._plan(), shapes)
    self.assertEqual(plan.distribution, "uniform")
    for network, layers in shapes.items():
      total = sum(a * b for a, b in layers.values())
      kept = sum((1 - plan.spec_for(name).target_sparsity) * a * b
                 for name, (a, b) in layers.items())
      self.assertAllClose(kept, 0.1 * total, msg=network)
    self.assertEqual(plan.spec_for("critic_1/out").target_sparsity, 0.0)
    self.assertEqual(plan.spec_for("critic_2/dense_0").target_sparsity,
                     plan.spec_for("critic_1/dense_0").target_sparsity)

  def test_layers_the_plan_keeps_dense_do_not_count(self):
    shapes = networks.layer_shapes(17, 6, (256, 256))
    plan = distribution.resolve(self._plan("actor/out=dense;critic*/out=dense"), shapes)
    self.assertEqual(plan.spec_for("actor/out").kind, "dense")
    layers = {n: s for n, s in shapes["actor"].items() if n != "actor/out"}
    kept = sum((1 - plan.spec_for(n).target_sparsity) * a * b for n, (a, b) in layers.items())
    self.assertAllClose(kept, 0.1 * sum(a * b for a, b in layers.values()))
    self.assertEqual(plan.spec_for("actor/dense_0").schedule, "constant")

  def test_uniform_plans_pass_unchanged_and_other_algorithms_refuse_erk(self):
    uniform = tl.LayerPlan(default=tl.LayerSpec(kind="pruned"))
    self.assertIs(distribution.resolve(uniform, {}), uniform)
    with self.assertRaisesRegex(ValueError, "--sparsity_distribution=erk is for TD3's networks; "
                                "GA3C prunes with --sparsity_distribution=uniform."):
      distribution.require_uniform(self._plan(), "GA3C")
    with self.assertRaisesRegex(ValueError, "distribution must be one of"):
      tl.LayerPlan(distribution="random")

  def test_td3_masks_follow_the_resolved_targets(self):
    shapes = networks.layer_shapes(3, 1, (64, 64))
    plan = distribution.resolve(self._plan(), shapes)
    learner = TD3Learner(TD3Config(hidden_sizes=(64, 64)), 3, [-1.0], [1.0], plan)
    for network in learner.networks:
      for layer in tl.layers_of(network):
        expected = plan.spec_for(layer.plan_name).target_sparsity
        self.assertAllClose(float(layer.sparsity()), expected, atol=1.0 / layer.mask.shape[0],
                            msg=layer.plan_name)
    self.assertGreater(float(learner.critic_1.hidden[1].sparsity()), 0.9)
    self.assertTrue(np.isclose(float(learner.critic_1.out.sparsity()), 0.0))


if __name__ == "__main__":
  tf.test.main()
