"""GST's dual-mode layer: the circulant-to-dense switch, its rule, the controller
on every layer, targets, packing."""

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.layers import dual_mode
from tfrl.layers import gst
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner

_SPEC = tl.LayerSpec(kind="pruned", schedule="reward_aware", block_size=8,
                     target_sparsity=0.9, begin_step=0, end_step=1000, frequency=1,
                     switch_ramp_steps=0)


def _layer(units=32, fan_in=24, spec=_SPEC):
  layer = dual_mode.DualModeDense(units, spec, activation="relu")
  layer(tf.zeros([1, fan_in]))
  return layer


def _circulant_matrix(layer):
  """The layer's kernel written out from its vectors by the circulant definition,
  without tfrl's index table: block (q, p) is C[r, c] = w_qp[(r - c) mod b]."""
  vectors = layer.circulant.vectors.numpy()
  b = layer.spec.block_size
  q_blocks, p_blocks, _ = vectors.shape
  matrix = np.zeros([q_blocks * b, p_blocks * b], np.float32)
  for q in range(q_blocks):
    for p in range(p_blocks):
      for r in range(b):
        for c in range(b):
          matrix[q * b + r, p * b + c] = vectors[q, p, (r - c) % b]
  return matrix[:layer.units, :layer.input_size].T  # [in, out]


class DualModeDenseTest(tf.test.TestCase):

  def test_circulant_mode_computes_the_circulant_matrix(self):
    layer = _layer()
    x = tf.random.normal([7, 24])
    expected = np.maximum(x.numpy() @ _circulant_matrix(layer) + layer.bias.numpy(), 0)
    self.assertAllClose(layer(x), expected, atol=1e-5)
    self.assertTrue(bool(layer.circulant_mode.numpy()))
    self.assertAllClose(layer.circulant_ratio, 0.875)

  def test_switch_keeps_the_outputs(self):
    layer = _layer()
    x = tf.random.normal([9, 24])
    before = layer(x).numpy()
    layer.switch_to_dense()
    self.assertFalse(bool(layer.circulant_mode.numpy()))
    self.assertAllClose(layer(x), before, atol=1e-6)
    self.assertAllClose(layer.kernel, _circulant_matrix(layer), atol=0)

  def test_switch_comes_when_the_target_reaches_the_circulant_ratio(self):
    layer = _layer()
    stored = []
    for target in (0.0, 0.5, 0.87, 0.875, 0.9, 0.6):
      layer.sparsity_target.assign(target)
      layer.after_update()
      stored.append(float(layer.kernel_stats()[1]))
    n = 24 * 32
    circulant_stored = n / 8
    # Circulant (96 stored) until 0.875; then pruned to the target, 0.9; the
    # controller's back-off to 0.6 regrows weights.
    self.assertEqual(stored[:3], [circulant_stored] * 3)
    self.assertEqual(stored[3], round(n * 0.125))
    self.assertEqual(stored[4], round(n * 0.1))
    self.assertEqual(stored[5], round(n * 0.4))
    self.assertFalse(bool(layer.circulant_mode.numpy()))

  def test_a_switched_layer_reaches_its_target_along_the_ramp(self):
    layer = _layer(spec=_SPEC.replace(switch_ramp_steps=8))
    x = tf.random.normal([9, 24])
    layer.after_update()  # step 1: circulant
    before = layer(x).numpy()
    layer.sparsity_target.assign(0.9)
    layer.after_update()  # step 2: the switch, nothing pruned yet
    self.assertFalse(bool(layer.circulant_mode.numpy()))
    self.assertEqual(int(layer.switch_step.numpy()), 2)
    self.assertAllClose(layer(x), before, atol=1e-6)
    self.assertEqual(float(layer.kernel_stats()[1]), 24 * 32)
    sparsities = []
    for _ in range(10):  # steps 3..12
      layer.after_update()
      sparsities.append(float(layer.sparsity()))
    n = 24 * 32
    expected = [0.9 * (1 - (1 - min(d / 8, 1.0)) ** 3) for d in range(1, 11)]
    self.assertAllClose(sparsities, [round(n * s) / n for s in expected], atol=1.5 / n)

  def test_the_kernel_follows_the_vectors_after_each_optimizer_step(self):
    layer = _layer()
    layer.circulant.vectors.assign_add(tf.random.normal(layer.circulant.vectors.shape))
    tl.after_apply(layer)
    self.assertAllClose(layer.kernel, _circulant_matrix(layer), atol=0)
    layer.switch_to_dense()
    kernel = layer.kernel.numpy()
    layer.circulant.vectors.assign_add(tf.ones(layer.circulant.vectors.shape))
    tl.after_apply(layer)  # pruned mode: the kernel is trained itself
    self.assertAllEqual(layer.kernel, kernel)

  def test_gradients_reach_the_form_in_use(self):
    layer = _layer()
    x = tf.random.normal([5, 24])

    @tf.function
    def grads():
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x))
      return tape.gradient(loss, [layer.kernel, layer.circulant.vectors])

    kernel_grad, vectors_grad = grads()
    # While circulant the kernel gets its dense gradient (its optimizer state
    # warms up; its values are overwritten after each step).
    self.assertAllClose(kernel_grad, tf.matmul(x, tf.cast(layer(x) > 0, tf.float32),
                                               transpose_a=True), atol=1e-5)
    # The vectors' gradient is that of the circulant layer they define.
    reference = tl.BlockCirculantDense(32, 8, method="fft", activation="relu")
    reference(x)
    reference.vectors.assign(layer.circulant.vectors)
    reference.bias.assign(layer.bias)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(reference(x))
    self.assertAllClose(vectors_grad, tape.gradient(loss, reference.vectors), atol=1e-5)
    layer.switch_to_dense()
    kernel_grad, vectors_grad = grads()
    self.assertGreater(float(tf.norm(kernel_grad)), 0.0)
    self.assertAllEqual(vectors_grad, tf.zeros_like(layer.circulant.vectors))

  def test_a_target_that_could_never_switch_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"block size 8 compresses 24x32 by 0.8750, more "
                                r"than the largest target sparsity 0.8"):
      _layer(spec=_SPEC.replace(target_sparsity=0.8))
    with self.assertRaisesRegex(ValueError, "schedule is reward_aware"):
      dual_mode.DualModeDense(8, _SPEC.replace(schedule="polynomial"))

  def test_packed_forms_keep_the_outputs(self):
    x = tf.random.normal([4, 24])
    circulant_layer = _layer()
    expected = circulant_layer(x).numpy()
    tl.pack(circulant_layer)
    self.assertAllClose(circulant_layer(x), expected, atol=1e-6)
    self.assertEqual(float(circulant_layer.kernel_stats()[1]), 24 * 32 / 8)
    pruned_layer = _layer()
    pruned_layer.sparsity_target.assign(0.9)
    pruned_layer.after_update()
    expected = pruned_layer(x).numpy()
    tl.pack(pruned_layer)
    self.assertAllClose(pruned_layer(x), expected, atol=1e-6)
    self.assertEqual(float(pruned_layer.kernel_stats()[1]), round(24 * 32 * 0.1))


