"""PopulationMatmul and PopulationConv2D (compiled op) against the gather + matmul
reference (`tfrl.ops.reference`, in float32 and summed in float64); the
bfloat16-input convolution (portable, or AMX in a library built with it)
against both."""

import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ops import population
from tfrl.ops import reference

# The raw ops' bias input when the epilogue adds none.
_NO_BIAS = tf.zeros([0, 0])


def _random_case(rng, b, m, k, n, p, active_fraction=0.7):
  x = rng.standard_normal((b, m, k)).astype(np.float32)
  w = rng.standard_normal((p, k, n)).astype(np.float32)
  index = rng.integers(0, p, size=b).astype(np.int32)
  active = rng.random(b) < active_fraction
  return x, w, index, active


def _float64_reference(x, w, index, active):
  """The reference with its products summed in float64."""
  return reference.population_matmul(x, w, index, active, dtype=tf.float64).numpy()


class PopulationMatmulTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_library_is_built(self):
    # Fails (does not skip) when the op library is missing.
    lib = population.load_library()
    self.assertTrue(hasattr(lib, "population_matmul"))
    self.assertTrue(population.have_op())

  @parameterized.named_parameters(
      ("dense_tiny", 1, 1, 1, 1, 1),
      ("dense", 37, 1, 29, 18, 5),
      ("dense_wide", 16, 1, 300, 512, 16),
      ("dense_vector_edges", 40, 1, 33, 47, 3),
      ("dense_streamed_with_tail", 9, 1, 70, 75, 6),
      ("dense_chunked_with_tail", 20, 1, 300, 75, 3),
      ("conv_like", 12, 49, 72, 16, 4),
      ("conv_large", 8, 81, 512, 64, 6),
      ("more_networks_than_rows", 3, 5, 11, 7, 64),
  )
  def test_matches_reference(self, b, m, k, n, p):
    rng = np.random.default_rng(b * 1000 + m * 100 + k + n + p)
    for fraction in (1.0, 0.5, 0.0):
      x, w, index, active = _random_case(rng, b, m, k, n, p, fraction)
      got = population.population_matmul_op(x, w, index, active).numpy()
      ref = reference.population_matmul(x, w, index, active).numpy()
      self.assertEqual(got.shape, (b, m, n))
      self.assertAllClose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))
      self.assertAllClose(got, _float64_reference(x, w, index, active),
                          rtol=1e-4, atol=1e-4 * np.sqrt(k))
      self.assertAllEqual(got[~active], np.zeros_like(got[~active]))

  def test_repeated_and_missing_indices(self):
    rng = np.random.default_rng(3)
    x, w, _, _ = _random_case(rng, 20, 9, 40, 24, 10)
    index = np.array([2] * 10 + [7] * 6 + [0] * 4, np.int32)  # most nets missing
    active = np.ones(20, bool)
    active[[1, 11, 19]] = False
    got = population.population_matmul_op(x, w, index, active).numpy()
    self.assertAllClose(got, _float64_reference(x, w, index, active), atol=1e-3)

  def test_inactive_rows_may_hold_any_index(self):
    rng = np.random.default_rng(4)
    x, w, index, _ = _random_case(rng, 6, 2, 8, 4, 3)
    index[[1, 4]] = [-5, 99]
    active = np.array([1, 0, 1, 1, 0, 1], bool)
    got = population.population_matmul_op(x, w, index, active).numpy()
    self.assertAllClose(got, _float64_reference(x, w, index, active), atol=1e-4)

  def test_conv_via_extract_patches_matches_conv2d(self):
    rng = np.random.default_rng(5)
    obs = rng.standard_normal((6, 21, 21, 4)).astype(np.float32)
    kernels = rng.standard_normal((3, 8, 8, 4, 16)).astype(np.float32)
    index = np.array([0, 2, 2, 1, 0, 2], np.int32)
    active = np.array([1, 1, 0, 1, 1, 1], bool)
    patches = tf.image.extract_patches(obs, [1, 8, 8, 1], [1, 4, 4, 1],
                                       [1, 1, 1, 1], "VALID")
    out_hw = patches.shape[1:3]
    y = population.population_matmul_op(
        tf.reshape(patches, [6, -1, 8 * 8 * 4]),
        tf.reshape(kernels, [3, 8 * 8 * 4, 16]), index, active)
    y = tf.reshape(y, [6, out_hw[0], out_hw[1], 16]).numpy()
    for b in range(6):
      if active[b]:
        want = tf.nn.conv2d(obs[b:b + 1], kernels[index[b]], 4, "VALID")
        self.assertAllClose(y[b], want[0], atol=1e-3)
      else:
        self.assertAllEqual(y[b], np.zeros_like(y[b]))

  def test_result_independent_of_batch_composition(self):
    # A row alone takes the streamed path, 3 to 8 rows of one network the
    # K-chunked one (K = 200 spans several chunks), more rows the
    # register-blocked one; columns past the last full vector the scalar tail.
    rng = np.random.default_rng(6)
    strategy = {1: "streamed", 2: "streamed", 5: "k_chunked", 8: "k_chunked", 12: "tiles"}
    for n, dtype in ((64, tf.float32), (75, tf.float32), (75, tf.bfloat16)):
      x, w, _, _ = _random_case(rng, 12, 1, 200, n, 4)
      w = tf.cast(w, dtype)
      index = np.full(12, 2, np.int32)
      outputs = []
      for rows, want in strategy.items():
        before = population.kernel_info()["gemm_calls"]
        outputs.append(population.population_matmul_op(x[:rows], w, index[:rows],
                                                       np.ones(rows, bool)).numpy()[:1])
        after = population.kernel_info()["gemm_calls"]
        ran = {s: after[s] - before[s] for s in after if after[s] != before[s]}
        self.assertEqual(ran, {want: 1}, f"{rows} rows, N={n}")  # one network: one GEMM
      for out in outputs[1:]:
        self.assertAllEqual(outputs[0], out)

  def test_inside_tf_function_and_shape_inference(self):
    fn = tf.function(population.population_matmul_op, input_signature=[
        tf.TensorSpec([None, 3, 5], tf.float32),
        tf.TensorSpec([4, 5, 7], tf.float32),
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None], tf.bool)])
    concrete = fn.get_concrete_function()
    self.assertEqual(concrete.output_shapes.as_list(), [None, 3, 7])
    rng = np.random.default_rng(7)
    x, w, index, active = _random_case(rng, 9, 3, 5, 7, 4)
    self.assertAllClose(fn(x, w, index, active),
                        _float64_reference(x, w, index, active), atol=1e-4)

  def test_fallback_dispatch(self):
    rng = np.random.default_rng(8)
    x, w, index, active = _random_case(rng, 5, 2, 3, 4, 2)
    a = population.population_matmul(x, w, index, active, use_op=False)
    b = population.population_matmul(x, w, index, active)
    self.assertAllClose(a, b, atol=1e-5)

  @parameterized.named_parameters(
      ("index_too_large", (4, 2, 3), (2, 3, 5), [0, 1, 2, 0], [1, 1, 1, 1]),
      ("index_negative", (4, 2, 3), (2, 3, 5), [0, -1, 1, 0], [1, 1, 1, 1]),
      ("k_mismatch", (4, 2, 3), (2, 4, 5), [0, 1, 1, 0], [1, 1, 1, 1]),
      ("index_length", (4, 2, 3), (2, 3, 5), [0, 1, 1], [1, 1, 1, 1]),
      ("active_length", (4, 2, 3), (2, 3, 5), [0, 1, 1, 0], [1, 1, 1]),
      ("empty_population", (2, 2, 3), (0, 3, 5), [0, 0], [1, 0]),
  )
  def test_bad_inputs_rejected(self, x_shape, w_shape, index, active):
    x = tf.ones(x_shape)
    w = tf.ones(w_shape)
    with self.assertRaises(tf.errors.InvalidArgumentError):
      population.population_matmul_op(x, w, index, np.array(active, bool))

  def test_bad_ranks_rejected_at_runtime(self):
    fn = tf.function(population.load_library().population_matmul)
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
      fn(bias=_NO_BIAS, x=tf.ones([2, 3]), w=tf.ones([1, 3, 2]), index=[0, 0],
         active=[True, True])
    # Unknown ranks at trace time: the kernel itself must reject them.
    fn2 = tf.function(
        lambda x, w, i, a: population.load_library().population_matmul(
            x=x, w=w, index=i, active=a, bias=_NO_BIAS),
        input_signature=[tf.TensorSpec(None, tf.float32)] * 2 +
        [tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.bool)])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn2(tf.ones([2, 3]), tf.ones([1, 3, 2]), tf.constant([0, 0]),
          tf.constant([True, True]))
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn2(tf.ones([2, 1, 3]), tf.ones([1, 3, 2]), tf.constant([[0, 0]]),
          tf.constant([True, True]))


