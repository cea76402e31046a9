"""TD3 hands dense gradients to RigL layers: regrowth picks the pruned weights
with the largest gradient magnitude (scripted, deterministic)."""

from unittest import mock

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner

_B, _OBS = 16, 3
# Pruned at build (step 0, by magnitude), then a drop / regrow step on every
# update; drop fraction ~0.5 at step 1 (cosine over 1000 steps).
_RIGL = dict(kind="pruned", schedule="dst", regrow="gradient", target_sparsity=0.5,
             drop_fraction=0.5, begin_step=0, end_step=1000, frequency=1)


def _learner(rigl_layers, policy_delay=2):
  # policy_noise 0: the critic target (hence its gradient) is deterministic.
  config = TD3Config(hidden_sizes=(8, 8), batch_size=_B, policy_delay=policy_delay,
                     policy_noise=0.0)
  plan = tl.LayerPlan(default=tl.LayerSpec(kind="dense"),
                      overrides=tuple((name, _RIGL) for name in rigl_layers))
  return TD3Learner(config, _OBS, [-1.0], [1.0], plan)


def _batch(seed):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal((1, _B, _OBS)).astype(np.float32),
          rng.uniform(-1, 1, (1, _B, 1)).astype(np.float32),
          rng.standard_normal((1, _B)).astype(np.float32),
          rng.standard_normal((1, _B, _OBS)).astype(np.float32),
          np.ones((1, _B), np.float32),
          rng.standard_normal((1, _B, 1)).astype(np.float32))  # x policy_noise 0


def _critic_gradient(learner, batch, layer):
  """Dense gradient of the TD3 critic loss w.r.t. `layer.kernel` (policy_noise 0)."""
  obs, action, reward, next_obs, discount, _ = (tf.constant(b[0]) for b in batch)
  next_action = tf.clip_by_value(learner.target_actor(next_obs), -1.0, 1.0)
  target_q = tf.minimum(learner.target_critic_1(next_obs, next_action),
                        learner.target_critic_2(next_obs, next_action))
  y = reward + learner.config.discount * discount * target_q
  with tf.GradientTape() as tape:
    loss = (tf.reduce_mean(tf.square(learner.critic_1(obs, action) - y)) +
            tf.reduce_mean(tf.square(learner.critic_2(obs, action) - y)))
  return tape.gradient(loss, layer.kernel).numpy()


def _actor_gradient(learner, batch, layer):
  obs = tf.constant(batch[0][0])
  with tf.GradientTape() as tape:
    loss = -tf.reduce_mean(learner.critic_1(obs, learner.actor(obs)))
  return tape.gradient(loss, layer.kernel).numpy()


class TD3RigLTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _check_regrowth(self, before, after, scores):
    """The newly kept weights are the top-|grown| inactive ones by score."""
    inactive = before < 0.5
    grown = inactive & (after > 0.5)
    self.assertEqual(int(after.sum()), int(before.sum()))   # constant sparsity
    k = int(grown.sum())
    # k = floor(drop fraction at step 1 (~0.5) * active count).
    self.assertEqual(k, int(np.floor(0.4999 * before.sum())))
    candidates = np.sort(np.abs(scores[inactive]))[::-1]
    kth = candidates[k - 1]
    self.assertGreater(kth, 0.0)
    self.assertGreater(candidates[k - 1] - candidates[k], 1e-6)  # no near-tie at the cut
    self.assertTrue(np.all(np.abs(scores[grown]) >= kth))
    self.assertTrue(np.all(np.abs(scores[inactive & ~grown]) < kth))

  def test_critic_regrows_largest_gradient(self):
    learner = _learner(["critic_1/dense_1"])
    layer = learner.critic_1.hidden[1]
    self.assertTrue(layer.needs_gradient)
    batch = _batch(0)
    before = layer.mask.numpy()
    scores = _critic_gradient(learner, batch, layer)   # at the pre-update weights
    learner.update(*batch)
    self.assertEqual(int(layer.step), 1)
    self._check_regrowth(before, layer.mask.numpy(), scores)

  def test_actor_regrows_largest_gradient_between_actor_steps(self):
    learner = _learner(["actor/dense_1"], policy_delay=2)
    layer = learner.actor.hidden[1]
    batch = _batch(1)
    before_mask = layer.mask.numpy()
    before_kernel = layer.kernel.numpy()
    learner.update(*batch)   # update 1: critic step only, then the regrowth.
    after = layer.mask.numpy()
    # The hook computed the actor gradient after the critic step, with the
    # actor as it was (no actor step at update 1): recompute it so.
    layer.mask.assign(before_mask)
    layer.kernel.assign(before_kernel)
    scores = _actor_gradient(learner, batch, layer)
    self._check_regrowth(before_mask, after, scores)

  def test_plain_plans_get_no_gradients(self):
    original = tl.after_update
    for rigl_layers in ([], ["critic_2/dense_0"]):
      calls = []  # the gradient pairs of each after_update call the trace makes

      def record(networks, *pairs, calls=calls):
        calls.append(pairs[0] if pairs else None)
        return original(networks, *pairs)

      with mock.patch.object(tl, "after_update", record):
        learner = _learner(rigl_layers)
        learner.update(*_batch(2))
      if not rigl_layers:
        self.assertEqual(calls, [None])
        continue
      actor_pairs, critic_pairs = calls
      self.assertIsNone(actor_pairs)  # no RigL layer in the actor: no extra backward pass
      self.assertIn(learner.critic_2.hidden[0].kernel.ref(), [v.ref() for _, v in critic_pairs])
      self.assertEqual(int(learner.critic_2.hidden[0].step), 1)


if __name__ == "__main__":
  tf.test.main()
