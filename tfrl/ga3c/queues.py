"""GA3C's queues: bounded, typed `tf.queue.FIFOQueue`s built from TensorSpecs.

  prediction: agents -> predictors, one row per env slot waiting for an action:
              {agent int32, slot int32, obs}.
  responses:  predictors -> agent i (one queue per agent): {slot, action,
              behaviour_log_prob, version}: the log-probability of the action
              under the policy that chose it, and that policy's version (the
              optimizer's step count when the predictor read the weights).
  training:   agents -> trainers, one n-step segment per env slot:
              {obs [T+1, ...], action [T], reward [T], done [T],
               behaviour_log_prob [T], version [T]}.
  episodes:   agents -> stats, one row per finished episode: {score, length}.

Closing them (`close()`) stops every loop: a blocked dequeue raises
`tf.errors.OutOfRangeError`, a blocked enqueue `tf.errors.CancelledError`.
"""

from typing import Dict, List

import tensorflow as tf

QUEUE_CLOSED_ERRORS = (tf.errors.OutOfRangeError, tf.errors.CancelledError)


def make_queue(specs: Dict[str, tf.TensorSpec], capacity: int,
               name: str) -> tf.queue.FIFOQueue:
  """A FIFOQueue whose elements are dicts matching `specs` (no batch dim)."""
  if capacity < 1:
    raise ValueError(f"queue '{name}' needs capacity >= 1, got {capacity}.")
  keys = sorted(specs)
  return tf.queue.FIFOQueue(
      capacity,
      dtypes=[specs[k].dtype for k in keys],
      shapes=[specs[k].shape for k in keys],
      names=keys,
      name=name)


def dequeue_between(queue: tf.queue.FIFOQueue, minimum, maximum):
  """Dequeues everything waiting, at least `minimum` (blocking), at most `maximum`."""
  n = tf.clip_by_value(queue.size(), minimum, maximum)
  return queue.dequeue_many(n)


class Queues:
  """All queues of one GA3C run."""

  def __init__(self, *, obs_shape, obs_dtype, num_agents: int,
               envs_per_agent: int, t_max: int, prediction_capacity: int,
               training_capacity: int, episode_capacity: int = 100000):
    obs_shape = tf.TensorShape(obs_shape)
    self.prediction = make_queue(
        {"agent": tf.TensorSpec([], tf.int32),
         "slot": tf.TensorSpec([], tf.int32),
         "obs": tf.TensorSpec(obs_shape, obs_dtype)},
        max(prediction_capacity, envs_per_agent), "prediction_queue")
    self.responses: List[tf.queue.FIFOQueue] = [
        make_queue({"slot": tf.TensorSpec([], tf.int32),
                    "action": tf.TensorSpec([], tf.int32),
                    "behaviour_log_prob": tf.TensorSpec([], tf.float32),
                    "version": tf.TensorSpec([], tf.int64)},
                   envs_per_agent, f"response_queue_{i}")
        for i in range(num_agents)]
    self.training = make_queue(
        {"obs": tf.TensorSpec([t_max + 1] + obs_shape.as_list(), obs_dtype),
         "action": tf.TensorSpec([t_max], tf.int32),
         "reward": tf.TensorSpec([t_max], tf.float32),
         "done": tf.TensorSpec([t_max], tf.bool),
         "behaviour_log_prob": tf.TensorSpec([t_max], tf.float32),
         "version": tf.TensorSpec([t_max], tf.int64)},
        max(training_capacity, envs_per_agent), "training_queue")
    self.episodes = make_queue(
        {"score": tf.TensorSpec([], tf.float32),
         "length": tf.TensorSpec([], tf.int32)},
        episode_capacity, "episode_queue")

  def all(self) -> List[tf.queue.FIFOQueue]:
    return [self.prediction, self.training, self.episodes] + self.responses

  def close(self) -> None:
    """Closes every queue, cancelling blocked enqueues; wakes every loop."""
    for q in self.all():
      q.close(cancel_pending_enqueues=True)

  def drain_episodes(self):
    """Non-blocking: (scores, lengths) numpy arrays of finished episodes."""
    n = int(self.episodes.size())
    if n == 0:
      return [], []
    out = self.episodes.dequeue_many(n)
    return out["score"].numpy(), out["length"].numpy()
