"""One TD3 update (`TD3Learner.update`) against a reference written here from
the paper's equations: target policy smoothing, clipped double Q, both
critics' Adam step, the delayed actor step on the updated critic, Polyak
targets; on a fixed batch with fixed smoothing noise. The bfloat16 update
against the same float32 reference, within bfloat16's rounding."""

import numpy as np
import tensorflow as tf

from tfrl import precision
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner

_B, _OBS, _LOW, _HIGH = 16, 3, -2.0, 2.0
_ADAM = dict(b1=0.9, b2=0.999, eps=1e-8)


def _weights(net):
  return [v.numpy() for layer in net.hidden + [net.out] for v in (layer.kernel, layer.bias)]


def _mlp(weights, x):
  *hidden, kernel, bias = weights
  for i in range(0, len(hidden), 2):
    x = tf.nn.relu(x @ hidden[i] + hidden[i + 1])
  return x @ kernel + bias


def _actor(weights, obs):
  return tf.tanh(_mlp(weights, obs)) * (_HIGH - _LOW) / 2 + (_HIGH + _LOW) / 2


def _critic(weights, obs, action):
  return _mlp(weights, tf.concat([obs, action], -1))[:, 0]


def _adam_first_step(weights, grads, lr):
  """Adam's first step (t = 1, zero moments), in numpy."""
  out = []
  for w, g in zip(weights, grads):
    m, u = (1 - _ADAM["b1"]) * g, (1 - _ADAM["b2"]) * g * g
    scale = lr * np.sqrt(1 - _ADAM["b2"]) / (1 - _ADAM["b1"])
    out.append(w - scale * m / (np.sqrt(u) + _ADAM["eps"]))
  return out


def _reference(config, nets, batch):
  """(critic loss, actor loss, the new online and target weights) of one update."""
  obs, action, reward, next_obs, discount, normal = (tf.constant(b) for b in batch)
  actor, q1, q2 = nets
  scale = (_HIGH - _LOW) / 2
  noise = tf.clip_by_value(normal * config.policy_noise, -config.noise_clip,
                           config.noise_clip) * scale
  next_action = tf.clip_by_value(_actor(actor, next_obs) + noise, _LOW, _HIGH)
  y = reward + config.discount * discount * tf.minimum(_critic(q1, next_obs, next_action),
                                                       _critic(q2, next_obs, next_action))
  critic_vars = [tf.Variable(w) for w in q1 + q2]
  with tf.GradientTape() as tape:
    half = len(q1)
    critic_loss = (tf.reduce_mean((_critic(critic_vars[:half], obs, action) - y) ** 2) +
                   tf.reduce_mean((_critic(critic_vars[half:], obs, action) - y) ** 2))
  grads = [g.numpy() for g in tape.gradient(critic_loss, critic_vars)]
  new_critics = _adam_first_step(q1 + q2, grads, config.critic_lr)
  new_q1, new_q2 = new_critics[:len(q1)], new_critics[len(q1):]
  actor_vars = [tf.Variable(w) for w in actor]
  with tf.GradientTape() as tape:
    actor_loss = -tf.reduce_mean(_critic(new_q1, obs, _actor(actor_vars, obs)))
  grads = [g.numpy() for g in tape.gradient(actor_loss, actor_vars)]
  new_actor = _adam_first_step(actor, grads, config.actor_lr)
  online = (new_actor, new_q1, new_q2)
  # Targets started equal to the online networks.
  targets = tuple([config.tau * n + (1 - config.tau) * o for n, o in zip(new, old)]
                  for new, old in zip(online, nets))
  return float(critic_loss), float(actor_loss), online, targets


def _batch(seed):
  rng = np.random.default_rng(seed)
  f = np.float32
  return (rng.standard_normal((1, _B, _OBS)).astype(f),
          rng.uniform(_LOW, _HIGH, (1, _B, 1)).astype(f),
          rng.standard_normal((1, _B)).astype(f),
          rng.standard_normal((1, _B, _OBS)).astype(f),
          (rng.uniform(size=(1, _B)) > 0.2).astype(f),   # some terminations
          (3 * rng.standard_normal((1, _B, 1))).astype(f))  # some beyond the clip


class LearnerTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _learner(self, policy_delay, compute="float32", hidden=(8, 8)):
    config = TD3Config(hidden_sizes=hidden, batch_size=_B, policy_delay=policy_delay,
                       precision=compute)
    return TD3Learner(config, _OBS, [_LOW], [_HIGH])

  def test_one_update_equals_the_reference(self):
    learner = self._learner(policy_delay=1)  # the actor steps at update 1
    nets = tuple(_weights(n) for n in learner.networks)
    batch = _batch(0)
    critic_loss, actor_loss, online, targets = _reference(learner.config, nets,
                                                          [b[0] for b in batch])
    metrics = learner.update(*batch)
    self.assertAllClose(metrics["critic_loss"], critic_loss, rtol=1e-5)
    self.assertAllClose(metrics["actor_loss"], actor_loss, rtol=1e-5)
    for net, expected in zip(learner.networks, online):
      for now, then in zip(_weights(net), expected):
        self.assertAllClose(now, then, rtol=1e-5, atol=1e-6)
    for net, expected in zip((learner.target_actor, learner.target_critic_1,
                              learner.target_critic_2), targets):
      for now, then in zip(_weights(net), expected):
        self.assertAllClose(now, then, rtol=1e-5, atol=1e-6)

  def test_the_actor_and_targets_wait_for_the_policy_delay(self):
    learner = self._learner(policy_delay=2)
    before = [_weights(n) for n in (learner.actor, learner.target_actor,
                                    learner.target_critic_1, learner.critic_1)]
    metrics = learner.update(*_batch(1))
    self.assertAllEqual(metrics["actor_loss"], 0.0)  # no actor step to average
    for net, weights in zip((learner.actor, learner.target_actor, learner.target_critic_1),
                            before):
      for now, then in zip(_weights(net), weights):
        self.assertAllEqual(now, then)
    self.assertNotAllClose(_weights(learner.critic_1)[0], before[3][0])

  def test_the_bfloat16_update_matches_float32_within_its_rounding(self):
    # bfloat16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%), so
    # the losses agree to about 1%. Adam's first step moves every weight by
    # about lr * sign(gradient): a weight whose gradient is within rounding
    # of 0 may step the other way (at most 2 lr off); the rest land within
    # 5% of lr of the float32 step.
    learner = self._learner(policy_delay=1, compute="bfloat16", hidden=(64, 64))
    self.assertEqual(precision.matmul_dtypes(learner.update.get_concrete_function()),
                     ["bfloat16"])
    nets = tuple(_weights(n) for n in learner.networks)
    critic_loss, actor_loss, online, _ = _reference(learner.config, nets,
                                                    [b[0] for b in _batch(2)])
    metrics = learner.update(*_batch(2))
    self.assertAllClose(metrics["critic_loss"], critic_loss, rtol=2e-2)
    self.assertAllClose(metrics["actor_loss"], actor_loss, rtol=2e-2)
    lr = learner.config.critic_lr
    off = []
    for net, expected in zip(learner.networks, online):
      for now, then in zip(_weights(net), expected):
        self.assertAllClose(now, then, rtol=0, atol=2.05 * lr)
        off.append(np.abs(now - then) > 0.05 * lr)
    self.assertLess(np.mean(np.concatenate([o.ravel() for o in off])), 0.05)


if __name__ == "__main__":
  tf.test.main()
