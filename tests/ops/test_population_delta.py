"""PopulationDeltaNet (incremental inference of a whole population network)
against the full forward (`tfrl.ops.reference`), step after step: each layer's
output against the full convolution of the op's own input to that layer, bit
for bit where the order of the sums is fixed, and its handling of bad input
and of NaN and inf."""

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
from tests.ops.delta_helpers import (  # pylint: disable=g-import-not-at-top
    Net, assert_comes_and_goes, assert_like, change, first_input, full_sparse,
    non_finite_inputs)


def _step(net, obs, obs_prev, state, index, fresh, input_scale=1.0):
  """One op step: (logits, accs) as arrays."""
  logits, accs = delta.population_delta_net_op(obs, obs_prev, state, net.kernels, net.biases,
                                               index, fresh, **net.geometry(input_scale))
  return logits.numpy(), [a.numpy() for a in accs]


def _layer_reference(net, i, obs, accs, index, input_scale=1.0):
  """Layer i's full convolution of its input: obs, or the op's acc[i - 1]."""
  ks, stride, _ = net.layers[i]
  if i == 0:
    return reference.population_delta_conv2d(obs, net.kernels[0], index, kernel_size=ks,
                                             stride=stride, input_scale=input_scale).numpy()
  return reference.population_delta_conv2d(
      accs[i - 1], net.kernels[i], index, kernel_size=ks, stride=stride,
      input_bias=net.biases[i - 1], input_relu=net.relus[i - 1]).numpy()


class PopulationDeltaNetTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def assert_tracks(self, net, obs, logits, accs, index, input_scale=1.0, msg=""):
    for i, acc in enumerate(accs):
      ks, _, _ = net.layers[i]
      k = int(net.kernels[i].shape[1])
      self.assertAllClose(acc, _layer_reference(net, i, obs, accs, index, input_scale),
                          rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)), msg=f"{msg} layer {i}")
    want = accs[-1][:, 0, 0, :] + np.asarray(net.biases[-1])[index]
    self.assertAllEqual(logits, want, msg=f"{msg} logits")

  @parameterized.named_parameters(
      # name, obs dtype, (H, W, C), layers (kernel size, stride, N), the last dense
      ("frames_8x8_stride4", np.uint8, (20, 24, 4), ((8, 4, 16), (4, 2, 6))),
      ("conv_4x4_stride2_bias_relu", np.float32, (11, 11, 16),
       ((3, 1, 16), (4, 2, 32), (3, 1, 7))),
      ("conv_3x3_stride1_odd_n", np.float32, (7, 9, 5), ((3, 1, 13), (5, 3, 4))),
      ("dense_over_feature_map", np.float32, (5, 5, 8), ((5, 1, 40), (1, 1, 9))),
      ("dense_flat", np.float32, (1, 1, 37), ((1, 1, 9),)),
      # whole register blocks, a vector and single columns after them
      ("wide_dense", np.float32, (4, 4, 8), ((4, 1, 205), (1, 1, 3))),
  )
  def test_tracks_the_full_forward(self, dtype, hwc, layers):
    rng = np.random.default_rng(hwc[0] * 100 + layers[0][2])
    b, p = 7, 5
    net = Net(rng, hwc, layers, p)
    index = np.array([0, 3, 3, 1, 4, 3, 0], np.int32)  # repeated; network 2 missing
    scale = 1.0 / 255.0 if dtype == np.uint8 else 1.0
    obs_prev = first_input(rng, (b,) + hwc, dtype)
    state, fresh = net.state(b), np.ones(b, bool)  # fresh rows must not read the NaNs
    for step in range(12):
      obs = obs_prev if step == 0 else change(rng, obs_prev, 0.02)
      logits, state = _step(net, obs, obs_prev, state, index, fresh, scale)
      self.assertEqual([a.shape[1:] for a in state], net.shapes)
      self.assert_tracks(net, obs, logits, state, index, scale, f"step {step}")
      obs_prev = obs
      fresh = rng.random(b) < 0.2  # some rows recomputed in full now and then

  def test_unchanged_input_keeps_acc_exactly(self):
    rng = np.random.default_rng(1)
    net = Net(rng, (12, 12, 2), ((4, 4, 6), (3, 1, 5)), 2)
    obs = rng.integers(0, 256, (3, 12, 12, 2)).astype(np.uint8)
    state = [rng.standard_normal((3,) + s).astype(np.float32) for s in net.shapes]
    logits, got = _step(net, obs, obs, state, [0, 1, 1], [False] * 3, 1 / 255)
    for g, want in zip(got, state):
      self.assertAllEqual(g, want)
    self.assertAllEqual(logits, state[-1][:, 0, 0, :] + np.asarray(net.biases[-1])[[0, 1, 1]])

  def test_fresh_rows_need_no_state(self):
    rng = np.random.default_rng(2)
    net = Net(rng, (6, 6, 3), ((3, 1, 5), (4, 1, 4)), 3)
    obs = rng.standard_normal((4, 6, 6, 3)).astype(np.float32)
    garbage_prev = rng.standard_normal(obs.shape).astype(np.float32) * 1e6
    garbage = net.state(4, np.inf)
    index = [2, 0, 1, 2]
    logits, accs = _step(net, obs, garbage_prev, garbage, index, [True] * 4)
    want_logits, want = net.reference(obs, index)
    for got, w in zip(accs, want):
      self.assertAllClose(got, w, rtol=1e-5, atol=1e-4)
    self.assertAllClose(logits, want_logits, rtol=1e-5, atol=1e-4)

  def test_row_result_independent_of_batch(self):
    rng = np.random.default_rng(3)
    net = Net(rng, (16, 16, 4), ((8, 4, 16), (3, 1, 7)), 4)
    obs_prev = rng.integers(0, 256, (6, 16, 16, 4)).astype(np.uint8)
    obs = change(rng, obs_prev, 0.05)
    state = [rng.standard_normal((6,) + s).astype(np.float32) for s in net.shapes]
    index = np.array([3, 1, 0, 3, 2, 1], np.int32)
    fresh = np.array([0, 1, 0, 0, 1, 0], bool)
    logits, batch = _step(net, obs, obs_prev, state, index, fresh, 1 / 255)
    for b in range(6):
      one_logits, one = _step(net, obs[b:b + 1], obs_prev[b:b + 1], [s[b:b + 1] for s in state],
                              index[b:b + 1], fresh[b:b + 1], 1 / 255)
      self.assertAllEqual(one_logits[0], logits[b])  # bitwise: a fixed summation order
      for got, want in zip(one, batch):
        self.assertAllEqual(got[0], want[b])

  def test_dense_runs_of_one_network_match_rows_alone(self):
    # A dense layer sums the rows of one network together, in runs of up to
    # 8 (here 10 rows of network 1 around a fresh one, and two of network 0).
    rng = np.random.default_rng(6)
    b = 13
    net = Net(rng, (6, 6, 16), ((6, 1, 70), (1, 1, 5)), 2)
    obs_prev = np.maximum(rng.standard_normal((b, 6, 6, 16)), 0).astype(np.float32)
    obs = change(rng, obs_prev, 0.2)
    index = np.array([1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1], np.int32)
    state = net.reference(obs_prev, index)[1]
    fresh = np.zeros(b, bool)
    fresh[5] = True
    logits, batch = _step(net, obs, obs_prev, state, index, fresh)
    self.assert_tracks(net, obs, logits, batch, index)
    for row in range(b):
      one_logits, one = _step(net, obs[row:row + 1], obs_prev[row:row + 1],
                              [s[row:row + 1] for s in state], index[row:row + 1],
                              fresh[row:row + 1])
      self.assertAllEqual(one_logits[0], logits[row])
      for got, want in zip(one, batch):
        self.assertAllEqual(got[0], want[row])

  # N: under a register block; whole blocks and an even number of vectors
  # (bfloat16 columns widened in pairs); an odd number and single columns.
  @parameterized.parameters(24, 208, 203)
  def test_bfloat16_weights_equal_float_op_on_rounded_weights(self, n):
    rng = np.random.default_rng(4)
    net16 = Net(rng, (9, 9, 4), ((4, 2, n), (3, 1, 6)), 2, dtype=tf.bfloat16)
    net32 = Net(rng, (9, 9, 4), ((4, 2, n), (3, 1, 6)), 2)
    net32.kernels = [tf.cast(k, tf.float32) for k in net16.kernels]
    net32.biases = net16.biases
    obs_prev = rng.standard_normal((3, 9, 9, 4)).astype(np.float32)
    obs = change(rng, obs_prev, 0.1)
    state = [rng.standard_normal((3,) + s).astype(np.float32) for s in net16.shapes]
    args = (obs, obs_prev, state, [1, 0, 1], [False, True, False])
    got_logits, got = _step(net16, *args)
    want_logits, want = _step(net32, *args)
    self.assertAllEqual(got_logits, want_logits)
    for g, w in zip(got, want):
      self.assertAllEqual(g, w)

  def test_inside_tf_function_with_unknown_batch(self):
    w = [tf.ones([2, 16, 3]), tf.ones([2, 12, 2])]
    bias = [tf.zeros([2, 3]), tf.zeros([2, 2])]
    fn = tf.function(
        lambda x, xp, acc0, acc1, i, f: delta.population_delta_net_op(
            x, xp, [acc0, acc1], w, bias, i, f, kernel_sizes=[2, 2], strides=[2, 1],
            relus=[True]),
        input_signature=[tf.TensorSpec([None, 4, 4, 4], tf.float32)] * 2 +
        [tf.TensorSpec([None, 2, 2, 3], tf.float32), tf.TensorSpec([None, 1, 1, 2], tf.float32),
         tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.bool)])
    logits, acc = fn.get_concrete_function().structured_outputs
    self.assertEqual(logits.shape.as_list(), [None, 2])
    self.assertEqual([a.shape.as_list() for a in acc], [[None, 2, 2, 3], [None, 1, 1, 2]])
    x = tf.ones([5, 4, 4, 4])
    logits, acc = fn(x, x, tf.zeros([5, 2, 2, 3]), tf.zeros([5, 1, 1, 2]),
                     tf.zeros([5], tf.int32), tf.ones([5], tf.bool))
    self.assertAllClose(acc[0], tf.fill([5, 2, 2, 3], 16.0))
    self.assertAllClose(logits, tf.fill([5, 2], 192.0))  # 2 * 2 * 3 inputs of 16

  def test_fallback_is_the_reference(self):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 5, 2)).astype(np.float32)
    w = rng.standard_normal((1, 8, 4)).astype(np.float32)
    acc = np.zeros((2, 2, 2, 4), np.float32)
    got = delta.population_delta_conv2d(x, x * 0, acc, w, [0, 0], [False, False],
                                        use_op=False, kernel_size=2, stride=2)
    want = reference.population_delta_conv2d(x, w, [0, 0], kernel_size=2, stride=2)
    self.assertAllEqual(got, want)

  def test_bad_input_is_rejected(self):
    w = [tf.zeros([2, 16, 3]), tf.zeros([2, 3, 4])]
    bias = [tf.zeros([2, 3]), tf.zeros([2, 4])]
    obs = tf.zeros([1, 4, 4, 1], tf.uint8)
    acc = [tf.zeros([1, 1, 1, 3]), tf.zeros([1, 1, 1, 4])]
    kwargs = dict(kernel_sizes=[4, 1], strides=[1, 1], relus=[True])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "out of range"):
      delta.population_delta_net_op(obs, obs, acc, w, bias, [2], [False], **kwargs)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "out of range"):
      delta.population_delta_net_op(obs, obs, acc, w, bias, [-1], [True], **kwargs)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "w\\[1\\] must be"):
      delta.population_delta_net_op(obs, obs, acc, [w[0], tf.zeros([2, 5, 4])], bias, [0],
                                    [False], **kwargs)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "relus L - 1"):
      delta.population_delta_net_op(obs, obs, acc, w, bias, [0], [False], kernel_sizes=[4, 1],
                                    strides=[1, 1], relus=[])

  @parameterized.named_parameters(
      # name, obs shape, obs_prev shape, acc_prev[0] shape, w[0] shape, index, fresh length
      ("obs_prev_shape", (2, 6, 6, 1), (2, 6, 5, 1), (2, 2, 2, 3), (2, 9, 3), [0, 1], 2),
      ("acc_prev_shape", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 4), (2, 9, 3), [0, 1], 2),
      ("kernel_rows", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 8, 3), [0, 1], 2),
      ("kernel_larger_than_input", (2, 2, 2, 1), (2, 2, 2, 1), (2, 1, 1, 3), (2, 9, 3),
       [0, 1], 2),
      ("index_length", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [0], 2),
      ("fresh_length", (2, 6, 6, 1), (2, 6, 6, 1), (2, 2, 2, 3), (2, 9, 3), [0, 1], 3),
      ("obs_rank", (2, 6, 6), (2, 6, 6), (2, 2, 2, 3), (2, 9, 3), [0, 1], 2),
  )
  def test_bad_inputs_rejected_at_run_time(self, obs_shape, prev_shape, acc_shape, w_shape,
                                           index, fresh_length):
    # Shapes unknown when traced: the kernel itself must refuse them. Layer 0
    # is a 3x3 / 2 convolution, layer 1 a 2x2 dense layer over its output.
    lib = population.load_library()
    fn = tf.function(
        lambda o, op, a0, w0, i, f: lib.population_delta_net(
            obs=o, obs_prev=op, acc_prev=[a0, tf.zeros([2, 1, 1, 2])],
            w=[w0, tf.zeros([2, 12, 2])], bias=[tf.zeros([2, 3]), tf.zeros([2, 2])],
            index=i, fresh=f, kernel_sizes=[3, 2], strides=[2, 1], relus=[True],
            input_scale=1.0),
        input_signature=[tf.TensorSpec(None, tf.float32)] * 4 +
        [tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.bool)])
    args = (tf.zeros(obs_shape), tf.zeros(prev_shape), tf.zeros(acc_shape), tf.zeros(w_shape),
            tf.constant(index, tf.int32), tf.ones([fresh_length], tf.bool))
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn(*args)
    good = (tf.zeros([2, 6, 6, 1]),) * 2 + (tf.zeros([2, 2, 2, 3]), tf.zeros([2, 9, 3]),
                                            tf.constant([0, 1]), tf.ones([2], tf.bool))
    self.assertEqual(fn(*good)[0].shape, (2, 2))


