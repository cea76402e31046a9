"""Inputs at the edges of what the population ops accept: empty tensors with
huge dimensions (valid: nothing may be sized by them), outputs whose size
would overflow int64 and a network whose last layer is not dense (refused
with InvalidArgument saying what is wrong). The per-layer delta op's are in
delta_conv2d_cases.py."""

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
    # A 1x1 layer over an empty obs [1, 2^31, 2^31, 0] with N = 8: 2^65 outputs.
    big = tf.zeros([1, 2**31, 2**31, 0])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "acc would have shape"):
      self.lib.population_delta_net(
          obs=big, obs_prev=big, acc_prev=[tf.zeros([1, 1, 1, 8])], w=[tf.zeros([1, 0, 8])],
          bias=[tf.zeros([1, 8])], index=[0], fresh=[True], kernel_sizes=[1], strides=[1],
          relus=[], input_scale=1.0)

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
