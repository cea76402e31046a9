"""Inputs at the edges of what the population ops accept: empty tensors with
huge dimensions (valid: nothing may be sized by them), outputs whose size
would overflow int64 and a network whose last layer is not dense (refused
with InvalidArgument saying what is wrong)."""

import numpy as np
import tensorflow as tf

from tfrl.ops import population
from tfrl.ops import population_delta as delta

_NO_BIAS = tf.zeros([0, 0])


class EmptyAndHugeTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    self.lib = population.load_library()

  def test_empty_weights_of_a_huge_population(self):
    # w [2^40, 0, 3] is empty; the rows' networks are anywhere in [0, 2^40).
    y = self.lib.population_matmul(x=tf.zeros([2, 1, 0]), w=tf.zeros([2**40, 0, 3]),
                                   index=[5, 2**31 - 1], active=[True, True], bias=_NO_BIAS,
                                   epilogue="relu")
    self.assertAllEqual(y, np.zeros((2, 1, 3)))
    y = self.lib.population_conv2d(x=tf.zeros([1, 4, 4, 0]), w=tf.zeros([2**40, 0, 2]),
                                   index=[7], active=[True], bias=_NO_BIAS, kernel_size=2,
                                   stride=1)
    self.assertAllEqual(y, np.zeros((1, 3, 3, 2)))

  def test_output_too_large_is_refused(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "y would have shape"):
      self.lib.population_matmul(x=tf.zeros([1, 2**40, 0]), w=tf.zeros([1, 0, 2**40]),
                                 index=[0], active=[True], bias=_NO_BIAS)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "y would have shape"):
      self.lib.population_conv2d(x=tf.zeros([1, 2**31, 2**31, 0]), w=tf.zeros([1, 0, 2**40]),
                                 index=[0], active=[True], bias=_NO_BIAS, kernel_size=1,
                                 stride=1)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "does not fit in int64"):
      self.lib.population_conv2d(x=tf.zeros([0, 2**40, 2**40, 2**20]), w=tf.zeros([1, 0, 3]),
                                 index=tf.zeros([0], tf.int32), active=tf.zeros([0], tf.bool),
                                 bias=_NO_BIAS, kernel_size=2**31 - 1, stride=1)
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

  def test_delta_net_over_an_empty_observation(self):
    # obs [B, 2^20, 2^20, 0]: layer 0 sees no channels (its output is zero),
    # layer 1 still sees relu(bias 0) and gives logits from it.
    rng = np.random.default_rng(1)
    b, p = 3, 2
    w1 = rng.standard_normal((p, 3, 4)).astype(np.float32)
    bias0 = rng.standard_normal((p, 3)).astype(np.float32)
    bias1 = rng.standard_normal((p, 4)).astype(np.float32)
    index = np.array([1, 0, 1], np.int32)
    obs = tf.zeros([b, 2**20, 2**20, 0])
    state = [np.zeros((b, 1, 1, 3), np.float32), np.zeros((b, 1, 1, 4), np.float32)]
    for fresh in (np.ones(b, bool), np.array([False, True, False])):
      logits, state = delta.population_delta_net_op(
          obs, obs, state, [np.zeros((p, 0, 3), np.float32), w1], [bias0, bias1], index, fresh,
          kernel_sizes=[2**20, 1], strides=[2**20, 1], relus=[True])
      want = np.einsum("bc,bcn->bn", np.maximum(bias0[index], 0), w1[index]) + bias1[index]
      self.assertAllClose(logits, want, rtol=1e-5, atol=1e-5)
      self.assertAllEqual(state[0], np.zeros((b, 1, 1, 3)))

  def test_delta_net_last_layer_must_be_dense(self):
    obs = np.zeros((1, 4, 4, 1), np.uint8)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"last layer must be dense .* got 3x3 positions"):
      delta.population_delta_net_op(obs, obs, [np.zeros((1, 3, 3, 2), np.float32)],
                                    [np.zeros((1, 4, 2), np.float32)],
                                    [np.zeros((1, 2), np.float32)], [0], [True],
                                    kernel_sizes=[2], strides=[1], relus=[])


if __name__ == "__main__":
  tf.test.main()
