"""GA3C's learner: one training step on a batch of segments from the training queue.

    batch = training_queue.dequeue_many(n)   # obs [n, T+1, ...], action/reward/done,
                                             # behaviour_log_prob, version [n, T]
    metrics = learner.train(batch)

The loss is one of `tfrl.ga3c.config.LOSSES`:

  a3c     GA3C's (the paper's): n-step returns, one gradient step per batch.
  vtrace  IMPALA's: V-trace targets correct the lag between the predictor's
          policy that acted (its log-probabilities travel with every segment)
          and the learner's.
  appo    PPO's clipped surrogate on V-trace targets and advantages (RLlib's
          APPO), `epochs` passes over the batch in `minibatches` of whole
          segments each. The clip range is anchored at the learner's policy
          when the batch arrived (`appo_anchor=learner`: the first pass starts
          inside it, as synchronous PPO's does, and V-trace's weights carry
          the lag) or at the behaviour policy (`behaviour`: the lag already
          spends part of the range).

vtrace's and appo's targets and advantages are computed under the network
as it is at every gradient step (`vtrace_targets=step`, RLlib's APPO), or
once when the batch arrives and held fixed through its epochs
(`vtrace_targets=batch`, as PPO's GAE is computed once per rollout).

Every segment carries the policy version that acted (the optimizer's step
count when the predictor read the weights), so each step measures the policy
lag, the optimizer steps between acting and learning (`lag_mean`, `lag_max`).

Rewards are clipped to [-reward_clip, reward_clip]. The batched envs reset
finished slots at once, so the observation after a truncation (frame cap) is
already the next episode's: truncation is treated like termination (no
bootstrap), which only matters for the rare capped episode.

RigL regrowth (pruned layers with `needs_gradient`, i.e. `dst` with regrowth
by gradient magnitude) gets the dense gradients of those layers' kernels
from the training step (already computed for the optimizer, unclipped:
clipping scales all gradients alike and so keeps their ranking). Networks
without such layers get no gradients: their training step is the same graph
as without RigL.

XLA: with `jit_compile=True` the loss, the gradients, their clipping and the
optimizer step are one XLA-compiled function (pure compute on the batch and
the variables); the pruning hook stays outside it. XLA compiles that function
once per batch shape it meets.
"""

from typing import Callable, Dict, Optional

import tensorflow as tf

from tfrl import layers as tl
from tfrl.ga3c import losses
from tfrl.ga3c import vtrace as vtrace_lib
from tfrl.ga3c.config import LearnerConfig

# The names older code and tests import from here.
n_step_returns = losses.n_step_returns
a3c_loss = losses.a3c_loss


def _flat(x, b, t):
  return tf.reshape(x[:, :t], tf.concat([[b * t], tf.shape(x)[2:]], axis=0))


