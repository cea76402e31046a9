"""A3C loss and n-step returns against hand-computed values."""

import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ga3c import learner as learner_lib


class NStepReturnsTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  def test_bootstrap_and_terminal_cut(self):
    # gamma = 0.5.
    # Row 0: done after t=1, so R1 = r1 = 0 and R0 = 1 + 0.5 * 0 = 1;
    #        R2 = 2 + 0.5 * V(s3) = 2 + 5 = 7.
    # Row 1: no done: R2 = 1 + 0.5*4 = 3, R1 = 1 + 1.5 = 2.5, R0 = 2.25.
    returns = learner_lib.n_step_returns(
        rewards=[[1.0, 0.0, 2.0], [1.0, 1.0, 1.0]],
        dones=[[False, True, False], [False, False, False]],
        bootstrap_value=[10.0, 4.0], discount=0.5)
    self.assertAllClose(returns, [[1.0, 0.0, 7.0], [2.25, 2.5, 3.0]])

  def test_terminal_reward_is_kept(self):
    # The reward of the transition that ends the episode counts in full.
    returns = learner_lib.n_step_returns(
        rewards=[[0.0, -1.0]], dones=[[False, True]], bootstrap_value=[100.0],
        discount=0.9)
    self.assertAllClose(returns, [[-0.9, -1.0]])

  @parameterized.parameters(1, 5, 20)
  def test_matches_loop(self, t_max):
    rng = np.random.RandomState(t_max)
    rewards = rng.randn(3, t_max).astype(np.float32)
    dones = rng.rand(3, t_max) < 0.2
    boot = rng.randn(3).astype(np.float32)
    expected = np.zeros_like(rewards)
    for b in range(3):
      acc = boot[b]
      for t in reversed(range(t_max)):
        acc = rewards[b, t] + 0.99 * (0.0 if dones[b, t] else acc)
        expected[b, t] = acc
    self.assertAllClose(
        learner_lib.n_step_returns(rewards, dones, boot, 0.99), expected)


class A3CLossTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  @parameterized.parameters("sum", "mean")
  def test_hand_computed(self, reduction):
    # Sample 0: probs (0.25, 0.75), action 1, V 0.5, R 1.5 -> advantage 1.
    # Sample 1: probs (0.5, 0.5), action 0, V 2.0, R 1.0 -> advantage -1.
    logits = tf.constant([[0.0, math.log(3.0)], [1.0, 1.0]])
    values = tf.constant([0.5, 2.0])
    actions = tf.constant([1, 0])
    returns = tf.constant([1.5, 1.0])
    loss, metrics = learner_lib.a3c_loss(
        logits, values, actions, returns, entropy_beta=0.1, log_epsilon=1e-6,
        value_coef=0.5, reduction=reduction)
    policy = [-math.log(0.75) * 1.0, -math.log(0.5) * -1.0]
    entropy = [-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), math.log(2.0)]
    value = [1.0, 1.0]
    red = sum if reduction == "sum" else (lambda x: sum(x) / 2)
    expected = red(policy) - 0.1 * red(entropy) + 0.5 * red(value)
    self.assertAllClose(loss, expected, atol=1e-6)
    self.assertAllClose(metrics["policy_loss"], red(policy), atol=1e-6)
    self.assertAllClose(metrics["value_loss"], red(value), atol=1e-6)
    self.assertAllClose(metrics["entropy"], sum(entropy) / 2, atol=1e-6)

  def test_log_epsilon_guard(self):
    # The chosen action has probability ~e^-100: the log is clipped at
    # log(1e-3) and the gradient stays finite.
    logits = tf.Variable([[0.0, -100.0]])
    with tf.GradientTape() as tape:
      loss, metrics = learner_lib.a3c_loss(
          logits, tf.constant([0.0]), tf.constant([1]), tf.constant([2.0]),
          entropy_beta=0.0, log_epsilon=1e-3, value_coef=0.0)
    self.assertAllClose(metrics["policy_loss"], -math.log(1e-3) * 2.0,
                        rtol=1e-5)
    grad = tape.gradient(loss, logits)
    self.assertTrue(np.all(np.isfinite(grad.numpy())))

  def test_policy_term_does_not_train_value(self):
    values = tf.Variable([0.3])
    with tf.GradientTape() as tape:
      loss, _ = learner_lib.a3c_loss(
          tf.constant([[0.2, 0.1]]), values, tf.constant([0]),
          tf.constant([1.0]), entropy_beta=0.01, log_epsilon=1e-6,
          value_coef=0.0)
    self.assertAllClose(tape.gradient(loss, values), [0.0])


class _ObsValueNet(tf.Module):
  """logits = 0, value = obs[:, 0] * w (w = 1)."""

  def __init__(self):
    super().__init__()
    self.w = tf.Variable(1.0)

  def __call__(self, obs):
    obs = tf.cast(obs, tf.float32)
    return tf.zeros([tf.shape(obs)[0], 2]), obs[:, 0] * self.w


class LearnerTest(tf.test.TestCase):
  test_session = None

  def test_segment_loss_clips_rewards_and_bootstraps_from_last_obs(self):
    net = _ObsValueNet()
    learner = learner_lib.Learner(
        net, optimizer=None,
        config=learner_lib.LearnerConfig(discount=0.5, entropy_beta=0.0,
                                         value_coef=1.0, reward_clip=1.0,
                                         loss_reduction="sum"))
    # One segment, T = 2: values V(s0)=0, V(s1)=0, V(s2)=8 (bootstrap).
    batch = {"obs": tf.constant([[[0.0], [0.0], [8.0]]]),
             "action": tf.constant([[0, 1]]),
             "reward": tf.constant([[5.0, -3.0]]),   # Clipped to 1, -1.
             "done": tf.constant([[False, False]])}
    _, metrics = learner.loss(batch)
    # R1 = -1 + 0.5*8 = 3, R0 = 1 + 0.5*3 = 2.5; value loss = 3^2 + 2.5^2.
    self.assertAllClose(metrics["value_loss"], 9.0 + 6.25)
    self.assertEqual(int(metrics["batch_samples"]), 2)

  def test_train_step_updates_weights(self):
    from tfrl import optimizers
    net = _ObsValueNet()
    learner = learner_lib.Learner(
        net, optimizers.RMSProp(0.1, epsilon=0.1),
        learner_lib.LearnerConfig(grad_clip_norm=1.0))
    batch = {"obs": tf.ones([2, 3, 1]), "action": tf.zeros([2, 2], tf.int32),
             "reward": tf.ones([2, 2]), "done": tf.zeros([2, 2], tf.bool)}
    metrics = tf.function(learner.train)(batch)
    self.assertNotAllClose(net.w, 1.0)
    self.assertGreater(float(metrics["grad_norm"]), 0.0)


if __name__ == "__main__":
  tf.test.main()
