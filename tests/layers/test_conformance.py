"""Conformance suite over every layer variant (Sonnet-style).

`VARIANTS` lists every layer variant; each is checked for tf.function
tracing (with after_update inside), checkpoint round-trip, SavedModel
round-trip with stock `tf.saved_model.load`, and the packed (compressed)
SavedModel: same outputs, smaller on disk when the layer is compressed.
`CoverageTest` fails when a kind, schedule or layer class is missing here.
"""

import inspect
import os

from absl.testing import parameterized
import tensorflow as tf

from tfrl import layers as tl
from tfrl.layers import spec as spec_lib

_WINDOW = dict(begin_step=0, end_step=2, frequency=1)

# name -> (builder(spec) kind, LayerSpec, input shape, compressed?)
VARIANTS = {
    "dense": ("dense", tl.LayerSpec(kind="dense"), [3, 64], False),
    "circulant_b8": ("dense", tl.LayerSpec(kind="circulant", block_size=8), [3, 64], True),
    "circulant_b5_padded": ("dense", tl.LayerSpec(kind="circulant", block_size=5), [3, 62], True),
    "circulant_b8_matmul": ("dense", tl.LayerSpec(kind="circulant", block_size=8,
                                                  circulant_method="matmul"), [3, 64], True),
    "pruned_constant": ("dense", tl.LayerSpec(kind="pruned", schedule="constant", **_WINDOW),
                        [3, 64], True),
    "pruned_polynomial": ("dense", tl.LayerSpec(kind="pruned", schedule="polynomial", **_WINDOW),
                          [3, 64], True),
    "pruned_nm": ("dense", tl.LayerSpec(kind="pruned", schedule="nm", nm=(1, 4), **_WINDOW),
                  [3, 64], True),
    "pruned_dst": ("dense", tl.LayerSpec(kind="pruned", schedule="dst", **_WINDOW), [3, 64], True),
    "pruned_reward_aware": ("dense", tl.LayerSpec(kind="pruned", schedule="reward_aware",
                                                  **_WINDOW), [3, 64], True),
    "gst_dual_mode": ("dense", tl.LayerSpec(kind="gst", gst_min_dim=32, **_WINDOW), [3, 64], True),
    "gst_circulant": ("dense", tl.LayerSpec(kind="gst", gst_mode="fixed", gst_min_dim=32,
                                            **_WINDOW), [3, 64], True),
    "gst_pruned": ("dense", tl.LayerSpec(kind="gst", gst_min_dim=256, **_WINDOW), [3, 64], True),
    "conv_dense": ("conv", tl.LayerSpec(kind="dense"), [2, 9, 9, 16], False),
    "conv_circulant_fallback": ("conv", tl.LayerSpec(kind="circulant"), [2, 9, 9, 16], False),
    "conv_pruned_constant": ("conv", tl.LayerSpec(kind="pruned", schedule="constant", **_WINDOW),
                             [2, 9, 9, 16], True),
    "conv_pruned_nm": ("conv", tl.LayerSpec(kind="pruned", schedule="nm", **_WINDOW),
                       [2, 9, 9, 16], True),
    "conv_gst": ("conv", tl.LayerSpec(kind="gst", **_WINDOW), [2, 9, 9, 16], True),
}


def _build(name):
  builder, spec, shape, _ = VARIANTS[name]
  if builder == "dense":
    layer = tl.make_dense(128, spec, activation="relu", name=f"net/{name}")
  else:
    layer = tl.make_conv2d(32, 3, 2, spec, activation="relu", padding="SAME", name=f"net/{name}")
  x = tf.random.stateless_normal(shape, seed=[1, 2])
  layer(x)
  return layer, x


def _warm(layer):
  """Runs the schedule to its end (sets the reward-aware target first)."""
  for l in tl.layers_of(layer):
    if getattr(l, "spec", None) is not None and l.spec.schedule == "reward_aware":
      l.sparsity_target.assign(0.8)
  for _ in range(3):
    tl.after_update(layer)