class PopulationConv2DTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(
      ("nature_conv0", 5, 84, 84, 4, 32, 8, 4, 3),
      ("nature_conv1", 6, 20, 20, 32, 64, 4, 2, 4),
      ("nature_conv2", 4, 9, 9, 64, 64, 3, 1, 2),
      ("odd", 7, 13, 11, 3, 5, 3, 2, 5),
      ("one_by_one", 3, 4, 5, 6, 17, 1, 1, 2),
      ("kernel_equals_image", 3, 5, 5, 2, 3, 5, 3, 3),
  )
  def test_matches_reference_and_conv2d(self, b, h, w, c, n, ks, stride, p):
    rng = np.random.default_rng(b + h + c + n)
    x = rng.standard_normal((b, h, w, c)).astype(np.float32)
    kernels = rng.standard_normal((p, ks, ks, c, n)).astype(np.float32)
    flat = kernels.reshape(p, ks * ks * c, n)
    for fraction in (1.0, 0.6):
      index = rng.integers(0, p, size=b).astype(np.int32)
      active = rng.random(b) < fraction
      got = population.population_conv2d_op(x, flat, index, active,
                                             kernel_size=ks, stride=stride).numpy()
      ref = reference.population_conv2d(x, flat, index, active,
                                                   kernel_size=ks, stride=stride).numpy()
      self.assertEqual(got.shape, ref.shape)
      tol = 1e-4 * np.sqrt(ks * ks * c)
      self.assertAllClose(got, ref, rtol=1e-4, atol=tol)
      for i in range(b):
        if active[i]:
          want = tf.nn.conv2d(x[i:i + 1], kernels[index[i]], stride, "VALID")[0]
          self.assertAllClose(got[i], want, rtol=1e-4, atol=tol)
        else:
          self.assertAllEqual(got[i], np.zeros_like(got[i]))

  def test_shape_inference(self):
    fn = tf.function(
        lambda x, w, i, a: population.population_conv2d_op(
            x, w, i, a, kernel_size=8, stride=4),
        input_signature=[tf.TensorSpec([None, 84, 84, 4], tf.float32),
                         tf.TensorSpec([None, 256, 32], tf.float32),
                         tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.bool)])
    self.assertEqual(fn.get_concrete_function().output_shapes.as_list(),
                     [None, 20, 20, 32])

  @parameterized.named_parameters(
      ("k_mismatch", (2, 9, 9, 3), (2, 26, 4), [0, 1], 3, 1),
      ("index_out_of_range", (2, 9, 9, 3), (2, 27, 4), [0, 2], 3, 1),
      ("image_too_small", (2, 2, 9, 3), (2, 27, 4), [0, 1], 3, 1),
      ("rank", (2, 9, 27), (2, 27, 4), [0, 1], 3, 1),
  )
  def test_bad_inputs_rejected(self, x_shape, w_shape, index, ks, stride):
    fn = tf.function(
        lambda x, w, i, a: population.load_library().population_conv2d(
            x=x, w=w, index=i, active=a, bias=_NO_BIAS, kernel_size=ks, stride=stride),
        input_signature=[tf.TensorSpec(None, tf.float32)] * 2 +
        [tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.bool)])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn(tf.ones(x_shape), tf.ones(w_shape), tf.constant(index, tf.int32),
         tf.ones([len(index)], tf.bool))

  def test_bad_attrs_rejected(self):
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
      population.population_conv2d_op(tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1]), [0],
                                       [True], kernel_size=0, stride=1)