class DualModeGSTTest(tf.test.TestCase):

  def _learner(self):
    spec = tl.LayerSpec(kind="gst", block_size=8, gst_min_dim=32, target_sparsity=0.9,
                        begin_step=0, end_step=10_000, frequency=1, switch_ramp_steps=0)
    config = TD3Config(hidden_sizes=(32, 32), batch_size=8, policy_delay=1)
    return TD3Learner(config, 3, [-1.0], [1.0], spec)

  def test_the_controller_moves_every_layer_it_governs(self):
    learner = self._learner()
    governed = gst.reward_aware_layers(learner.networks)
    kinds = sorted({type(layer).__name__ for layer in governed})
    self.assertEqual(kinds, ["DualModeDense", "PrunedDense"])
    self.assertLen(governed, 9)  # input, hidden (dual) and output layer of 3 networks
    controller = gst.RewardAwareController(gst.RewardAwareConfig(
        window=2, step_up=0.3, step_down=0.2, tolerance=0.05, backoff=0.2, max_sparsity=0.9))
    for returns, decision, sparsity in (([100, 100], "raise", 0.3),
                                        ([120, 130], "raise", 0.6),
                                        ([50, 60], "backoff", 0.4),
                                        ([130, 140], "raise", 0.7)):
      for r in returns:
        controller.record_return(r)
      self.assertEqual(controller.update(learner.networks), decision)
      for layer in governed:
        self.assertAllClose(layer.sparsity_target, sparsity, msg=layer.plan_name)

  def test_erk_spreads_the_controllers_target_over_each_network(self):
    learner = self._learner()
    controller = gst.RewardAwareController(gst.RewardAwareConfig(
        window=1, step_up=0.85, max_sparsity=0.9, distribution="erk"))
    controller.record_return(1.0)
    self.assertEqual(controller.update(learner.networks), "raise")
    for network in learner.networks:
      layers = gst.reward_aware_layers(network)
      sizes = [layer.kernel.shape.num_elements() for layer in layers]
      kept = sum((1 - float(layer.sparsity_target)) * n for layer, n in zip(layers, sizes))
      self.assertAllClose(kept, 0.15 * sum(sizes), rtol=1e-5, msg=network.name)
      hidden = network.hidden[1].inner
      self.assertGreater(float(hidden.sparsity_target), 0.85)  # the large layer sparser
      self.assertEqual(float(network.out.inner.sparsity_target), 0.0)  # the output dense

  def test_updates_match_those_of_the_circulant_layers_while_circulant(self):
    # The fixed plan's circulant layers expand their vectors at every forward
    # pass; the dual-mode layers read a kernel refreshed after each optimizer
    # step. The same weights and batches must give the same networks, the
    # actor step included (it reads critic 1 right after the critics' step).
    dual = self._learner()
    spec = tl.LayerSpec(kind="gst", block_size=8, gst_min_dim=32, target_sparsity=0.9,
                        begin_step=0, end_step=10_000, frequency=1, gst_mode="fixed",
                        circulant_method="matmul")
    fixed = TD3Learner(TD3Config(hidden_sizes=(32, 32), batch_size=8, policy_delay=1),
                       3, [-1.0], [1.0], spec)
    for net_a, net_b in zip(dual.networks + [dual.target_actor, dual.target_critic_1,
                                              dual.target_critic_2],
                            fixed.networks + [fixed.target_actor, fixed.target_critic_1,
                                              fixed.target_critic_2]):
      layers_a = [l for l in tl.layers_of(net_a) if not isinstance(l, tl.BlockCirculantDense)]
      layers_b = tl.layers_of(net_b)
      self.assertEqual([type(l).__name__ for l in layers_b],
                       ["PrunedDense", "BlockCirculantDense", "PrunedDense"])
      for a, b in zip(layers_a, layers_b, strict=True):
        if isinstance(a, dual_mode.DualModeDense):
          b.vectors.assign(a.circulant.vectors)
        else:
          b.kernel.assign(a.kernel)
        b.bias.assign(a.bias)
    rng = np.random.default_rng(1)
    for _ in range(3):
      batch = (rng.standard_normal([2, 8, 3]), rng.uniform(-1, 1, [2, 8, 1]),
               rng.standard_normal([2, 8]), rng.standard_normal([2, 8, 3]), np.ones([2, 8]),
               rng.standard_normal([2, 8, 1]))
      batch = [tf.constant(a, tf.float32) for a in batch]
      dual.update(*batch)
      fixed.update(*batch)
    obs = tf.constant(rng.standard_normal([6, 3]), tf.float32)
    act = tf.constant(rng.uniform(-1, 1, [6, 1]), tf.float32)
    self.assertAllClose(dual.actor(obs), fixed.actor(obs), atol=1e-5)
    self.assertAllClose(dual.target_actor(obs), fixed.target_actor(obs), atol=1e-5)
    self.assertAllClose(dual.critic_1(obs, act), fixed.critic_1(obs, act), atol=1e-5)
    self.assertAllClose(dual.target_critic_2(obs, act), fixed.target_critic_2(obs, act),
                        atol=1e-5)

  def test_targets_switch_to_the_kernel_they_averaged(self):
    learner = self._learner()
    rng = np.random.default_rng(0)
    batch = (rng.standard_normal([3, 8, 3]), rng.uniform(-1, 1, [3, 8, 1]),
             rng.standard_normal([3, 8]), rng.standard_normal([3, 8, 3]), np.ones([3, 8]),
             rng.standard_normal([3, 8, 1]))
    batch = [tf.constant(a, tf.float32) for a in batch]
    learner.update(*batch)  # circulant mode: vectors and mirrored kernels move
    obs = tf.constant(rng.standard_normal([6, 3]), tf.float32)
    before = learner.target_actor(obs).numpy()
    target_layer = learner.target_actor.hidden[1].inner
    self.assertTrue(bool(target_layer.circulant_mode.numpy()))
    # The target's kernel is exactly its own vectors' (the average of copies).
    self.assertAllEqual(target_layer.kernel, target_layer.circulant.to_dense())
    for layer in gst.reward_aware_layers(learner.networks):
      layer.sparsity_target.assign(0.875)  # the switch, with pruning to 0.875
    learner.update(*batch)
    self.assertFalse(bool(learner.actor.hidden[1].inner.circulant_mode.numpy()))
    self.assertFalse(bool(target_layer.circulant_mode.numpy()))
    after = learner.target_actor(obs).numpy()
    self.assertEqual(after.shape, before.shape)
    self.assertTrue(np.all(np.isfinite(after)))
    kernel = target_layer.kernel.numpy() * target_layer.mask.numpy()
    self.assertAllClose(np.mean(kernel == 0), 0.875, atol=0.01)


if __name__ == "__main__":
  tf.test.main()