class Learner(tf.Module):
  """Applies updates from batches of segments to one shared network.

  Args:
    network: `net(obs) -> (logits [N, A], value [N] or [N, 1])`, float32
      outputs (a bfloat16 network casts them, see `tfrl.precision`).
    optimizer: has `apply(grads, variables)` and a `step` counter
      (tfrl.optimizers.RMSProp or Adam); its step is the policy version.
    config: LearnerConfig.
    after_update: called after every optimizer step as
      `after_update(network)`, or as `after_update(network, grads_and_vars)`
      with the (gradient, kernel) pairs of the network's RigL layers when it
      has any (`tfrl.layers.after_update` re-applies pruning masks and
      regrows RigL layers by gradient magnitude); or None.
    jit_compile: XLA-compile the loss, gradient and optimizer step.
  """

  def __init__(self, network, optimizer, config: LearnerConfig,
               after_update: Optional[Callable] = None, jit_compile: bool = False,
               name=None):
    super().__init__(name=name)
    self.network = network
    self.optimizer = optimizer
    self.config = config
    self._after_update = after_update
    self.jit_compile = bool(jit_compile)
    self._update = (tf.function(self._compute_update, jit_compile=True)
                    if self.jit_compile else self._compute_update)

  def loss(self, batch) -> (tf.Tensor, Dict[str, tf.Tensor]):
    """Loss of a batch: obs [B, T+1, ...], action/reward/done [B, T] (and, for
    vtrace / appo, behaviour_log_prob [B, T])."""
    cfg = self.config
    logits, values = self._forward(batch["obs"])
    b, t = tf.shape(values)[0], tf.shape(values)[1] - 1
    rewards = self._clipped_rewards(batch)
    bootstrap = tf.stop_gradient(values[:, -1])
    flat_logits, flat_values = _flat(logits, b, t), _flat(values, b, t)
    actions = tf.reshape(tf.cast(batch["action"], tf.int32), [-1])
    if cfg.loss == "a3c":
      returns = n_step_returns(rewards, batch["done"], bootstrap, cfg.discount)
      loss, metrics = losses.a3c_loss(
          flat_logits, flat_values, actions, tf.reshape(returns, [-1]),
          entropy_beta=cfg.entropy_beta, log_epsilon=cfg.log_epsilon,
          value_coef=cfg.value_coef, reduction=cfg.loss_reduction)
    else:
      loss, metrics = self._corrected_loss(batch, flat_logits, flat_values, actions,
                                           rewards, bootstrap, b, t)
    metrics["loss"] = loss
    metrics["batch_samples"] = b * t
    return loss, metrics

  def _trace(self, batch, logits, values, rewards, bootstrap, b, t):
    """V-trace of `batch` [B, T] under flat `logits` [B*T, A] and `values` [B*T]."""
    cfg = self.config
    behaviour = tf.reshape(tf.cast(batch["behaviour_log_prob"], tf.float32), [b, t])
    target, _ = losses.log_prob_and_entropy(logits, tf.reshape(batch["action"], [-1]))
    discounts = cfg.discount * (1.0 - tf.cast(batch["done"], tf.float32))
    return vtrace_lib.vtrace(
        behaviour, tf.reshape(target, [b, t]), rewards, discounts,
        tf.reshape(values, [b, t]), bootstrap, clip_rho=cfg.clip_rho,
        clip_pg_rho=cfg.clip_rho, clip_c=cfg.clip_c, lambda_=cfg.vtrace_lambda)

  def _clipped_rewards(self, batch):
    rewards = tf.cast(batch["reward"], tf.float32)
    clip = self.config.reward_clip
    return tf.clip_by_value(rewards, -clip, clip) if clip > 0 else rewards

  def _arrival(self, batch):
    """The batch under the network as it is when the batch arrives: the learner
    anchor's log-probabilities and, with `vtrace_targets=batch`, the V-trace
    targets and advantages held through the epochs (all [B, T], no gradient)."""
    cfg = self.config
    logits, values = self._forward(batch["obs"])
    b, t = tf.shape(values)[0], tf.shape(values)[1] - 1
    flat_logits = _flat(logits, b, t)
    log_pi, _ = losses.log_prob_and_entropy(flat_logits, tf.reshape(batch["action"], [-1]))
    fixed = {}
    if cfg.loss == "appo" and cfg.appo_anchor == "learner":
      fixed["anchor_log_prob"] = tf.reshape(log_pi, [b, t])
    if cfg.vtrace_targets == "batch":
      trace = self._trace(batch, flat_logits, _flat(values, b, t), self._clipped_rewards(batch),
                          values[:, -1], b, t)
      fixed.update(vs=trace.vs, pg_advantages=trace.pg_advantages, rhos=trace.rhos)
    return {k: tf.stop_gradient(v) for k, v in fixed.items()}

  def _corrected_loss(self, batch, logits, values, actions, rewards, bootstrap, b, t):
    """vtrace's or appo's loss, from V-trace targets under the current network
    (or those `_arrival` fixed for the batch)."""
    cfg = self.config
    behaviour = tf.reshape(tf.cast(batch["behaviour_log_prob"], tf.float32), [-1])
    if "vs" in batch:
      trace = vtrace_lib.VTrace(batch["vs"], batch["pg_advantages"], batch["rhos"])
    else:
      trace = self._trace(batch, logits, values, rewards, bootstrap, b, t)
    vs = tf.reshape(trace.vs, [-1])
    advantages = tf.reshape(trace.pg_advantages, [-1])
    if cfg.normalize_advantages:
      mean, variance = tf.nn.moments(advantages, axes=[0])
      advantages = (advantages - mean) / (tf.sqrt(variance) + 1e-8)
    common = dict(entropy_beta=cfg.entropy_beta, value_coef=cfg.value_coef,
                  reduction=cfg.loss_reduction)
    if cfg.loss == "vtrace":
      loss, metrics = losses.vtrace_loss(logits, values, actions, vs, advantages, **common)
    else:
      anchor = (tf.reshape(batch["anchor_log_prob"], [-1]) if "anchor_log_prob" in batch
                else behaviour)
      loss, metrics = losses.appo_loss(logits, values, actions, anchor, vs, advantages,
                                       clip=cfg.ppo_clip, **common)
    metrics["rho_mean"] = tf.reduce_mean(trace.rhos)
    return loss, metrics

  def _rigl_kernels(self):
    """The kernels of RigL layers, in `trainable_variables` order (call after
    the forward pass has built the layers); none without a hook."""
    if self._after_update is None:
      return []
    refs = {l.kernel.ref() for l in tl.layers_of(self.network) if l.needs_gradient}
    return [v for v in self.network.trainable_variables if v.ref() in refs]

  def _compute_update(self, batch):
    """Loss, gradients, clipping and the optimizer step; returns the metrics
    and the unclipped gradients of the RigL kernels."""
    variables = self.network.trainable_variables
    with tf.GradientTape() as tape:
      loss, metrics = self.loss(batch)
    grads = raw_grads = tape.gradient(loss, variables)
    grad_norm = tf.linalg.global_norm(grads)
    if self.config.grad_clip_norm > 0:
      grads, _ = tf.clip_by_global_norm(grads, self.config.grad_clip_norm,
                                        use_norm=grad_norm)
    self.optimizer.apply(grads, variables)
    metrics["grad_norm"] = grad_norm
    rigl = {v.ref() for v in self._rigl_kernels()}
    return metrics, [g for g, v in zip(raw_grads, variables) if v.ref() in rigl]

  def _step(self, batch) -> Dict[str, tf.Tensor]:
    """One gradient step on `batch`, then the pruning hook."""
    metrics, rigl_grads = self._update(batch)
    tl.after_apply(self.network)  # no ops unless a layer derives values from its variables
    if self._after_update is not None:
      # Checked at trace time, after the forward pass has built the layers.
      rigl_kernels = self._rigl_kernels()
      if rigl_kernels:
        self._after_update(self.network, list(zip(rigl_grads, rigl_kernels)))
      else:
        self._after_update(self.network)
    return metrics

  def _forward(self, obs):
    """The network over segments' observations [B, T, ...]: logits [B, T, A], values [B, T]."""
    shape = tf.shape(obs)
    logits, values = self.network(tf.reshape(obs, tf.concat([[shape[0] * shape[1]], shape[2:]], 0)))
    return tf.reshape(logits, [shape[0], shape[1], -1]), tf.reshape(values, shape[:2])

  def _lag(self, batch) -> Dict[str, tf.Tensor]:
    """Optimizer steps between the policy that acted and this update."""
    if "version" not in batch:
      return {}
    # Read after the batch has arrived (the dequeue blocks; nothing else orders the read).
    with tf.control_dependencies([batch["version"]]):
      step = tf.identity(self.optimizer.step.read_value())
    lag = tf.cast(step, tf.float32) - tf.cast(batch["version"], tf.float32)
    return {"lag_mean": tf.reduce_mean(lag), "lag_max": tf.reduce_max(lag)}

  def train(self, batch) -> Dict[str, tf.Tensor]:
    """`epochs` passes over `batch` in `minibatches` of whole segments, one
    gradient step each; returns the last step's metrics, the lag and the
    batch's sample count."""
    cfg = self.config
    lag = self._lag(batch)
    if cfg.loss != "a3c" and (cfg.vtrace_targets == "batch" or
                              (cfg.loss == "appo" and cfg.appo_anchor == "learner")):
      batch = dict(batch, **self._arrival(batch))
    if (cfg.epochs, cfg.minibatches) == (1, 1):
      metrics = self._step(batch)
    else:
      segments = tf.shape(batch["action"])[0]
      for _ in range(cfg.epochs):  # unrolled: a few passes, traced once
        order = tf.random.shuffle(tf.range(segments))
        for m in range(cfg.minibatches):
          part = order[m * segments // cfg.minibatches:(m + 1) * segments // cfg.minibatches]
          metrics = self._step({k: tf.gather(v, part) for k, v in batch.items()})
      metrics["batch_samples"] = segments * tf.shape(batch["action"])[1]
    metrics.update(lag)
    return metrics