class EpilogueAndInputScaleTest(tf.test.TestCase, parameterized.TestCase):
  """The fused bias / ReLU epilogue and the uint8 input with a scale."""

  test_session = None

  @parameterized.named_parameters(
      ("bias", True, False), ("relu", False, True), ("bias_relu", True, True))
  def test_matmul_epilogue_matches_reference(self, with_bias, relu):
    rng = np.random.default_rng(7)
    for b, m, k, n, p in ((13, 1, 40, 37, 4), (6, 1, 300, 256, 3), (5, 9, 20, 16, 2),
                          (4, 1, 0, 5, 2)):
      x, w, index, active = _random_case(rng, b, m, k, n, p)
      bias = rng.standard_normal((p, n)).astype(np.float32) if with_bias else None
      got = population.population_matmul_op(x, w, index, active, bias=bias,
                                            relu=relu).numpy()
      ref = reference.population_matmul(x, w, index, active, bias=bias,
                                                    relu=relu).numpy()
      self.assertAllClose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)))
      want = _float64_reference(x, w, index, active)
      if with_bias:
        want = want + np.where(active[:, None], bias[index % p], 0)[:, None, :]
      if relu:
        want = np.maximum(want, 0)
        self.assertTrue((got >= 0).all())
      self.assertAllClose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)))
      self.assertAllEqual(got[~active], np.zeros_like(got[~active]))

  def test_relu_keeps_nan(self):
    x = np.array([[[np.nan]], [[-1.0]]], np.float32)
    got = population.population_matmul_op(x, np.ones([1, 1, 1], np.float32), [0, 0],
                                          relu=True).numpy()
    self.assertTrue(np.isnan(got[0, 0, 0]))
    self.assertEqual(got[1, 0, 0], 0.0)

  @parameterized.named_parameters(("float32", "float32"), ("bfloat16", "bfloat16"))
  def test_uint8_conv_with_scale_and_epilogue(self, input_dtype):
    rng = np.random.default_rng(3)
    b, h, w, c, n, ks, stride, p = 6, 84, 84, 4, 16, 8, 4, 3
    frames = rng.integers(0, 256, size=(b, h, w, c), dtype=np.uint8)
    kernels = rng.standard_normal((p, ks * ks * c, n)).astype(np.float32)
    if input_dtype == "bfloat16":
      kernels = tf.cast(kernels, tf.bfloat16)
    bias = rng.standard_normal((p, n)).astype(np.float32)
    index = rng.integers(0, p, size=b).astype(np.int32)
    active = np.array([True, False, True, True, False, True])
    kwargs = dict(kernel_size=ks, stride=stride, input_dtype=input_dtype, bias=bias,
                  relu=True)
    got = population.population_conv2d_op(frames, kernels, index, active,
                                          input_scale=1 / 255, **kwargs).numpy()
    # The same as the float frames the graph used to make, bit for bit.
    floats = tf.cast(frames, tf.float32) * (1.0 / 255.0)
    same = population.population_conv2d_op(floats, kernels, index, active, **kwargs)
    self.assertAllEqual(got, same.numpy())
    ref = reference.population_conv2d(frames, kernels, index, active,
                                                 input_scale=1 / 255, **kwargs).numpy()
    self.assertAllClose(got, ref, rtol=1e-4, atol=1e-3)
    self.assertAllEqual(got[~active], np.zeros_like(got[~active]))
    self.assertGreater((got[active] > 0).mean(), 0.2)  # the ReLU did not zero all.

  def test_float_input_scale(self):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7, 7, 2)).astype(np.float32)
    w = rng.standard_normal((2, 18, 5)).astype(np.float32)
    got = population.population_conv2d_op(x, w, [0, 1, 1], None, kernel_size=3, stride=2,
                                          input_scale=0.5)
    want = population.population_conv2d_op(x * np.float32(0.5), w, [0, 1, 1], None,
                                           kernel_size=3, stride=2)
    self.assertAllEqual(got, want)

  def test_bad_bias_rejected(self):
    lib = population.load_library()
    x, w = tf.ones([2, 1, 4]), tf.ones([3, 4, 5])
    for bias in (tf.ones([3, 4]), tf.ones([2, 5]), tf.ones([15]), tf.zeros([0, 0])):
      with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "bias"):
        lib.population_matmul(x=x, w=w, index=[0, 1], active=[True, True], bias=bias,
                              epilogue="bias")
    # Unknown shapes at trace time: the kernel itself rejects them.
    fn = tf.function(
        lambda bias: lib.population_conv2d(x=tf.ones([1, 4, 4, 1]), w=tf.ones([3, 4, 5]),
                                           index=[0], active=[True], bias=bias,
                                           kernel_size=2, stride=2, epilogue="bias_relu"),
        input_signature=[tf.TensorSpec(None, tf.float32)])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"bias must be \[P, N\]"):
      fn(tf.ones([3, 4]))
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError, TypeError)):
      lib.population_matmul(x=x, w=w, index=[0, 1], active=[True, True], bias=_NO_BIAS,
                            epilogue="tanh")


