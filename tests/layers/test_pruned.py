"""Pruning schedules reach their targets and pruned weights stay zero."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl import optimizers
from tfrl.layers import schedules


_STEPS = {}


def _train(layer, steps, x, grads_to_hook=False):
  """Runs `steps` Adam steps + after_update (one traced function per layer)."""
  layer(x)
  if id(layer) not in _STEPS:
    optimizer = optimizers.Adam(1e-2)

    @tf.function
    def step(inp):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(layer(inp) - 1.0))
      variables = layer.trainable_variables
      grads = tape.gradient(loss, variables)
      optimizer.apply(grads, variables)
      tl.after_update(layer, list(zip(grads, variables)) if grads_to_hook else None)
      return loss

    _STEPS[id(layer)] = (layer, step)
  step = _STEPS[id(layer)][1]
  for _ in range(steps):
    step(x)


class PrunedTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  @parameterized.named_parameters(
      ("constant", dict(schedule="constant", target_sparsity=0.75), 0.75),
      ("polynomial", dict(schedule="polynomial", target_sparsity=0.8, end_step=20,
                          frequency=5), 0.8),
      ("nm_2_4", dict(schedule="nm", nm=(2, 4)), 0.5),
      ("nm_1_4", dict(schedule="nm", nm=(1, 4)), 0.75),
      ("dst_random", dict(schedule="dst", target_sparsity=0.7, end_step=20, frequency=4), 0.7),
      ("dst_gradient", dict(schedule="dst", target_sparsity=0.7, end_step=20, frequency=4,
                            regrow="gradient"), 0.7),
      ("late_begin", dict(schedule="constant", target_sparsity=0.6, begin_step=7,
                          end_step=7), 0.6),
  )
  def test_reaches_target_and_keeps_zeros(self, changes, target):
    spec = tl.LayerSpec(kind="pruned", **changes)
    layer = tl.make_dense(16, spec)
    x = tf.random.normal([32, 24], seed=3)
    _train(layer, 30, x, grads_to_hook=spec.regrow == "gradient")
    self.assertAllClose(float(layer.sparsity()), target, atol=1e-2)
    kernel = layer.kernel.numpy()
    mask = layer.mask.numpy()
    self.assertTrue(np.all(kernel[mask == 0] == 0.0))
    # Pruned weights stay exactly zero through more optimizer steps (Adam
    # moments are non-zero for them).
    _train(layer, 5, x)
    self.assertTrue(np.all(layer.kernel.numpy()[layer.mask.numpy() == 0] == 0.0))
    self.assertAllClose(float(layer.sparsity()), target, atol=1e-2)

  def test_polynomial_follows_zhu_gupta(self):
    values = [float(schedules.polynomial_sparsity(t, 10, 110, 0.0, 0.9))
              for t in (0, 10, 60, 110, 200)]
    self.assertAllClose(values, [0.0, 0.0, 0.9 * (1 - 0.5 ** 3), 0.9, 0.9])
    spec = tl.LayerSpec(kind="pruned", schedule="polynomial", target_sparsity=0.9,
                        begin_step=0, end_step=40, frequency=10)
    layer = tl.make_dense(20, spec)
    x = tf.random.normal([8, 20])
    layer(x)
    seen = []
    for _ in range(4):
      _train(layer, 10, x)
      seen.append(float(layer.sparsity()))
    expected = [float(schedules.polynomial_sparsity(t, 0, 40, 0.0, 0.9)) for t in (10, 20, 30, 40)]
    self.assertAllClose(seen, expected, atol=2e-3)

  @parameterized.parameters((2, 4), (1, 4), (4, 8), (3, 5))
  def test_nm_pattern_every_group(self, n, m):
    spec = tl.LayerSpec(kind="pruned", schedule="nm", nm=(n, m))
    layer = tl.make_dense(12, spec)
    x = tf.random.normal([16, 40])
    _train(layer, 3, x)
    mask = layer.mask.numpy()                      # [40, 12]; groups along fan-in.
    groups = mask[: (40 // m) * m].reshape(40 // m, m, 12)
    self.assertTrue(np.all(groups.sum(axis=1) == n))
    kernel = np.abs(layer.kernel.numpy())[: (40 // m) * m].reshape(40 // m, m, 12)
    self.assertTrue(np.all((kernel != 0).sum(axis=1) <= n))

  def test_nm_conv(self):
    spec = tl.LayerSpec(kind="pruned", schedule="nm", nm=(2, 4))
    conv = tl.make_conv2d(8, 3, 1, spec)
    conv(tf.zeros([1, 5, 5, 4]))
    mask = conv.mask.numpy().reshape(-1, 8)          # [36, 8]
    self.assertTrue(np.all(mask.reshape(9, 4, 8).sum(axis=1) == 2))

  def test_dst_changes_mask_keeps_count(self):
    spec = tl.LayerSpec(kind="pruned", schedule="dst", target_sparsity=0.5, end_step=100,
                        frequency=2, drop_fraction=0.5)
    layer = tl.make_dense(10, spec)
    x = tf.random.normal([8, 10])
    layer(x)
    before = layer.mask.numpy().copy()
    _train(layer, 2, x)
    after = layer.mask.numpy()
    self.assertEqual(before.sum(), after.sum())
    self.assertGreater(np.abs(before - after).sum(), 0)

  def test_dst_drop_fraction_decays(self):
    self.assertAllClose(float(schedules.cosine_drop_fraction(0, 0, 100, 0.3)), 0.3)
    self.assertAllClose(float(schedules.cosine_drop_fraction(50, 0, 100, 0.3)), 0.15)
    self.assertAllClose(float(schedules.cosine_drop_fraction(100, 0, 100, 0.3)), 0.0, atol=1e-7)

  def test_dst_gradient_regrows_largest_gradient(self):
    w = tf.constant([[1.0, 0.0], [3.0, 0.0]])
    mask = tf.constant([[1.0, 0.0], [1.0, 0.0]])
    grads = tf.constant([[0.0, 5.0], [0.0, 1.0]])
    new = schedules.dst_update(w, mask, 0.5, tf.abs(grads))
    self.assertAllEqual(new, [[0.0, 1.0], [1.0, 0.0]])

  def test_dst_gradient_callable_is_read_only_when_regrowing(self):
    spec = tl.LayerSpec(kind="pruned", schedule="dst", regrow="gradient", target_sparsity=0.5,
                        drop_fraction=0.5, begin_step=2, end_step=100, frequency=3)
    layer = tl.make_dense(4, spec)
    layer(tf.ones([1, 6]))
    self.assertTrue(layer.needs_gradient)
    scores = np.arange(24, dtype=np.float32).reshape(6, 4)
    calls = []

    def gradient():
      calls.append(int(layer.step))
      return tf.constant(scores)

    masks = {}
    for _ in range(8):   # eager: only the taken tf.cond branch runs.
      before = layer.mask.numpy()
      layer.after_update([(gradient, layer.kernel)])
      masks[int(layer.step)] = (before, layer.mask.numpy())
    # Pruning steps 2 (first: by magnitude, no gradient), 5 and 8 (regrowth).
    self.assertEqual(calls, [5, 8])
    before, after = masks[5]
    grown = (before < 0.5) & (after > 0.5)
    inactive_scores = np.sort(scores[before < 0.5])[::-1]
    k = int(grown.sum())
    self.assertGreater(k, 0)
    self.assertAllEqual(np.sort(scores[grown])[::-1], inactive_scores[:k])
    self.assertFalse(tl.make_dense(4, spec.replace(regrow="random")).needs_gradient)

  def test_pruned_conv_keeps_zeros(self):
    spec = tl.LayerSpec(kind="pruned", schedule="constant", target_sparsity=0.8)
    conv = tl.make_conv2d(4, 3, 2, spec)
    x = tf.random.normal([2, 9, 9, 3])
    _train(conv, 5, x)
    self.assertAllClose(float(conv.sparsity()), 0.8, atol=0.01)
    self.assertTrue(np.all(conv.kernel.numpy()[conv.mask.numpy() == 0] == 0))

  def test_magnitude_mask_exact_count(self):
    w = tf.random.normal([7, 9])
    mask = schedules.magnitude_mask(w, 0.3)
    self.assertEqual(int(tf.reduce_sum(mask)), round(0.7 * 63))
    kept = tf.boolean_mask(tf.abs(w), mask > 0)
    dropped = tf.boolean_mask(tf.abs(w), mask == 0)
    self.assertGreaterEqual(float(tf.reduce_min(kept)), float(tf.reduce_max(dropped)))

  def test_invalid_spec(self):
    with self.assertRaisesRegex(ValueError, "target_sparsity"):
      tl.LayerSpec(target_sparsity=1.5)
    with self.assertRaisesRegex(ValueError, "LayerSpec"):
      tl.PrunedDense(4, spec="constant")


if __name__ == "__main__":
  tf.test.main()
