"""V-trace targets against n-step returns and against the paper's definition."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ga3c import losses
from tfrl.ga3c import vtrace


def _reference(log_mu, log_pi, rewards, discounts, values, bootstrap, clip_rho, clip_c,
               lambda_):
  """Eq. (1) of Espeholt et al. 2018 written as its sum of products, one
  segment at a time (not the recursion the module uses):

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i) (prod_{i=s}^{t-1} c_i) delta_t
  """
  b, t_len = rewards.shape
  rho = np.exp(log_pi - log_mu)
  rho_bar = np.minimum(clip_rho, rho)
  c = lambda_ * np.minimum(clip_c, rho)
  v_next = np.concatenate([values[:, 1:], bootstrap[:, None]], axis=1)
  delta = rho_bar * (rewards + discounts * v_next - values)
  vs = np.zeros_like(values)
  for row in range(b):
    for s in range(t_len):
      total, weight = 0.0, 1.0
      for t in range(s, t_len):
        total += weight * delta[row, t]
        weight *= discounts[row, t] * c[row, t]
      vs[row, s] = values[row, s] + total
  vs_next = np.concatenate([vs[:, 1:], bootstrap[:, None]], axis=1)
  adv = rho_bar * (rewards + discounts * vs_next - values)
  return vs, adv


class VTraceTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  def _random_case(self, seed, b=3, t=6):
    rng = np.random.RandomState(seed)
    f = lambda *s: rng.randn(*s).astype(np.float32)
    dones = rng.rand(b, t) < 0.2
    return dict(log_mu=f(b, t) * 0.5 - 1.0, log_pi=f(b, t) * 0.5 - 1.0, rewards=f(b, t),
                discounts=(0.9 * (1.0 - dones)).astype(np.float32), values=f(b, t),
                bootstrap=f(b), dones=dones)

  def test_on_policy_targets_are_n_step_returns(self):
    case = self._random_case(0)
    same = case["log_mu"]
    out = vtrace.vtrace(same, same, case["rewards"], case["discounts"], case["values"],
                        case["bootstrap"])
    returns = losses.n_step_returns(case["rewards"], case["dones"], case["bootstrap"], 0.9)
    self.assertAllClose(out.vs, returns, atol=1e-5)
    self.assertAllClose(out.pg_advantages, returns - case["values"], atol=1e-5)
    self.assertAllClose(out.rhos, np.ones_like(same))

  @parameterized.parameters((1.0, 1.0, 1.0), (1.0, 1.0, 0.95), (2.0, 0.5, 1.0),
                            (0.5, 1.0, 0.8))
  def test_matches_definition_with_clipped_weights(self, clip_rho, clip_c, lambda_):
    case = self._random_case(int(10 * clip_rho + 7 * clip_c + 100 * lambda_))
    # Make sure some weights are clipped at these levels, others not.
    rhos = np.exp(case["log_pi"] - case["log_mu"])
    self.assertTrue((rhos > min(clip_rho, clip_c)).any() and (rhos < clip_c).any())
    out = vtrace.vtrace(case["log_mu"], case["log_pi"], case["rewards"], case["discounts"],
                        case["values"], case["bootstrap"], clip_rho=clip_rho,
                        clip_pg_rho=clip_rho, clip_c=clip_c, lambda_=lambda_)
    vs, adv = _reference(case["log_mu"], case["log_pi"], case["rewards"], case["discounts"],
                         case["values"], case["bootstrap"], clip_rho, clip_c, lambda_)
    self.assertAllClose(out.vs, vs, atol=1e-5)
    self.assertAllClose(out.pg_advantages, adv, atol=1e-5)

  def test_hand_computed_two_steps(self):
    # One segment, gamma 1, no ends. V = (0, 0), bootstrap 10, rewards (1, 1).
    # rho_0 = 2 (clipped to 1 in delta, c_0 = min(1, 2) = 1), rho_1 = 0.5.
    # delta_1 = 0.5 * (1 + 10 - 0) = 5.5; v_1 = 5.5
    # delta_0 = 1 * (1 + 0 - 0) = 1;  v_0 = 1 + 1 * 1 * 5.5 = 6.5
    # A_0 = min(1, 2) * (1 + v_1 - 0) = 6.5; A_1 = 0.5 * (1 + 10 - 0) = 5.5
    log_mu = np.log([[0.25, 0.5]]).astype(np.float32)
    log_pi = np.log([[0.5, 0.25]]).astype(np.float32)
    out = vtrace.vtrace(log_mu, log_pi, [[1.0, 1.0]], [[1.0, 1.0]], [[0.0, 0.0]], [10.0])
    self.assertAllClose(out.vs, [[6.5, 5.5]])
    self.assertAllClose(out.pg_advantages, [[6.5, 5.5]])

  def test_no_gradient_through_targets(self):
    values = tf.Variable([[0.5, -0.5]])
    with tf.GradientTape() as tape:
      out = vtrace.vtrace([[0.0, 0.0]], [[0.0, 0.0]], [[1.0, 1.0]], [[0.9, 0.9]], values,
                          [1.0])
      total = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
    self.assertIsNone(tape.gradient(total, values))


class APPOLossTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  @parameterized.parameters((2.0, 1.0), (0.5, -1.0))
  def test_no_policy_gradient_outside_clip_range(self, ratio, advantage):
    # The ratio is past 1 + clip with a positive advantage (or below 1 - clip
    # with a negative one): the surrogate is flat there.
    logits = tf.Variable([[0.0, 0.0]])
    behaviour = tf.constant([np.log(0.5 / ratio)], tf.float32)
    with tf.GradientTape() as tape:
      loss, metrics = losses.appo_loss(logits, tf.constant([0.0]), tf.constant([0]), behaviour,
                                       tf.constant([0.0]), tf.constant([advantage]), clip=0.2,
                                       entropy_beta=0.0, value_coef=0.0)
    self.assertAllClose(tape.gradient(loss, logits), [[0.0, 0.0]])
    self.assertAllClose(metrics["clip_fraction"], 1.0)

  @parameterized.parameters((1.05, 1.0), (1.05, -1.0), (2.0, -1.0), (0.5, 1.0))
  def test_policy_gradient_inside_or_on_the_pessimistic_side(self, ratio, advantage):
    # Inside the range, or clipped on the side the advantage pushes away from,
    # the gradient is the unclipped one: -A * ratio * d log pi.
    logits = tf.Variable([[0.0, 0.0]])
    behaviour = tf.constant([np.log(0.5 / ratio)], tf.float32)
    with tf.GradientTape() as tape:
      loss, _ = losses.appo_loss(logits, tf.constant([0.0]), tf.constant([0]), behaviour,
                                 tf.constant([0.0]), tf.constant([advantage]), clip=0.2,
                                 entropy_beta=0.0, value_coef=0.0)
    # d log pi(a=0) / d logits = (1 - 0.5, -0.5).
    expected = -advantage * ratio * np.array([[0.5, -0.5]])
    self.assertAllClose(tape.gradient(loss, logits), expected, atol=1e-5)

  def test_vtrace_loss_value_and_policy_terms(self):
    # probs (0.25, 0.75), action 1, V 0.5, v_s 1.5, advantage 2.
    logits = tf.constant([[0.0, np.log(3.0)]], tf.float32)
    loss, metrics = losses.vtrace_loss(logits, tf.constant([0.5]), tf.constant([1]),
                                       tf.constant([1.5]), tf.constant([2.0]),
                                       entropy_beta=0.1, value_coef=0.5)
    entropy = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
    self.assertAllClose(metrics["policy_loss"], -np.log(0.75) * 2.0, atol=1e-6)
    self.assertAllClose(metrics["value_loss"], 1.0, atol=1e-6)
    self.assertAllClose(loss, -np.log(0.75) * 2.0 - 0.1 * entropy + 0.5, atol=1e-6)


if __name__ == "__main__":
  tf.test.main()
