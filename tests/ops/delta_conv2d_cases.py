"""The per-layer PopulationDeltaConv2D (incremental inference of one layer)
against the full convolution (`tfrl.ops.reference`), step after step, its
handling of bad input, and PopulationDeltaNet against the chain of these
ops, bit for bit.

The per-layer op is in the library only when it is built with
TFRL_BUILD_DELTA_CONV2D=1 (production runs PopulationDeltaNet, tested in
test_population_delta.py), so pytest does not collect this file by its name:
tests/ops/test_build_options.py builds the option and runs it against that
library (`pytest tests/ops/delta_conv2d_cases.py` with
TFRL_POPULATION_OPS_LIBRARY set runs it by hand; against a library without
the op every test skips).
"""

import os
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ops import population
from tfrl.ops import population_delta as delta
from tfrl.ops import reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from tests.ops import delta_helpers  # pylint: disable=g-import-not-at-top

_NO_BIAS = tf.zeros([0, 0])


def _full(x, w, index, **kwargs):
  """The reference: the full convolution of the layer's input f(x)."""
  return reference.population_delta_conv2d(x, w, index, **kwargs)


class PerLayerOpTestCase(tf.test.TestCase, parameterized.TestCase):
  """Skips every test when the library is built without the per-layer op."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    if not delta.have_delta_conv2d_op():
      self.skipTest("the op library is built without PopulationDeltaConv2D "
                    "(TFRL_BUILD_DELTA_CONV2D=1 builds it; tests/ops/test_build_options.py "
                    "runs these tests against such a build)")


class PopulationDeltaConv2DTest(PerLayerOpTestCase):

  @parameterized.named_parameters(
      # name, x dtype, (H, W, C), N, kernel, stride, input bias + relu
      ("frames_8x8_stride4", np.uint8, (20, 24, 4), 16, 8, 4, False),
      ("conv_4x4_stride2_bias_relu", np.float32, (11, 11, 16), 32, 4, 2, True),
      ("conv_3x3_stride1_odd_n", np.float32, (7, 9, 5), 13, 3, 1, True),
      ("dense_over_feature_map", np.float32, (5, 5, 8), 40, 5, 1, True),
      ("dense_flat", np.float32, (1, 1, 37), 9, 1, 1, False),
      # whole register blocks, a vector and single columns after them
      ("wide_dense", np.float32, (4, 4, 8), 205, 4, 1, True),
  )
  def test_tracks_the_full_convolution(self, dtype, hwc, n, ks, stride, bias_relu):
    rng = np.random.default_rng(hwc[0] * 100 + n)
    b, p = 7, 5
    w = rng.standard_normal((p, ks * ks * hwc[2], n)).astype(np.float32)
    index = np.array([0, 3, 3, 1, 4, 3, 0], np.int32)  # repeated; network 2 missing
    bias = rng.standard_normal((p, hwc[2])).astype(np.float32) if bias_relu else None
    scale = 1.0 / 255.0 if dtype == np.uint8 else 1.0
    kwargs = dict(kernel_size=ks, stride=stride, input_scale=scale, input_bias=bias,
                  input_relu=bias_relu)
    x_prev = delta_helpers.first_input(rng, (b,) + hwc, dtype)
    out = ((hwc[0] - ks) // stride + 1, (hwc[1] - ks) // stride + 1, n)
    acc = np.full((b,) + out, np.nan, np.float32)  # fresh rows must not read it
    fresh = np.ones(b, bool)
    for step in range(12):
      x = x_prev if step == 0 else delta_helpers.change(rng, x_prev, 0.02)
      acc = delta.population_delta_conv2d_op(x, x_prev, acc, w, index, fresh, **kwargs)
      full = _full(x, w, index, **kwargs)
      self.assertEqual(acc.shape, (b,) + out)
      self.assertAllClose(acc, full, rtol=1e-4, atol=1e-4 * np.sqrt(ks * ks * hwc[2]),
                          msg=f"step {step}")
      x_prev = x
      fresh = rng.random(b) < 0.2  # some rows recomputed in full now and then

  def test_unchanged_input_keeps_acc_exactly(self):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (3, 12, 12, 2)).astype(np.uint8)
    w = rng.standard_normal((2, 32, 6)).astype(np.float32)
    acc_prev = rng.standard_normal((3, 3, 3, 6)).astype(np.float32)
    got = delta.population_delta_conv2d_op(x, x, acc_prev, w, [0, 1, 1], [False] * 3,
                                           kernel_size=4, stride=4)
    self.assertAllEqual(got, acc_prev)

  def test_fresh_rows_need_no_state(self):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 27, 5)).astype(np.float32)
    bias = rng.standard_normal((3, 3)).astype(np.float32)
    garbage_prev = rng.standard_normal(x.shape).astype(np.float32) * 1e6
    garbage_acc = np.full((4, 4, 4, 5), np.inf, np.float32)
    kwargs = dict(kernel_size=3, stride=1, input_bias=bias, input_relu=True)
    got = delta.population_delta_conv2d_op(x, garbage_prev, garbage_acc, w, [2, 0, 1, 2],
                                           [True] * 4, **kwargs)
    want = _full(x, w, [2, 0, 1, 2], **kwargs)
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-4)

  def test_row_result_independent_of_batch(self):
    rng = np.random.default_rng(3)
    x_prev = rng.integers(0, 256, (6, 16, 16, 4)).astype(np.uint8)
    x = delta_helpers.change(rng, x_prev, 0.05)
    w = rng.standard_normal((4, 256, 16)).astype(np.float32)
    acc_prev = rng.standard_normal((6, 3, 3, 16)).astype(np.float32)
    index = np.array([3, 1, 0, 3, 2, 1], np.int32)
    fresh = np.array([0, 1, 0, 0, 1, 0], bool)
    kwargs = dict(kernel_size=8, stride=4, input_scale=1 / 255)
    batch = delta.population_delta_conv2d_op(x, x_prev, acc_prev, w, index, fresh, **kwargs)
    for b in range(6):
      one = delta.population_delta_conv2d_op(x[b:b + 1], x_prev[b:b + 1], acc_prev[b:b + 1],
                                             w, index[b:b + 1], fresh[b:b + 1], **kwargs)
      self.assertAllEqual(one[0], batch[b])  # bitwise: a fixed summation order

  def test_dense_runs_of_one_network_match_rows_alone(self):
    # A dense layer sums the rows of one network together, in runs of up to
    # 8 (here 10 rows of network 1 around a fresh one, and two of network 0).
    rng = np.random.default_rng(6)
    b = 13
    x_prev = np.maximum(rng.standard_normal((b, 6, 6, 16)), 0).astype(np.float32)
    x = delta_helpers.change(rng, x_prev, 0.2)
    w = rng.standard_normal((2, 576, 70)).astype(np.float32)
    bias = rng.standard_normal((2, 16)).astype(np.float32)
    index = np.array([1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1], np.int32)
    kwargs = dict(kernel_size=6, stride=1, input_bias=bias, input_relu=True)
    acc_prev = _full(x_prev, w, index, **kwargs)
    fresh = np.zeros(b, bool)
    fresh[5] = True
    batch = delta.population_delta_conv2d_op(x, x_prev, acc_prev, w, index, fresh, **kwargs)
    full = _full(x, w, index, **kwargs)
    self.assertAllClose(batch, full, rtol=1e-4, atol=1e-3)
    for row in range(b):
      one = delta.population_delta_conv2d_op(
          x[row:row + 1], x_prev[row:row + 1], acc_prev[row:row + 1], w,
          index[row:row + 1], fresh[row:row + 1], **kwargs)
      self.assertAllEqual(one[0], batch[row])

  # N: under a register block; whole blocks and an even number of vectors
  # (bfloat16 columns widened in pairs); an odd number and single columns.
  @parameterized.parameters(24, 208, 203)
  def test_bfloat16_weights_equal_float_op_on_rounded_weights(self, n):
    rng = np.random.default_rng(4)
    x_prev = rng.standard_normal((3, 9, 9, 4)).astype(np.float32)
    x = delta_helpers.change(rng, x_prev, 0.1)
    w = rng.standard_normal((2, 64, n)).astype(np.float32)
    w16 = tf.cast(w, tf.bfloat16)
    acc_prev = rng.standard_normal((3, 3, 3, n)).astype(np.float32)
    args = (x, x_prev, acc_prev)
    kwargs = dict(kernel_size=4, stride=2, input_bias=np.ones((2, 4), np.float32),
                  input_relu=True)
    got = delta.population_delta_conv2d_op(*args, w16, [1, 0, 1], [False, True, False], **kwargs)
    want = delta.population_delta_conv2d_op(*args, tf.cast(w16, tf.float32), [1, 0, 1],
                                            [False, True, False], **kwargs)
    self.assertAllEqual(got, want)

  def test_inside_tf_function_with_unknown_batch(self):
    w = tf.ones([2, 16, 3])
    fn = tf.function(
        lambda x, xp, acc, i, f: delta.population_delta_conv2d_op(
            x, xp, acc, w, i, f, kernel_size=2, stride=2),
        input_signature=[tf.TensorSpec([None, 4, 4, 4], tf.float32)] * 2 +
        [tf.TensorSpec([None, 2, 2, 3], tf.float32), tf.TensorSpec([None], tf.int32),
         tf.TensorSpec([None], tf.bool)])
    concrete = fn.get_concrete_function()
    self.assertEqual(concrete.structured_outputs.shape.as_list(), [None, 2, 2, 3])
    x = tf.ones([5, 4, 4, 4])
    got = fn(x, x, tf.zeros([5, 2, 2, 3]), tf.zeros([5], tf.int32), tf.ones([5], tf.bool))
    self.assertAllClose(got, tf.fill([5, 2, 2, 3], 16.0))

  def test_fallback_is_the_reference(self):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 5, 2)).astype(np.float32)
    w = rng.standard_normal((1, 8, 4)).astype(np.float32)
    acc = np.zeros((2, 2, 2, 4), np.float32)
    kwargs = dict(kernel_size=2, stride=2)
    got = delta.population_delta_conv2d(x, x * 0, acc, w, [0, 0], [False, False],
                                        use_op=False, **kwargs)
    want = _full(x, w, [0, 0], **kwargs)
    self.assertAllEqual(got, want)

  @parameterized.named_parameters(
      # name, x shape, x_prev shape, acc_prev shape, w shape, index, input bias shape
      ("index_too_large", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [0, 2], None),
      ("index_negative", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [-1, 0], None),
      ("x_prev_shape", (2, 6, 6, 1), (2, 6, 5, 1), (2, 2, 2, 3), (2, 9, 3), [0, 1], None),
      ("acc_prev_shape", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 4), (2, 9, 3), [0, 1], None),
      ("kernel_rows", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 8, 3), [0, 1], None),
      ("kernel_larger_than_input", (2, 2, 2, 1), (2, 2, 2, 1), (2, 1, 1, 3), (2, 9, 3),
       [0, 1], None),
      ("index_length", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [0], None),
      ("x_rank", (2, 6, 6), (2, 6, 6), (2, 2, 2, 3), (2, 9, 3), [0, 1], None),
      ("input_bias_shape", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [0, 1],
       (2, 2)),
  )
  def test_bad_inputs_rejected(self, x_shape, xp_shape, acc_shape, w_shape, index,
                               bias_shape):
    bias = None if bias_shape is None else np.ones(bias_shape, np.float32)
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
      delta.population_delta_conv2d_op(
          np.zeros(x_shape, np.float32), np.zeros(xp_shape, np.float32),
          np.zeros(acc_shape, np.float32), np.zeros(w_shape, np.float32),
          np.array(index, np.int32), np.zeros(len(index), bool), kernel_size=3, stride=2,
          input_bias=bias)

  def test_bad_inputs_rejected_at_run_time(self):
    # Shapes unknown when traced: the kernel itself must refuse them.
    fn = tf.function(
        lambda x, acc, w, i: delta.population_delta_conv2d_op(
            x, x, acc, w, i, tf.zeros_like(i, tf.bool), kernel_size=3, stride=2),
        input_signature=[tf.TensorSpec(None, tf.float32)] * 3 +
        [tf.TensorSpec(None, tf.int32)])
    x, acc, w = tf.zeros([2, 6, 6, 1]), tf.zeros([2, 2, 2, 3]), tf.zeros([2, 9, 3])
    for bad in ((x, acc, w, tf.constant([0, 5])), (x, tf.zeros([2, 3, 3, 3]), w, [0, 1]),
                (x, acc, tf.zeros([2, 10, 3]), [0, 1]), (tf.zeros([2, 6, 6]), acc, w, [0, 1])):
      with self.assertRaises(tf.errors.InvalidArgumentError):
        fn(*bad)
    self.assertEqual(fn(x, acc, w, tf.constant([0, 1])).shape, (2, 2, 2, 3))

  def test_bad_attrs_rejected(self):
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
      delta.population_delta_conv2d_op(np.zeros((1, 4, 4, 1), np.float32),
                                       np.zeros((1, 4, 4, 1), np.float32),
                                       np.zeros((1, 4, 4, 2), np.float32),
                                       np.zeros((1, 1, 2), np.float32), [0], [True],
                                       kernel_size=1, stride=0)


class PopulationDeltaNetTest(PerLayerOpTestCase):
  """The whole-network op against the chain of per-layer ops, bit for bit."""

  # (kernel size, stride, N) per layer over a [20, 20, 4] input: two
  # convolutions, a dense layer over the 7x7 map and a policy layer.
  LAYERS = ((4, 2, 8), (3, 1, 8), (7, 1, 70), (1, 1, 5))

  def _chain(self, obs, obs_prev, acc_prev, kernels, biases, index, fresh):
    acc, x, x_prev = [], obs, obs_prev
    for i, (ks, stride, _) in enumerate(self.LAYERS):
      kwargs = (dict(input_scale=1 / 255) if i == 0 else
                dict(input_bias=biases[i - 1], input_relu=True))
      out = delta.population_delta_conv2d_op(x, x_prev, acc_prev[i], kernels[i], index,
                                             fresh, kernel_size=ks, stride=stride, **kwargs)
      acc.append(out)
      x, x_prev = out, acc_prev[i]
    return acc[-1][:, 0, 0, :] + tf.gather(biases[-1], index), acc

  @parameterized.parameters(tf.float32, tf.bfloat16)
  def test_equals_the_chain_of_layer_ops(self, dtype):
    rng = np.random.default_rng(7)
    b, p = 13, 3
    kernels, biases, c, size = [], [], 4, 20
    for ks, stride, n in self.LAYERS:
      kernels.append(tf.cast(rng.standard_normal((p, ks * ks * c, n)) / ks, dtype))
      biases.append(rng.standard_normal((p, n)).astype(np.float32) * 0.3)
      size, c = (size - ks) // stride + 1, n
    # Rows of one network in runs longer than 8, and of others.
    index = np.array([1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1], np.int32)
    obs_prev = rng.integers(0, 256, (b, 20, 20, 4)).astype(np.uint8)
    state = [np.full((b,) + tuple(a.shape[1:]), np.nan, np.float32)
             for a in self._chain(obs_prev, obs_prev,
                                  [np.zeros((b, 9, 9, 8), np.float32),
                                   np.zeros((b, 7, 7, 8), np.float32),
                                   np.zeros((b, 1, 1, 70), np.float32),
                                   np.zeros((b, 1, 1, 5), np.float32)],
                                  kernels, biases, index, np.ones(b, bool))[1]]
    fresh = np.ones(b, bool)
    geometry = dict(kernel_sizes=[l[0] for l in self.LAYERS],
                    strides=[l[1] for l in self.LAYERS], relus=[True] * 3,
                    input_scale=1 / 255)
    for step in range(8):
      obs = obs_prev if step == 0 else delta_helpers.change(rng, obs_prev, 0.01)
      want_logits, want = self._chain(obs, obs_prev, state, kernels, biases, index, fresh)
      logits, got = delta.population_delta_net_op(obs, obs_prev, state, kernels, biases,
                                                  index, fresh, **geometry)
      self.assertAllEqual(logits, want_logits, msg=f"step {step}")
      for g, w in zip(got, want):
        self.assertAllEqual(g, w, msg=f"step {step}")
      state = [w.numpy() for w in want]
      obs_prev = obs
      fresh = rng.random(b) < 0.15


class NonFiniteValuesTest(PerLayerOpTestCase):
  """NaN and inf in the incremental ops: they propagate while present, and an
  accumulator that held them recovers once they are gone (no inf - inf)."""

  # name, (H, W, C), N, kernel, stride: a convolution and a dense layer
  # (which sums runs of rows of one network).
  GEOMETRIES = (("conv", (9, 9, 3), 12, 3, 2), ("dense", (4, 4, 5), 70, 4, 1))

  def _play(self, geometry, values, dtype=tf.float32, relu=False):
    """Steps: finite, then `values` put in a few places, then finite again."""
    _, (h, w_, c), n, ks, stride = geometry
    rng = np.random.default_rng(8)
    b, p = 6, 2
    w = tf.cast(rng.standard_normal((p, ks * ks * c, n)), dtype)
    wf = tf.cast(w, tf.float32).numpy()
    index = np.array([1, 1, 0, 1, 1, 1], np.int32)
    bias = rng.standard_normal((p, c)).astype(np.float32) if relu else None
    kwargs = dict(kernel_size=ks, stride=stride, input_bias=bias, input_relu=relu)
    inputs = delta_helpers.non_finite_inputs(rng, (b, h, w_, c), values)
    acc = np.full((b, (h - ks) // stride + 1, (w_ - ks) // stride + 1, n), np.nan, np.float32)
    x_prev, fresh, steps = inputs[0], np.ones(b, bool), []
    for x in inputs:
      acc = delta.population_delta_conv2d_op(x, x_prev, acc, w, index, fresh, **kwargs).numpy()
      steps.append((acc, delta_helpers.full_sparse(x, wf, index, ks, stride, bias=bias,
                                                   relu=relu)))
      x_prev, fresh = x, np.zeros(b, bool)
    return steps

  @parameterized.product(geometry=GEOMETRIES, dtype=(tf.float32, tf.bfloat16),
                         values=((np.inf, -np.inf), (np.nan,), (np.inf, np.nan)))
  def test_non_finite_input_comes_and_goes(self, geometry, dtype, values):
    delta_helpers.assert_comes_and_goes(self, self._play(geometry, values, dtype))

  @parameterized.parameters(False, True)
  def test_overflowing_sum_recovers(self, dense):
    # Finite inputs whose products overflow float32: the output is inf while
    # they are there, and exact again once they are gone.
    shape, ks = ((1, 4, 4, 2), 4) if dense else ((1, 6, 6, 2), 3)
    w = np.full((1, ks * ks * 2, 5), 2.0, np.float32)
    x0 = np.ones(shape, np.float32)
    x1 = x0.copy()
    x1[0, 2, 2, 1] = 3e38  # 3e38 * 2 overflows
    x2 = x1.copy()
    x2[0, 2, 2, 1] = -1.0
    kwargs = dict(kernel_size=ks, stride=1)
    out = shape[1] - ks + 1
    acc = delta.population_delta_conv2d_op(x0, x0, np.zeros((1, out, out, 5), np.float32), w,
                                           [0], [True], **kwargs)
    acc = delta.population_delta_conv2d_op(x1, x0, acc, w, [0], [False], **kwargs).numpy()
    self.assertTrue(np.isposinf(acc[0, 0, 0]).all())
    acc = delta.population_delta_conv2d_op(x2, x1, acc, w, [0], [False], **kwargs).numpy()
    want = _full(x2, w, [0], **kwargs)
    self.assertAllEqual(acc, want)  # small integers: exact

  def test_nan_weight_reaches_only_nonzero_inputs(self):
    # The op sums over nonzero input values: a NaN (or inf) weight poisons an
    # output exactly while its input is nonzero, and not after it is zero.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 2 * 2 * 1, 3)).astype(np.float32)
    w[0, 3, 1] = np.nan  # kernel row 3 = window position (1, 1), column 1
    x0 = np.zeros((1, 3, 3, 1), np.float32)
    x1 = x0.copy()
    x1[0, 1, 1, 0] = 2.0  # position (1, 1) is row 3 of output (0, 0)'s window
    x2 = x0.copy()
    kwargs = dict(kernel_size=2, stride=1)
    acc = delta.population_delta_conv2d_op(x0, x0, np.zeros((1, 2, 2, 3), np.float32), w, [0],
                                           [True], **kwargs)
    self.assertTrue(np.isfinite(acc).all())
    acc = delta.population_delta_conv2d_op(x1, x0, acc, w, [0], [False], **kwargs).numpy()
    self.assertTrue(np.isnan(acc[0, 0, 0, 1]))
    self.assertEqual(np.isnan(acc).sum(), 1)
    acc = delta.population_delta_conv2d_op(x2, x1, acc, w, [0], [False], **kwargs).numpy()
    self.assertAllEqual(acc, np.zeros_like(acc))

  @parameterized.parameters(tf.float32, tf.bfloat16)
  def test_net_recovers_and_equals_the_chain(self, dtype):
    rng = np.random.default_rng(9)
    b, p = 7, 2
    layers = ((4, 2, 8), (3, 1, 8), (7, 1, 40), (1, 1, 5))  # over [20, 20, 4]
    kernels, biases, c = [], [], 4
    for ks, _, n in layers:
      kernels.append(tf.cast(rng.standard_normal((p, ks * ks * c, n)) / ks, dtype))
      biases.append(rng.standard_normal((p, n)).astype(np.float32) * 0.3)
      c = n
    index = np.array([1, 1, 0, 1, 1, 1, 1], np.int32)
    geometry = dict(kernel_sizes=[l[0] for l in layers], strides=[l[1] for l in layers],
                    relus=[True] * 3, input_scale=1.0)
    x0 = rng.standard_normal((b, 20, 20, 4)).astype(np.float32)
    x1 = x0.copy()
    x1[1, 5, 5, 0], x1[4, 12, 3, 2], x1[5, 0, 0, 3] = np.inf, np.nan, -np.inf
    x2 = x1.copy()
    x2[~np.isfinite(x2)] = 0.25
    shapes = ((9, 9, 8), (7, 7, 8), (1, 1, 40), (1, 1, 5))
    state = [np.full((b,) + s, np.nan, np.float32) for s in shapes]
    chain = list(state)
    x_prev, fresh = x0, np.ones(b, bool)
    for step, x in enumerate((x0, x1, x2, x2)):
      logits, state = delta.population_delta_net_op(x, x_prev, state, kernels, biases, index,
                                                    fresh, **geometry)
      state = [s.numpy() for s in state]
      # The chain of per-layer ops, bit for bit (any NaN equal to any NaN).
      new_chain, xi, xp = [], x, x_prev
      for i, (ks, stride, _) in enumerate(layers):
        kw = {} if i == 0 else dict(input_bias=biases[i - 1], input_relu=True)
        out = delta.population_delta_conv2d_op(xi, xp, chain[i], kernels[i], index, fresh,
                                               kernel_size=ks, stride=stride, **kw).numpy()
        new_chain.append(out)
        xi, xp = out, chain[i]
      for i, (got, want) in enumerate(zip(state, new_chain)):
        self.assertTrue(np.array_equal(got, want, equal_nan=True), f"step {step} layer {i}")
      chain = new_chain
      if step == 1:
        self.assertFalse(np.isfinite(logits).all(axis=1)[[1, 4, 5]].any())
        self.assertTrue(np.isfinite(logits.numpy()[[0, 2, 3, 6]]).all())
      if step >= 2:
        self.assertTrue(np.isfinite(logits).all(), f"step {step}: poisoned accumulator")
        full, _ = delta.population_delta_net_op(x, x, state, kernels, biases, index,
                                                np.ones(b, bool), **geometry)
        self.assertAllClose(logits, full, rtol=1e-4, atol=1e-3)
      x_prev, fresh = x, np.zeros(b, bool)


class PerLayerEdgeTest(PerLayerOpTestCase):
  """Inputs at the edges of what the per-layer op accepts."""

  def setUp(self):
    super().setUp()
    self.lib = population.load_library()

  def test_output_too_large_is_refused(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "acc would have shape"):
      self.lib.population_delta_conv2d(
          x=tf.zeros([1, 2**31, 2**31, 0]), x_prev=tf.zeros([1, 2**31, 2**31, 0]),
          acc_prev=tf.zeros([1, 1, 1, 1]), w=tf.zeros([1, 0, 2**40]), index=[0], fresh=[True],
          input_bias=_NO_BIAS, kernel_size=1, stride=1)

  def test_delta_conv_without_input_channels(self):
    # A convolution over no channels is zero: fresh rows get zeros, the others
    # keep acc_prev; x's sizes do not matter.
    acc_prev = np.arange(2 * 3 * 3 * 4, dtype=np.float32).reshape(2, 3, 3, 4)
    acc = delta.population_delta_conv2d_op(np.zeros((2, 5, 5, 0), np.float32),
                                           np.zeros((2, 5, 5, 0), np.float32), acc_prev,
                                           np.zeros((1, 0, 4), np.float32), [0, 0],
                                           [True, False], kernel_size=3)
    self.assertAllEqual(acc[0], np.zeros((3, 3, 4)))
    self.assertAllEqual(acc[1], acc_prev[1])
    big = tf.zeros([2, 2**20, 2**20, 0])
    acc = self.lib.population_delta_conv2d(x=big, x_prev=big, acc_prev=big,
                                           w=tf.zeros([2**40, 0, 0]), index=[1, 2],
                                           fresh=[True, False], input_bias=_NO_BIAS,
                                           kernel_size=1, stride=1)
    self.assertEqual(acc.shape, (2, 2**20, 2**20, 0))

  def test_empty_input_bias_of_the_wrong_shape_is_refused(self):
    # Only [P, C] or [0, 0] (none): an empty [P + 1, 0] is not taken for none.
    x = np.zeros((1, 3, 3, 0), np.float32)
    for bias in (np.zeros((3, 0), np.float32), np.zeros((0, 1), np.float32)):
      with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                  r"input_bias must be \[P, C\] = \[2, 0\], or \[0, 0\]"):
        delta.population_delta_conv2d_op(x, x, np.zeros((1, 2, 2, 4), np.float32),
                                          np.zeros((2, 0, 4), np.float32), [0], [True],
                                          kernel_size=2, input_bias=bias)
    acc = delta.population_delta_conv2d_op(x, x, np.zeros((1, 2, 2, 4), np.float32),
                                           np.zeros((2, 0, 4), np.float32), [0], [True],
                                           kernel_size=2, input_bias=np.zeros((2, 0), np.float32))
    self.assertAllEqual(acc, np.zeros((1, 2, 2, 4)))


if __name__ == "__main__":
  tf.test.main()
