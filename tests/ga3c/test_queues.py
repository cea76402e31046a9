"""GA3C queues close cleanly: blocked loops wake up, no thread is left hanging."""

import os
import sys
import threading
import time

import tensorflow as tf

from tfrl.envs import EnvProtocol, GymEnv
from tfrl.ga3c import GA3CConfig, LearnerConfig
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import QUEUE_CLOSED_ERRORS, Queues
from tfrl.ga3c.trainer import Trainer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
from tests.ga3c import runs  # pylint: disable=g-import-not-at-top


def _call_in_thread(fn):
  """Runs fn() in a thread; returns (thread, result dict with 'error')."""
  result = {}

  def run():
    try:
      fn()
      result["error"] = None
    except QUEUE_CLOSED_ERRORS as e:
      result["error"] = e

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  return thread, result


class _Net(tf.Module):

  def __init__(self):
    super().__init__()
    self.w = tf.Variable(tf.zeros([4, 3]))

  def __call__(self, obs):
    logits = tf.matmul(tf.cast(obs, tf.float32), self.w)
    return logits[:, :2], logits[:, 2]


class _CountingLearner:

  def train(self, batch):
    return {"batch_samples": tf.size(batch["reward"])}


class QueuesTest(tf.test.TestCase):
  test_session = None

  def _queues(self):
    return Queues(obs_shape=[4], obs_dtype=tf.float32, num_agents=2,
                  envs_per_agent=1, t_max=3, prediction_capacity=4,
                  training_capacity=2)

  def test_close_wakes_blocked_predictor_and_trainer(self):
    queues = self._queues()
    counters = {k: tf.Variable(0, dtype=tf.int64) for k in (
        "predictions", "prediction_batches", "train_steps", "train_samples")}
    predictor = Predictor(_Net(), queues, batch_size=4, counters=counters,
                          version=tf.Variable(0, dtype=tf.int64))
    trainer = Trainer(learner=_CountingLearner(), queues=queues, min_segments=1,
                      max_segments=2, counters=counters)
    # Both block on empty queues.
    p_thread, p_result = _call_in_thread(predictor.predict)
    t_thread, t_result = _call_in_thread(trainer.train)
    time.sleep(1.0)
    self.assertTrue(p_thread.is_alive() and t_thread.is_alive())
    queues.close()
    p_thread.join(10)
    t_thread.join(10)
    self.assertFalse(p_thread.is_alive())
    self.assertFalse(t_thread.is_alive())
    self.assertIsInstance(p_result["error"], tf.errors.OutOfRangeError)
    self.assertIsInstance(t_result["error"], tf.errors.OutOfRangeError)

  def test_close_wakes_blocked_enqueue(self):
    queues = self._queues()
    segment = {"obs": tf.zeros([1, 4, 4]), "action": tf.zeros([1, 3], tf.int32),
               "reward": tf.zeros([1, 3]), "done": tf.zeros([1, 3], tf.bool),
               "behaviour_log_prob": tf.zeros([1, 3]), "version": tf.zeros([1, 3], tf.int64)}

    @tf.function
    def enqueue():
      queues.training.enqueue_many(segment)

    enqueue()
    enqueue()  # Full now (capacity 2).
    thread, result = _call_in_thread(enqueue)
    time.sleep(0.5)
    self.assertTrue(thread.is_alive())
    queues.close()
    thread.join(10)
    self.assertFalse(thread.is_alive())
    self.assertIsInstance(result["error"], tf.errors.CancelledError)

  def test_drain_episodes(self):
    queues = self._queues()
    self.assertEqual(len(queues.drain_episodes()[0]), 0)
    queues.episodes.enqueue_many({"score": [1.0, 2.0], "length": [3, 4]})
    scores, lengths = queues.drain_episodes()
    self.assertAllEqual(scores, [1.0, 2.0])
    self.assertAllEqual(lengths, [3, 4])


class SystemShutdownTest(tf.test.TestCase):
  test_session = None

  def test_stop_while_running_joins_every_thread(self):
    config = GA3CConfig(
        protocol=EnvProtocol(env="CartPole-v1"), agents=3, max_agents=4, predictors=2,
        trainers=2, logdir=self.get_temp_dir(), checkpoint_every=0,
        stats_every=0.5, training_min_batch_size=20,
        learner=LearnerConfig(loss_reduction="mean"), learning_rate=1e-3,
        rmsprop_epsilon=1e-5)
    run = runs.Background(config)
    system = run.start()
    deadline = time.time() + 60
    while system.counter_values()["train_steps"] < 20 and time.time() < deadline:
      time.sleep(0.1)
    self.assertGreaterEqual(system.counter_values()["train_steps"], 20)
    summary = run.stop(timeout=30)
    alive = [t.name for t in threading.enumerate()
             if t.name.startswith(("agent_", "predictor_", "trainer_"))]
    self.assertEqual(alive, [])
    self.assertIn("checkpoint", summary)

  def test_dynamic_adjustment_changes_worker_counts(self):
    config = GA3CConfig(
        protocol=EnvProtocol(env="CartPole-v1"), agents=2, max_agents=4, predictors=1,
        trainers=1, max_predictors=2, max_trainers=2, dynamic_adjustment=True,
        adjustment_period=0.3, logdir=self.get_temp_dir(),
        checkpoint_every=0, stats_every=100)
    seen = []

    def spy_on(system):
      orig = system.set_worker_count

      def spy(kind, n):
        seen.append((kind, n))
        orig(kind, n)

      system.set_worker_count = spy

    run = runs.Background(config, prepare=spy_on)
    run.start()
    deadline = time.time() + 90
    # Three initial calls, then three per adjustment period.
    while len(seen) < 12 and time.time() < deadline:
      time.sleep(0.1)
    summary = run.stop(timeout=30)
    self.assertGreaterEqual(len(seen), 12)
    self.assertGreater(len(set(seen)), 3)  # Some count other than the start.
    self.assertGreater(summary["train_steps"], 0)


if __name__ == "__main__":
  tf.test.main()