class NonFiniteValuesTest(tf.test.TestCase, parameterized.TestCase):
  """NaN and inf through the GEMM ops: IEEE propagation, row by row."""

  test_session = None

  @parameterized.product(dtype=(tf.float32, tf.bfloat16), shape=(
      (9, 1, 70, 75, 2),     # streamed rows
      (6, 1, 300, 80, 2),    # K-chunked rows
      (13, 5, 40, 37, 3)))   # register blocks and tails
  def test_matmul_propagates_by_row(self, dtype, shape):
    b, m, k, n, p = shape
    rng = np.random.default_rng(k + n)
    x = rng.standard_normal((b, m, k)).astype(np.float32)
    w = rng.standard_normal((p, k, n)).astype(np.float32)
    index = (np.arange(b) % p).astype(np.int32)
    active = np.ones(b, bool)
    active[-1] = False
    clean = population.population_matmul_op(x, tf.cast(w, dtype), index, active).numpy()
    x[0, 0, 3] = np.nan           # row 0: NaN everywhere in its first M row
    x[1, m - 1, 5] = np.inf       # row 1: inf times weights of both signs
    x[-1, 0, 0] = np.nan          # inactive: stays zero
    w = w.copy()
    w[p - 1, 7, 2] = np.inf       # rows of network p - 1: column 2 inf or NaN
    got = population.population_matmul_op(x, tf.cast(w, dtype), index, active).numpy()
    want = _float64_reference(x, tf.cast(w, dtype), index, active)
    self.assertAllEqual(np.isnan(got), np.isnan(want))
    self.assertAllEqual(np.isinf(got), np.isinf(want))
    self.assertAllEqual(np.sign(got[np.isinf(got)]), np.sign(want[np.isinf(want)]))
    self.assertTrue(np.isnan(got[0, 0]).all() and np.isfinite(got[0, 1:]).all())
    self.assertAllEqual(got[-1], np.zeros_like(got[-1]))
    # Rows untouched by the NaN and inf are exactly those of the clean run.
    untouched = [r for r in range(2, b - 1) if index[r] != p - 1]
    self.assertNotEmpty(untouched)
    self.assertAllEqual(got[untouched], clean[untouched])

  @parameterized.parameters("float32", "bfloat16")
  def test_conv_nan_reaches_only_its_windows(self, input_dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 9, 3)).astype(np.float32)
    x[0, 4, 4, 1] = np.nan
    x[1, 0, 8, 0] = -np.inf
    w16 = tf.cast(rng.standard_normal((1, 27, 5)), tf.bfloat16)
    bias = np.zeros((1, 5), np.float32)
    bias[0, 3] = np.nan
    y = population.population_conv2d_op(x, w16, [0, 0], kernel_size=3, stride=2,
                                        input_dtype=input_dtype, bias=bias,
                                        relu=True).numpy()
    # Output (i, j) reads rows 2i .. 2i + 2: pixel (4, 4) is in outputs 1..2 x 1..2.
    nan0 = np.zeros((4, 4), bool)
    nan0[1:3, 1:3] = True
    self.assertAllEqual(np.isnan(y[0, :, :, 0]), nan0)
    self.assertTrue(np.isnan(y[:, :, :, 3]).all())  # the NaN bias, through the ReLU
    # -inf at (0, 8) reaches output (0, 3): -inf or NaN before the ReLU;
    # the ReLU makes -inf zero and keeps NaN.
    self.assertFalse(np.isinf(y).any())
    finite = np.ones((4, 4), bool)
    finite[0, 3] = False
    self.assertTrue(np.isfinite(y[1, :, :, [0, 1, 2, 4]][:, finite]).all())