def _dir_size(path):
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _serving(layer, shape):
  root = tf.Module()
  root.layer = layer
  root.serve = tf.function(lambda x: layer(x),
                           input_signature=[tf.TensorSpec([None] + shape[1:], tf.float32)])
  return root


class ConformanceTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  @parameterized.named_parameters(*[(n, n) for n in VARIANTS])
  def test_tf_function_checkpoint_saved_model_packed(self, name):
    layer, x = _build(name)
    _warm(layer)
    eager = layer(x)

    @tf.function(input_signature=[tf.TensorSpec(x.shape, tf.float32)])
    def train_step(inp):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(layer(inp)))
      grads = tape.gradient(loss, layer.trainable_variables)
      for g, v in zip(grads, layer.trainable_variables):
        v.assign_sub(0.01 * g)
      tl.after_apply(layer)
      tl.after_update(layer)
      return loss

    self.assertAllClose(tf.function(layer)(x), eager, atol=1e-5)
    train_step(x)
    train_step(x)
    self.assertEqual(train_step.experimental_get_tracing_count(), 1)
    after = layer(x)
    path = tf.train.Checkpoint(layer=layer).save(os.path.join(self.get_temp_dir(), "ck"))
    other, _ = _build(name)
    tf.train.Checkpoint(layer=other).restore(path).assert_consumed()
    self.assertAllClose(other(x), after, atol=1e-5)
    self._check_saved_model_and_packed_export(name, layer, x)

  def _check_saved_model_and_packed_export(self, name, layer, x):
    expected = layer(x)
    shape = VARIANTS[name][2]
    live_dir = os.path.join(self.get_temp_dir(), name, "live")
    tf.saved_model.save(_serving(layer, shape), live_dir)
    loaded = tf.saved_model.load(live_dir)
    self.assertAllClose(loaded.serve(x), expected, atol=1e-5)

    copy, _ = _build(name)
    tl.copy_variables(layer, copy)
    tl.pack(copy)
    self.assertAllClose(copy(x), expected, atol=1e-5)
    packed_dir = os.path.join(self.get_temp_dir(), name, "packed")
    tf.saved_model.save(_serving(copy, shape), packed_dir)
    loaded = tf.saved_model.load(packed_dir)
    self.assertAllClose(loaded.serve(x), expected, atol=1e-5)
    live_vars = _dir_size(os.path.join(live_dir, "variables"))
    packed_vars = _dir_size(os.path.join(packed_dir, "variables"))
    dense_kernel_bytes = 4 * sum(tl.compression_report(layer)["total"]["dense_params"]
                                 for _ in [0])
    if VARIANTS[name][3]:
      ratio = tl.compression_report(copy)["total"]["compression_ratio"]
      self.assertGreaterEqual(ratio, 0.5)
      # The packed variables are smaller than the dense kernel alone.
      self.assertLess(packed_vars, dense_kernel_bytes * (1.0 - ratio / 2))
    self.assertLessEqual(packed_vars, live_vars + 64)


class CoverageTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_every_kind_and_schedule_listed(self):
    kinds = {spec.kind for _, spec, _, _ in VARIANTS.values()}
    schedules = {spec.schedule for _, spec, _, _ in VARIANTS.values() if spec.kind == "pruned"}
    self.assertEqual(kinds, set(spec_lib.KINDS))
    self.assertEqual(schedules, set(spec_lib.SCHEDULES))
    methods = {spec.circulant_method for _, spec, _, _ in VARIANTS.values()
               if spec.kind == "circulant"}
    self.assertEqual(methods, set(tl.circulant.METHODS))

  def test_every_layer_class_listed(self):
    public = {obj for _, obj in inspect.getmembers(tl, inspect.isclass)
              if issubclass(obj, tl.Layer) and obj is not tl.Layer}
    seen = set()
    for name in VARIANTS:
      layer, _ = _build(name)
      seen.add(type(layer))
      seen.update(type(l) for l in tl.layers_of(layer))
    self.assertEqual(public - seen, set())


if __name__ == "__main__":
  tf.test.main()
