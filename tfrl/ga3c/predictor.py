"""GA3C predictors: batch the waiting agents' states through one forward pass.

One call of `predict()` (a `tf.function`):

  requests = prediction_queue: everything waiting, at least 1, at most B
  logits = network(requests.obs)
  action ~ softmax(logits)
  response_queue[request.agent].enqueue_many(
      {slot, action, behaviour_log_prob: log softmax(logits)[action],
       version: the optimizer's step count}) for each agent

A Python thread per predictor only calls `predict` until stopped or until the
queues close. With `jit_compile=True` the forward pass (uint8 obs -> logits)
is one XLA-compiled function, compiled once per batch size it meets; the
queue ops and the sampling stay outside it (XLA cannot hold queue ops).
"""

import tensorflow as tf

from tfrl.ga3c.queues import dequeue_between


class Predictor(tf.Module):
  """Serves actions to agents from the shared network.

  Args:
    network: `net(obs) -> (logits, value)`.
    queues: tfrl.ga3c.queues.Queues.
    batch_size: most requests per forward pass (`prediction_batch_size`).
    counters: dict of int64 tf.Variables; `predictions` and
      `prediction_batches` are incremented here.
    version: int64 tf.Variable, the policy version (the optimizer's step);
      read before the forward pass, so that it never names a newer policy
      than the one that acted.
    jit_compile: XLA-compile the forward pass.
  """

  def __init__(self, network, queues, *, batch_size: int, counters, version,
               jit_compile: bool = False, name=None):
    super().__init__(name=name)
    self._network = network
    self._queues = queues
    self._batch_size = batch_size
    self._counters = counters
    self._version = version
    self.jit_compile = bool(jit_compile)
    # obs -> logits, the compute part of `predict` (XLA-compiled or not).
    self.forward = (tf.function(self._forward, jit_compile=True)
                    if self.jit_compile else self._forward)
    self.predict = tf.function(self._predict, input_signature=[])

  def _forward(self, obs):
    logits, _ = self._network(obs)
    return logits

  def _predict(self):
    queues = self._queues
    request = dequeue_between(queues.prediction, 1, self._batch_size)
    version = tf.identity(self._version.read_value())
    with tf.control_dependencies([version]):
      logits = self.forward(request["obs"])
    action = tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]
    log_prob = tf.gather(tf.nn.log_softmax(logits), action, axis=-1, batch_dims=1)
    response = {"slot": request["slot"], "action": action, "behaviour_log_prob": log_prob,
                "version": tf.fill(tf.shape(action), version)}
    num_agents = len(queues.responses)
    parts = {k: tf.dynamic_partition(v, request["agent"], num_agents)
             for k, v in response.items()}
    for i, q in enumerate(queues.responses):
      q.enqueue_many({k: v[i] for k, v in parts.items()})
    n = tf.cast(tf.shape(action)[0], tf.int64)
    self._counters["predictions"].assign_add(n)
    self._counters["prediction_batches"].assign_add(1)
    return n