class BFloat16WeightsTest(tf.test.TestCase, parameterized.TestCase):
  """bfloat16 weights: widened exactly, so equal to float32 weights rounded to bf16."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(
      ("dense_wide", 16, 1, 300, 512, 16),
      ("dense_vector_edges", 40, 1, 33, 47, 3),
      ("dense_streamed_with_tail", 9, 1, 70, 75, 6),
      ("conv_like", 12, 49, 72, 16, 4),
      ("tiny", 3, 2, 5, 3, 2),
  )
  def test_matmul_equals_float_op_on_rounded_weights(self, b, m, k, n, p):
    rng = np.random.default_rng(k * n + p)
    x, w, index, active = _random_case(rng, b, m, k, n, p)
    w16 = tf.cast(w, tf.bfloat16)
    rounded = tf.cast(w16, tf.float32)
    self.assertGreater(np.abs(rounded.numpy() - w).max(), 0.0)  # really rounded
    got = population.population_matmul_op(x, w16, index, active).numpy()
    # Float32 arithmetic on the exactly widened weights (the scalar column
    # tail may round differently from the float kernel's, hence not bitwise).
    self.assertAllClose(got, population.population_matmul_op(x, rounded, index,
                                                             active).numpy(),
                        rtol=1e-6, atol=1e-6 * np.sqrt(k))
    tol = 1e-4 * np.sqrt(k)
    self.assertAllClose(got, reference.population_matmul(
        x, w16, index, active).numpy(), rtol=1e-4, atol=tol)
    self.assertAllClose(got, _float64_reference(x, rounded.numpy(), index, active),
                        rtol=1e-4, atol=tol)

  def test_conv_equals_float_op_on_rounded_weights(self):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 21, 19, 4)).astype(np.float32)
    w16 = tf.cast(rng.standard_normal((3, 8 * 8 * 4, 24)), tf.bfloat16)
    index = np.array([2, 0, 2, 1, 0], np.int32)
    active = np.array([1, 1, 0, 1, 1], bool)
    got = population.population_conv2d_op(x, w16, index, active, kernel_size=8,
                                           stride=4).numpy()
    want = population.population_conv2d_op(x, tf.cast(w16, tf.float32), index,
                                            active, kernel_size=8, stride=4).numpy()
    self.assertAllClose(got, want, rtol=1e-6, atol=1e-5)
    ref = reference.population_conv2d(x, w16, index, active,
                                                 kernel_size=8, stride=4).numpy()
    self.assertAllClose(got, ref, rtol=1e-4, atol=2e-3)

  def test_bad_inputs_rejected(self):
    lib = population.load_library()
    w16 = tf.ones([2, 4, 3], tf.bfloat16)
    with self.assertRaises(tf.errors.InvalidArgumentError):
      lib.population_matmul(bias=_NO_BIAS, x=tf.ones([2, 1, 4]), w=w16, index=[0, 2],
                            active=[True, True])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      lib.population_matmul(bias=_NO_BIAS, x=tf.ones([2, 1, 5]), w=w16, index=[0, 1],
                            active=[True, True])
    with self.assertRaises((TypeError, tf.errors.InvalidArgumentError,
                            tf.errors.NotFoundError)):
      lib.population_matmul(bias=_NO_BIAS, x=tf.ones([2, 1, 4]), w=tf.ones([2, 4, 3], tf.float16),
                            index=[0, 1], active=[True, True])


def _bf16(a):
  """float32 values rounded to bfloat16 (as float32), the way tf.cast rounds."""
  return reference.round_to_bfloat16(a).numpy()


def _float64_conv(x, kernels, index, active, ks, stride):
  """The reference VALID convolution of each active row, summed in float64."""
  return reference.population_conv2d(x, kernels, index, active, kernel_size=ks, stride=stride,
                                     dtype=tf.float64).numpy()


# Cases of the bfloat16-input convolution: (batch, H, W, C, N, kernel, stride, P).
# The AMX path works in 16-row tiles of output positions, 32-deep K steps and
# 16-column blocks, so the shapes cover M, K and N remainders of each.
_BF16_INPUT_CASES = (
    ("small_conv0", 5, 84, 84, 4, 16, 8, 4, 3),       # M 400 = 25 tiles, N one block
    ("small_conv1", 6, 20, 20, 16, 32, 4, 2, 4),      # M 81: a 1-row tile; N 2 blocks
    ("large_conv1", 4, 20, 20, 32, 64, 4, 2, 2),      # N 4 blocks
    ("large_conv2", 3, 9, 9, 64, 64, 3, 1, 2),        # K 576 = 18 steps
    ("n_odd_k_odd", 7, 13, 11, 3, 5, 3, 2, 5),        # K 27 (one padded step), N 5
    ("n_three_blocks", 3, 14, 9, 5, 40, 3, 1, 2),     # K 45, N 40 (2.5 blocks)
    ("n_17", 2, 10, 10, 6, 17, 2, 2, 2),              # N just over a block
    ("kernel_equals_image", 3, 5, 5, 2, 3, 5, 3, 3),  # M 1
    ("one_by_one", 4, 4, 5, 6, 33, 1, 1, 2),          # K 6, N 33
)


class BFloat16InputConvTest(tf.test.TestCase, parameterized.TestCase):
  """input_dtype='bfloat16': round x to bfloat16, bf16 kernels, float32 sums.

  The expected value is computed from the same bfloat16-rounded input and
  kernel, so op and reference differ only in the order of the float32 sums
  (AMX tiles sum pairs of products, then 32-deep steps, the GEMM one product
  at a time, the reference in oneDNN's order). Those orders differ by a few
  float32 ulps of the partial sums: about K * 2^-24 * sum |products|, here
  below 1e-4 * sqrt(K) for standard-normal data of magnitude ~sqrt(K).
  """

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(*_BF16_INPUT_CASES)
  def test_matches_reference_on_rounded_inputs(self, b, h, w, c, n, ks, stride, p):
    rng = np.random.default_rng(b * 7 + h + c * 3 + n)
    x = rng.standard_normal((b, h, w, c)).astype(np.float32)
    w16 = tf.cast(rng.standard_normal((p, ks * ks * c, n)), tf.bfloat16)
    tol = 1e-4 * np.sqrt(ks * ks * c)
    for fraction in (1.0, 0.6, 0.0):
      index = rng.integers(0, p, size=b).astype(np.int32)
      active = rng.random(b) < fraction
      got = population.population_conv2d_op(x, w16, index, active, kernel_size=ks,
                                             stride=stride, input_dtype="bfloat16").numpy()
      ref = reference.population_conv2d(
          x, w16, index, active, kernel_size=ks, stride=stride,
          input_dtype="bfloat16").numpy()
      self.assertEqual(got.shape, ref.shape)
      self.assertAllClose(got, ref, rtol=1e-4, atol=tol)
      exact = _float64_conv(_bf16(x), tf.cast(w16, tf.float32).numpy(), index, active, ks,
                          stride)
      self.assertAllClose(got, exact, rtol=1e-4, atol=tol)
      self.assertAllEqual(got[~active], np.zeros_like(got[~active]))
    # The rounding of the input is really applied (the checks above can fail).
    full = population.population_conv2d_op(x, w16, np.zeros(b, np.int32), None,
                                            kernel_size=ks, stride=stride).numpy()
    rounded = population.population_conv2d_op(x, w16, np.zeros(b, np.int32), None,
                                               kernel_size=ks, stride=stride,
                                               input_dtype="bfloat16").numpy()
    self.assertGreater(np.abs(full - rounded).max(), 10 * tol)

  def test_repeated_and_missing_indices(self):
    # Many rows of one network (several work units share its packed kernel),
    # most networks absent, rows of a network not adjacent in the batch.
    rng = np.random.default_rng(21)
    x = rng.standard_normal((24, 20, 20, 16)).astype(np.float32)
    w16 = tf.cast(rng.standard_normal((10, 4 * 4 * 16, 32)), tf.bfloat16)
    index = np.array([2, 7] * 9 + [0] * 6, np.int32)
    active = np.ones(24, bool)
    active[[1, 11, 23]] = False
    index[1] = 99  # inactive rows may hold any index
    got = population.population_conv2d_op(x, w16, index, active, kernel_size=4, stride=2,
                                           input_dtype="bfloat16").numpy()
    want = _float64_conv(_bf16(x), tf.cast(w16, tf.float32).numpy(), index, active, 4, 2)
    self.assertAllClose(got, want, rtol=1e-4, atol=1e-3)

  def test_result_independent_of_batch_composition(self):
    # A row's result does not depend on the other rows (nor on how the rows
    # are cut into work units).
    rng = np.random.default_rng(22)
    x = rng.standard_normal((16, 84, 84, 4)).astype(np.float32)
    w16 = tf.cast(rng.standard_normal((4, 256, 16)), tf.bfloat16)
    index = rng.integers(0, 4, 16).astype(np.int32)
    full = population.population_conv2d_op(x, w16, index, None, kernel_size=8, stride=4,
                                            input_dtype="bfloat16").numpy()
    alone = population.population_conv2d_op(x[3:4], w16, index[3:4], None, kernel_size=8,
                                             stride=4, input_dtype="bfloat16").numpy()
    self.assertAllEqual(full[3:4], alone)

  def test_rounds_to_nearest_even(self):
    # A 1x1 convolution with a kernel of 1 returns the rounded input itself:
    # ties go to the even neighbour, as tf.cast rounds.
    one = 1.0 + 2.0 ** -8  # halfway between 1 and 1 + 2^-7: rounds down to 1
    three = 1.0 + 3 * 2.0 ** -8  # halfway between 1 + 2^-7 and 1 + 2^-6: rounds up
    values = np.array([one, three, -one, 0.1, 1e30, -2.5e-3, 0.0, 7.0],
                      np.float32).reshape(1, 2, 4, 1)
    w16 = tf.ones([1, 1, 1], tf.bfloat16)
    got = population.population_conv2d_op(values, w16, [0], None, kernel_size=1, stride=1,
                                           input_dtype="bfloat16").numpy()
    self.assertAllEqual(got, _bf16(values))
    self.assertEqual(got[0, 0, 0, 0], 1.0)
    self.assertEqual(got[0, 0, 1, 0], 1.0 + 2.0 ** -6)

  def test_amx_and_portable_paths_agree(self):
    # TFRL_POPULATION_NO_AMX forces the portable path (round the input, then
    # the float32 GEMM) in a fresh process; this process uses AMX tiles where
    # the library has them (TFRL_BUILD_AMX=1) and the CPU has AMX-BF16. Both
    # compute the same function up to summation order. The portable path
    # equals the float32-input op on the rounded input exactly (same GEMM,
    # same order).
    info = population.kernel_info()
    if not info["amx"]:
      # This process runs the portable path too: check it, and do not
      # compare it with itself.
      before = info["calls"]
      _bf16_input_outputs(check_portable=True)
      after = population.kernel_info()["calls"]
      self.assertEqual(after["amx"], before["amx"])
      if "amx" not in info["options"]:
        # No AMX path in this library to compare: tests/ops/test_build_options.py
        # runs this test against a library built with TFRL_BUILD_AMX=1.
        return
      if os.environ.get("TFRL_POPULATION_NO_AMX"):
        why = "TFRL_POPULATION_NO_AMX is set"
      else:
        why = "this CPU has no AMX-BF16 (lscpu: amx_bf16)"
      print(f"\n[population kernels] SKIPPED AMX against portable: {why}")
      self.skipTest(f"the AMX path does not run here: {why}; only the portable path was "
                    "checked")
    out = os.path.join(self.get_temp_dir(), "portable.npz")
    code = ("import numpy as np, sys; sys.path.insert(0, %r); "
            "from tests.ops import test_population as t; "
            "np.savez(%r, *t._bf16_input_outputs(check_portable=True))") % (os.getcwd(), out)
    env = dict(os.environ, TFRL_POPULATION_NO_AMX="1", TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=os.getcwd())
    portable = np.load(out)
    before = population.kernel_info()["calls"]["amx"]
    default = _bf16_input_outputs()
    self.assertGreater(population.kernel_info()["calls"]["amx"], before)  # AMX really ran
    self.assertLen(portable.files, len(default))
    for i, (got, (name, *case)) in enumerate(zip(default, _BF16_INPUT_CASES)):
      tol = 1e-4 * np.sqrt(case[5] * case[5] * case[3])
      self.assertAllClose(got, portable[f"arr_{i}"], rtol=1e-4, atol=tol, msg=name)

  def test_bad_attrs_and_dtypes_rejected(self):
    x = tf.ones([2, 9, 9, 3])
    w16 = tf.ones([2, 27, 4], tf.bfloat16)
    with self.assertRaisesRegex(ValueError, "input_dtype"):
      population.population_conv2d_op(x, w16, [0, 1], None, kernel_size=3, stride=1,
                                       input_dtype="float16")
    with self.assertRaisesRegex(ValueError, "bfloat16 kernels"):
      population.population_conv2d_op(x, tf.ones([2, 27, 4]), [0, 1], None, kernel_size=3,
                                       stride=1, input_dtype="bfloat16")
    with self.assertRaisesRegex(ValueError, "bfloat16 kernels"):
      reference.population_conv2d(x, tf.ones([2, 27, 4]), [0, 1], None,
                                             kernel_size=3, stride=1, input_dtype="bfloat16")
    lib = population.load_library()
    with self.assertRaises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
      lib.population_conv2d(x=x, w=w16, index=[0, 1], active=[True, True], bias=_NO_BIAS,
                            kernel_size=3, stride=1, input_dtype="float16")
    # The op itself, float32 kernels with a bfloat16 input: rejected by the kernel.
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "bfloat16 kernels"):
      lib.population_conv2d(x=x, w=tf.ones([2, 27, 4]), index=[0, 1], active=[True, True],
                            bias=_NO_BIAS, kernel_size=3, stride=1, input_dtype="bfloat16")

  @parameterized.named_parameters(
      ("k_mismatch", (2, 9, 9, 3), (2, 26, 4), [0, 1], 3, 1),
      ("index_out_of_range", (2, 9, 9, 3), (2, 27, 4), [0, 2], 3, 1),
      ("index_negative", (2, 9, 9, 3), (2, 27, 4), [-1, 0], 3, 1),
      ("image_too_small", (2, 2, 9, 3), (2, 27, 4), [0, 1], 3, 1),
      ("rank", (2, 9, 27), (2, 27, 4), [0, 1], 3, 1),
      ("empty_population", (2, 9, 9, 3), (0, 27, 4), [0, 0], 3, 1),
  )
  def test_bad_inputs_rejected(self, x_shape, w_shape, index, ks, stride):
    fn = tf.function(
        lambda x, w, i, a: population.load_library().population_conv2d(
            x=x, w=w, index=i, active=a, bias=_NO_BIAS, kernel_size=ks, stride=stride,
            input_dtype="bfloat16"),
        input_signature=[tf.TensorSpec(None, tf.float32), tf.TensorSpec(None, tf.bfloat16),
                         tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.bool)])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn(tf.ones(x_shape), tf.ones(w_shape, tf.bfloat16), tf.constant(index, tf.int32),
         tf.ones([len(index)], tf.bool))


def _bf16_input_outputs(check_portable=False):
  """The op's outputs on _BF16_INPUT_CASES (fixed data), in this process's path."""
  outputs = []
  for name, b, h, w, c, n, ks, stride, p in _BF16_INPUT_CASES:
    rng = np.random.default_rng(len(name) * 31 + n)
    x = rng.standard_normal((b, h, w, c)).astype(np.float32)
    w16 = tf.cast(rng.standard_normal((p, ks * ks * c, n)), tf.bfloat16)
    index = rng.integers(0, p, size=b).astype(np.int32)
    active = rng.random(b) < 0.8
    y = population.population_conv2d_op(x, w16, index, active, kernel_size=ks, stride=stride,
                                         input_dtype="bfloat16").numpy()
    if check_portable:
      same = population.population_conv2d_op(_bf16(x), w16, index, active, kernel_size=ks,
                                             stride=stride).numpy()
      np.testing.assert_array_equal(y, same, err_msg=name)
    outputs.append(y)
  return outputs


if __name__ == "__main__":
  tf.test.main()