class NonFiniteValuesTest(tf.test.TestCase, parameterized.TestCase):
  """NaN and inf in the incremental op: they propagate while present, and an
  accumulator that held them recovers once they are gone (no inf - inf)."""

  test_session = None

  # name, (H, W, C), the first layer (kernel, stride, N): a convolution or a
  # dense layer (which sums runs of rows of one network); a policy layer after.
  GEOMETRIES = (("conv", (9, 9, 3), (3, 2, 12)), ("dense", (4, 4, 5), (4, 1, 70)))

  def _play(self, geometry, values, dtype=tf.float32):
    """Steps: finite, then `values` put in a few places, then finite again;
    (layer 0's acc, its full convolution) per step."""
    _, (h, w_, c), (ks, stride, n) = geometry
    out = (h - ks) // stride + 1
    rng = np.random.default_rng(8)
    b = 6
    net = Net(rng, (h, w_, c), ((ks, stride, n), (out, 1, 3)), 2, dtype=dtype, kernel_scale=1.0)
    wf = tf.cast(net.kernels[0], tf.float32).numpy()
    index = np.array([1, 1, 0, 1, 1, 1], np.int32)
    inputs = non_finite_inputs(rng, (b, h, w_, c), values)
    state, x_prev, fresh, steps = net.state(b), inputs[0], np.ones(b, bool), []
    for x in inputs:
      _, state = _step(net, x, x_prev, state, index, fresh)
      steps.append((state[0], full_sparse(x, wf, index, ks, stride)))
      x_prev, fresh = x, np.zeros(b, bool)
    return steps

  @parameterized.product(geometry=GEOMETRIES, dtype=(tf.float32, tf.bfloat16),
                         values=((np.inf, -np.inf), (np.nan,), (np.inf, np.nan)))
  def test_non_finite_input_comes_and_goes(self, geometry, dtype, values):
    assert_comes_and_goes(self, self._play(geometry, values, dtype))

  @parameterized.parameters(False, True)
  def test_overflowing_sum_recovers(self, dense):
    # Finite inputs whose products overflow float32: the output is inf while
    # they are there, and exact again once they are gone.
    shape, ks = ((1, 4, 4, 2), 4) if dense else ((1, 6, 6, 2), 3)
    out = shape[1] - ks + 1
    kernels = [np.full((1, ks * ks * 2, 5), 2.0, np.float32), np.ones((1, out * out * 5, 1),
                                                                        np.float32)]
    biases = [np.zeros((1, 5), np.float32), np.zeros((1, 1), np.float32)]
    geometry = dict(kernel_sizes=[ks, out], strides=[1, 1], relus=[False])
    x0 = np.ones(shape, np.float32)
    x1 = x0.copy()
    x1[0, 2, 2, 1] = 3e38  # 3e38 * 2 overflows
    x2 = x1.copy()
    x2[0, 2, 2, 1] = -1.0
    state = [np.zeros((1, out, out, 5), np.float32), np.zeros((1, 1, 1, 1), np.float32)]
    x_prev, fresh = x0, [True]
    for x in (x0, x1, x2):
      _, state = delta.population_delta_net_op(x, x_prev, state, kernels, biases, [0], fresh,
                                               **geometry)
      state = [s.numpy() for s in state]
      if x is x1:
        self.assertTrue(np.isposinf(state[0][0, 0, 0]).all())
      x_prev, fresh = x, [False]
    want = reference.population_delta_conv2d(x2, kernels[0], [0], kernel_size=ks, stride=1)
    self.assertAllEqual(state[0], want)  # small integers: exact

  def test_nan_weight_reaches_only_nonzero_inputs(self):
    # The op sums over nonzero input values: a NaN (or inf) weight poisons an
    # output exactly while its input is nonzero, and not after it is zero.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 2 * 2 * 1, 3)).astype(np.float32)
    w[0, 3, 1] = np.nan  # kernel row 3 = window position (1, 1), column 1
    kernels = [w, np.ones((1, 2 * 2 * 3, 1), np.float32)]
    biases = [np.zeros((1, 3), np.float32), np.zeros((1, 1), np.float32)]
    geometry = dict(kernel_sizes=[2, 2], strides=[1, 1], relus=[False])
    x0 = np.zeros((1, 3, 3, 1), np.float32)
    x1 = x0.copy()
    x1[0, 1, 1, 0] = 2.0  # position (1, 1) is row 3 of output (0, 0)'s window
    state = [np.zeros((1, 2, 2, 3), np.float32), np.zeros((1, 1, 1, 1), np.float32)]
    accs = []
    for x, x_prev, fresh in ((x0, x0, True), (x1, x0, False), (x0, x1, False)):
      _, state = delta.population_delta_net_op(x, x_prev, state, kernels, biases, [0], [fresh],
                                               **geometry)
      state = [s.numpy() for s in state]
      accs.append(state[0])
    self.assertTrue(np.isfinite(accs[0]).all())
    self.assertTrue(np.isnan(accs[1][0, 0, 0, 1]))
    self.assertEqual(np.isnan(accs[1]).sum(), 1)
    self.assertAllEqual(accs[2], np.zeros_like(accs[2]))

  @parameterized.parameters(tf.float32, tf.bfloat16)
  def test_net_recovers(self, dtype):
    rng = np.random.default_rng(9)
    b = 7
    net = Net(rng, (20, 20, 4), ((4, 2, 8), (3, 1, 8), (7, 1, 40), (1, 1, 5)), 2, dtype=dtype)
    index = np.array([1, 1, 0, 1, 1, 1, 1], np.int32)
    x0 = rng.standard_normal((b, 20, 20, 4)).astype(np.float32)
    x1 = x0.copy()
    x1[1, 5, 5, 0], x1[4, 12, 3, 2], x1[5, 0, 0, 3] = np.inf, np.nan, -np.inf
    x2 = x1.copy()
    x2[~np.isfinite(x2)] = 0.25
    state, x_prev, fresh = net.state(b), x0, np.ones(b, bool)
    for step, x in enumerate((x0, x1, x2, x2)):
      logits, state = _step(net, x, x_prev, state, index, fresh)
      # Each layer against the full convolution of its input (the op's own
      # output of the layer below), summed over its nonzero values.
      for i, acc in enumerate(state):
        ks, stride, _ = net.layers[i]
        wf = tf.cast(net.kernels[i], tf.float32).numpy()
        want = (full_sparse(x, wf, index, ks, stride) if i == 0 else
                full_sparse(state[i - 1], wf, index, ks, stride, bias=net.biases[i - 1],
                            relu=True))
        assert_like(self, acc, want, 1e-3, f"step {step} layer {i}")
      if step == 1:
        self.assertFalse(np.isfinite(logits).all(axis=1)[[1, 4, 5]].any())
        self.assertTrue(np.isfinite(logits[[0, 2, 3, 6]]).all())
      if step >= 2:
        self.assertTrue(np.isfinite(logits).all(), f"step {step}: poisoned accumulator")
        full, _ = _step(net, x, x, state, index, np.ones(b, bool))
        self.assertAllClose(logits, full, rtol=1e-4, atol=1e-3)
      x_prev, fresh = x, np.zeros(b, bool)


if __name__ == "__main__":
  tf.test.main()
