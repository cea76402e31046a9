"""RMSProp and Adam: reference updates, tf.function, checkpoints."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import optimizers


class OptimizersTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_rmsprop_matches_reference(self):
    v = tf.Variable([1.0, -2.0])
    opt = optimizers.RMSProp(0.1, decay=0.9, epsilon=0.1)
    ms = np.ones(2)
    x = np.array([1.0, -2.0])
    for g in ([0.5, 1.0], [0.2, -0.3]):
      opt.apply([tf.constant(g)], [v])
      g = np.array(g)
      ms = 0.9 * ms + 0.1 * g * g
      x = x - 0.1 * g / np.sqrt(ms + 0.1)
    self.assertAllClose(v, x)

  def test_adam_matches_reference(self):
    v = tf.Variable([1.0, -2.0])
    opt = optimizers.Adam(0.01)
    m = u = np.zeros(2)
    x = np.array([1.0, -2.0])
    for t, g in enumerate(([0.5, 1.0], [0.2, -0.3]), start=1):
      opt.apply([tf.constant(g)], [v])
      g = np.array(g)
      m = 0.9 * m + 0.1 * g
      u = 0.999 * u + 0.001 * g * g
      x = x - 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(u) + 1e-8)
    self.assertAllClose(v, x)

  @parameterized.named_parameters(
      ("rmsprop", lambda lr: optimizers.RMSProp(lr)),
      ("rmsprop_centered_momentum", lambda lr: optimizers.RMSProp(lr, centered=True,
                                                                  momentum=0.9)),
      ("adam", lambda lr: optimizers.Adam(lr, clip_global_norm=1.0)),
  )
  def test_tf_function_variable_lr_and_checkpoint(self, make):
    lr = tf.Variable(0.05)
    opt = make(lr)
    v = tf.Variable([3.0, -1.0])
    w = tf.Variable(2.0)

    @tf.function
    def step():
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(v)) + 0.0 * w
      grads = tape.gradient(loss, [v, w])
      opt.apply([grads[0], None], [v, w])
      return loss

    first = float(step())
    for _ in range(20):
      last = float(step())
    self.assertLess(last, first)
    self.assertEqual(float(w), 2.0)
    path = tf.train.Checkpoint(opt=opt, v=v).save(self.get_temp_dir() + "/ck")
    opt2 = make(tf.Variable(0.0))
    v2 = tf.Variable([0.0, 0.0])
    tf.train.Checkpoint(opt=opt2, v=v2).restore(path)
    w2 = tf.Variable(0.0)
    opt2.build([v2, w2])  # slots created after restore() get restored.
    self.assertEqual(int(opt2.step), int(opt.step))
    self.assertAllClose(float(opt2.learning_rate), 0.05)
    self.assertAllClose(v2, v)
    # With restored slots one more step moves both alike; fresh slots (zero
    # moments, the step count restored) would move v2 elsewhere.
    grad = tf.constant([0.3, -0.7])
    opt.apply([grad, None], [v, w])
    opt2.apply([grad, None], [v2, w2])
    self.assertAllClose(v2, v)

  def test_validation(self):
    with self.assertRaisesRegex(ValueError, "learning_rate"):
      optimizers.Adam(-1.0)
    with self.assertRaisesRegex(ValueError, "decay"):
      optimizers.RMSProp(0.1, decay=1.0)
    opt = optimizers.Adam(0.1)
    with self.assertRaisesRegex(ValueError, "gradients"):
      opt.apply([None], [])
    opt.apply([tf.ones([1])], [tf.Variable([1.0])])
    with self.assertRaisesRegex(ValueError, "same variables"):
      opt.apply([tf.ones([1])], [tf.Variable([1.0])])


if __name__ == "__main__":
  tf.test.main()
