"""GA3C trainers: take segments off the training queue and apply gradients.

One call of `train()` (a `tf.function`):

  batch = training_queue: everything waiting, at least ceil(min_batch / T)
          segments (blocking), at most the cap
  metrics = learner.train(batch)     # A3C loss, gradients, RMSProp, then
                                     # the pruning hook (RigL layers get
                                     # their kernels' dense gradients)

The learner's `jit_compile` XLA-compiles its loss, gradient and optimizer
step; the dequeue stays outside (XLA cannot hold queue ops).

Waiting for at least `training_min_batch_size` samples bounds the number of
updates per sample, the knob GA3C uses against policy lag.
"""

import tensorflow as tf

from tfrl.ga3c.queues import dequeue_between


class Trainer(tf.Module):
  """Runs learner steps fed by the training queue.

  Args:
    learner: tfrl.ga3c.learner.Learner.
    queues: tfrl.ga3c.queues.Queues.
    min_segments, max_segments: segments per update.
    counters: dict of int64 tf.Variables; `train_steps` and `train_samples`
      are incremented here.
  """

  def __init__(self, learner, queues, *, min_segments: int, max_segments: int,
               counters, name=None):
    super().__init__(name=name)
    if not 1 <= min_segments <= max_segments:
      raise ValueError(
          f"need 1 <= min_segments <= max_segments, got {min_segments}, "
          f"{max_segments}.")
    self._learner = learner
    self._queues = queues
    self._min = min_segments
    self._max = max_segments
    self._counters = counters
    self.train = tf.function(self._train, input_signature=[])

  def _train(self):
    batch = dequeue_between(self._queues.training, self._min, self._max)
    metrics = self._learner.train(batch)
    self._counters["train_steps"].assign_add(1)
    self._counters["train_samples"].assign_add(
        tf.cast(metrics["batch_samples"], tf.int64))
    return metrics
