"""BlockCirculantDense equals its to_dense() matrix, in value and gradient."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import layers as tl


class BlockCirculantDenseTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  @parameterized.named_parameters(
      ("even_divisible", 16, 32, 4),
      ("odd_divisible", 15, 9, 3),
      ("even_padded", 10, 13, 4),
      ("odd_padded", 11, 7, 5),
      ("block_1", 5, 6, 1),
      ("block_bigger_than_sizes", 3, 5, 8),
  )
  def test_matches_dense_forward_and_gradient(self, fan_in, units, b):
    for method in ("fft", "matmul"):
      self._check_matches_dense(fan_in, units, b, method)

  def _check_matches_dense(self, fan_in, units, b, method):
    layer = tl.BlockCirculantDense(units, b, method=method)
    x = tf.random.normal([6, fan_in], seed=1)
    layer(x)
    layer.bias.assign(tf.random.normal([units]))
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(x)
      y = layer(x)
      kernel = layer.to_dense()
      y_dense = x @ kernel + layer.bias
      loss = tf.reduce_sum(tf.sin(y))
      loss_dense = tf.reduce_sum(tf.sin(y_dense))
    self.assertEqual(kernel.shape, (fan_in, units))
    self.assertAllClose(y, y_dense, atol=1e-5)
    gv, gx = tape.gradient(loss, [layer.vectors, x])
    gv_d, gx_d = tape.gradient(loss_dense, [layer.vectors, x])
    self.assertAllClose(gv, gv_d, atol=1e-4)
    self.assertAllClose(gx, gx_d, atol=1e-4)

  def test_circulant_structure(self):
    layer = tl.BlockCirculantDense(4, 4, with_bias=False)
    layer(tf.zeros([1, 4]))
    layer.vectors.assign(tf.constant([[[1.0, 2.0, 3.0, 4.0]]]))
    # Column c of the (transposed) block is w rolled by c.
    expected = np.array([[1, 2, 3, 4], [4, 1, 2, 3], [3, 4, 1, 2], [2, 3, 4, 1]], np.float32)
    self.assertAllClose(layer.to_dense(), expected)

  @parameterized.named_parameters(("padded", 10, 13, 4), ("b64", 128, 70, 64))
  def test_to_dense_is_the_kernel_of_kernel_index(self, fan_in, units, b):
    # The reference: the kernel read out of the vectors entry by entry in NumPy.
    layer = tl.BlockCirculantDense(units, b, method="matmul")
    layer(tf.zeros([1, fan_in]))
    vectors = layer.vectors.numpy()
    expected = vectors.reshape(-1)[tl.circulant.kernel_index(fan_in, units, b)]
    self.assertAllEqual(layer.to_dense(), expected)

  @parameterized.parameters(4, 8, 16, 32, 64)
  def test_parameter_count(self, b):
    layer = tl.BlockCirculantDense(256, b)
    layer(tf.zeros([1, 128]))
    self.assertEqual(int(tf.size(layer.vectors)), 128 * 256 // b)
    n, stored, _ = layer.kernel_stats()
    self.assertEqual(n, 128 * 256)
    self.assertEqual(float(stored), 128 * 256 / b)

  def test_mixed_precision_input(self):
    layer = tl.BlockCirculantDense(8, 4)
    x = tf.random.normal([3, 12])
    y32 = layer(x)
    y16 = layer(tf.cast(x, tf.float16))
    self.assertEqual(y16.dtype, tf.float16)
    self.assertAllClose(y32, tf.cast(y16, tf.float32), atol=1e-2)

  def test_leading_dims(self):
    layer = tl.BlockCirculantDense(5, 2)
    y = layer(tf.ones([2, 3, 4]))
    self.assertEqual(y.shape, (2, 3, 5))

  def test_invalid_args(self):
    with self.assertRaisesRegex(ValueError, "block_size"):
      tl.BlockCirculantDense(4, 0)
    with self.assertRaisesRegex(ValueError, "units"):
      tl.BlockCirculantDense(-1, 4)
    with self.assertRaisesRegex(ValueError, "method"):
      tl.BlockCirculantDense(4, 4, method="dct")


if __name__ == "__main__":
  tf.test.main()
