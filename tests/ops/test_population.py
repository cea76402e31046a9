"""PopulationMatmul (compiled op) against the gather + matmul reference."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ops import population


def _random_case(rng, b, m, k, n, p, active_fraction=0.7):
  x = rng.standard_normal((b, m, k)).astype(np.float32)
  w = rng.standard_normal((p, k, n)).astype(np.float32)
  index = rng.integers(0, p, size=b).astype(np.int32)
  active = rng.random(b) < active_fraction
  return x, w, index, active


def _numpy_reference(x, w, index, active):
  y = np.zeros((x.shape[0], x.shape[1], w.shape[2]), np.float64)
  for b in range(x.shape[0]):
    if active[b]:
      y[b] = x[b].astype(np.float64) @ w[index[b]].astype(np.float64)
  return y


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
      ("conv_like", 12, 49, 72, 16, 4),
      ("conv_large", 8, 81, 512, 64, 6),
      ("more_networks_than_rows", 3, 5, 11, 7, 64),
  )
  def test_matches_reference(self, b, m, k, n, p):
    rng = np.random.default_rng(b * 1000 + m * 100 + k + n + p)
    for fraction in (1.0, 0.5, 0.0):
      x, w, index, active = _random_case(rng, b, m, k, n, p, fraction)
      got = population.population_matmul_op(x, w, index, active).numpy()
      ref = population.population_matmul_reference(x, w, index, active).numpy()
      self.assertEqual(got.shape, (b, m, n))
      self.assertAllClose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))
      self.assertAllClose(got, _numpy_reference(x, w, index, active),
                          rtol=1e-4, atol=1e-4 * np.sqrt(k))
      self.assertAllEqual(got[~active], np.zeros_like(got[~active]))

  def test_repeated_and_missing_indices(self):
    rng = np.random.default_rng(3)
    x, w, _, _ = _random_case(rng, 20, 9, 40, 24, 10)
    index = np.array([2] * 10 + [7] * 6 + [0] * 4, np.int32)  # most nets missing
    active = np.ones(20, bool)
    active[[1, 11, 19]] = False
    got = population.population_matmul_op(x, w, index, active).numpy()
    self.assertAllClose(got, _numpy_reference(x, w, index, active), atol=1e-3)

  def test_inactive_rows_may_hold_any_index(self):
    rng = np.random.default_rng(4)
    x, w, index, _ = _random_case(rng, 6, 2, 8, 4, 3)
    index[[1, 4]] = [-5, 99]
    active = np.array([1, 0, 1, 1, 0, 1], bool)
    got = population.population_matmul_op(x, w, index, active).numpy()
    self.assertAllClose(got, _numpy_reference(x, w, index, active), atol=1e-4)

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
    # 8 rows per network take the register-blocked path, a row alone the
    # streamed one (and columns past the last full vector the scalar tail).
    rng = np.random.default_rng(6)
    for n, dtype in ((64, tf.float32), (75, tf.float32), (75, tf.bfloat16)):
      x, w, index, _ = _random_case(rng, 32, 1, 200, n, 4)
      w = tf.cast(w, dtype)
      full = population.population_matmul_op(x, w, index, np.ones(32, bool)).numpy()
      alone = population.population_matmul_op(x[:1], w, index[:1], [True]).numpy()
      self.assertAllEqual(full[:1], alone)

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
                        _numpy_reference(x, w, index, active), atol=1e-4)

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
      fn(x=tf.ones([2, 3]), w=tf.ones([1, 3, 2]), index=[0, 0],
         active=[True, True])
    # Unknown ranks at trace time: the kernel itself must reject them.
    fn2 = tf.function(
        lambda x, w, i, a: population.load_library().population_matmul(
            x=x, w=w, index=i, active=a),
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
      ref = population.population_conv2d_reference(x, flat, index, active,
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
            x=x, w=w, index=i, active=a, kernel_size=ks, stride=stride),
        input_signature=[tf.TensorSpec(None, tf.float32)] * 2 +
        [tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.bool)])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn(tf.ones(x_shape), tf.ones(w_shape), tf.constant(index, tf.int32),
         tf.ones([len(index)], tf.bool))

  def test_bad_attrs_rejected(self):
    with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
      population.population_conv2d_op(tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1]), [0],
                                       [True], kernel_size=0, stride=1)


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
    self.assertAllClose(got, population.population_matmul_reference(
        x, w16, index, active).numpy(), rtol=1e-4, atol=tol)
    self.assertAllClose(got, _numpy_reference(x, rounded.numpy(), index, active),
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
    ref = population.population_conv2d_reference(x, w16, index, active,
                                                 kernel_size=8, stride=4).numpy()
    self.assertAllClose(got, ref, rtol=1e-4, atol=2e-3)

  def test_bad_inputs_rejected(self):
    lib = population.load_library()
    w16 = tf.ones([2, 4, 3], tf.bfloat16)
    with self.assertRaises(tf.errors.InvalidArgumentError):
      lib.population_matmul(x=tf.ones([2, 1, 4]), w=w16, index=[0, 2],
                            active=[True, True])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      lib.population_matmul(x=tf.ones([2, 1, 5]), w=w16, index=[0, 1],
                            active=[True, True])
    with self.assertRaises((TypeError, tf.errors.InvalidArgumentError,
                            tf.errors.NotFoundError)):
      lib.population_matmul(x=tf.ones([2, 1, 4]), w=tf.ones([2, 4, 3], tf.float16),
                            index=[0, 1], active=[True, True])


if __name__ == "__main__":
  tf.test.main()
