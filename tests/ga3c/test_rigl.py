"""The GA3C trainer hands dense gradients to RigL layers: regrowth picks the
pruned weights with the largest gradient magnitude (scripted, deterministic)."""

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.envs import EnvProtocol
from tfrl.ga3c import network as network_lib
from tfrl.ga3c import system
from tfrl.ga3c.config import GA3CConfig, LearnerConfig
from tfrl.ga3c.learner import Learner
from tfrl.ga3c.queues import Queues
from tfrl.ga3c.trainer import Trainer

_OBS, _ACTIONS, _T, _SEGMENTS = 4, 3, 3, 4
# Pruned at build (step 0, by magnitude), then a drop / regrow step on every
# update; drop fraction ~0.5 at step 1 (cosine over 1000 steps).
_RIGL = dict(kind="pruned", schedule="dst", regrow="gradient", target_sparsity=0.5,
             drop_fraction=0.5, begin_step=0, end_step=1000, frequency=1)


def _trainer(rigl_layers, after_update=None):
  """A trainer over the network, optimizer and hook that a GA3C run builds."""
  tf.random.set_seed(0)
  plan = tl.LayerPlan(default=tl.LayerSpec(kind="dense"),
                      overrides=tuple((name, _RIGL) for name in rigl_layers))
  cfg = GA3CConfig(protocol=EnvProtocol(env="CartPole-v1"), t_max=_T, hidden_sizes=(8, 8),
                   layer_plan=plan, learner=LearnerConfig(grad_clip_norm=0.5),
                   learning_rate=0.01)
  network = network_lib.make_network(cfg, _ACTIONS, (_OBS,))
  network(tf.zeros([1, _OBS]))
  learner = Learner(network, system.make_optimizer(cfg), cfg.learner,
                    after_update=after_update or tl.after_update)
  queues = Queues(obs_shape=[_OBS], obs_dtype=tf.float32, num_agents=1,
                  envs_per_agent=_SEGMENTS, t_max=_T, prediction_capacity=_SEGMENTS,
                  training_capacity=_SEGMENTS)
  counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("train_steps", "train_samples")}
  trainer = Trainer(learner, queues, min_segments=_SEGMENTS, max_segments=_SEGMENTS,
                    counters=counters)
  return trainer, learner, queues


def _batch(seed):
  rng = np.random.default_rng(seed)
  return {"obs": rng.standard_normal((_SEGMENTS, _T + 1, _OBS)).astype(np.float32),
          "action": rng.integers(0, _ACTIONS, (_SEGMENTS, _T)).astype(np.int32),
          "reward": rng.uniform(-1, 1, (_SEGMENTS, _T)).astype(np.float32),
          "done": rng.uniform(size=(_SEGMENTS, _T)) < 0.2,
          "behaviour_log_prob": np.full((_SEGMENTS, _T), -np.log(_ACTIONS), np.float32),
          "version": np.zeros((_SEGMENTS, _T), np.int64)}


class GA3CRigLTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_trainer_regrows_largest_gradient(self):
    trainer, learner, queues = _trainer(["torso/dense_1"])
    layer = learner.network.torso.hidden[1]
    self.assertTrue(layer.needs_gradient)
    batch = _batch(0)
    queues.training.enqueue_many(batch)
    before = layer.mask.numpy()
    with tf.GradientTape() as tape:   # the dense gradient at the pre-update weights
      loss, _ = learner.loss({k: tf.constant(v) for k, v in batch.items()})
    scores = np.abs(tape.gradient(loss, layer.kernel).numpy())
    trainer.train()
    self.assertEqual(int(layer.step), 1)
    after = layer.mask.numpy()

    inactive = before < 0.5
    grown = inactive & (after > 0.5)
    self.assertEqual(int(after.sum()), int(before.sum()))   # constant sparsity
    k = int(grown.sum())
    # k = floor(drop fraction at step 1 (~0.5) * active count).
    self.assertEqual(k, int(np.floor(0.4999 * before.sum())))
    candidates = np.sort(scores[inactive])[::-1]
    kth = candidates[k - 1]
    self.assertGreater(kth, 0.0)
    self.assertGreater(kth - candidates[k], 1e-6)  # no near-tie at the cut
    self.assertTrue(np.all(scores[grown] >= kth))
    self.assertTrue(np.all(scores[inactive & ~grown] < kth))
    self.assertAllEqual(layer.kernel.numpy()[after < 0.5], np.zeros(int((after < 0.5).sum())))

  def test_plain_plans_get_no_gradients(self):
    for rigl_layers, num_args in (([], 0), (["torso/dense_0"], 1)):
      calls = []

      def record(network, *grads_and_vars, calls=calls):
        calls.append(grads_and_vars)
        tl.after_update(network, *grads_and_vars)

      trainer, learner, queues = _trainer(rigl_layers, after_update=record)
      queues.training.enqueue_many(_batch(1))
      trainer.train()
      self.assertNotEmpty(calls)   # one call per trace
      for args in calls:
        self.assertLen(args, num_args)
        if rigl_layers:
          (pairs,) = args
          self.assertEqual([v.ref() for _, v in pairs],
                           [learner.network.torso.hidden[0].kernel.ref()])
      if rigl_layers:
        self.assertEqual(int(learner.network.torso.hidden[0].step), 1)


if __name__ == "__main__":
  tf.test.main()
