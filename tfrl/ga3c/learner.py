"""The A3C learner: n-step returns, the A3C loss and one training step.

Loss (Mnih et al. 2016, as in GA3C's reference code), per sample t:

  policy  = -log(max(pi(a_t|s_t), log_epsilon)) * stop_gradient(R_t - V(s_t))
  entropy = -sum_a pi(a|s_t) * log(max(pi(a|s_t), log_epsilon))
  value   = (R_t - V(s_t))^2
  loss    = policy - entropy_beta * entropy + value_coef * value

summed (GA3C) or averaged over the batch. The log-epsilon guard keeps the log
finite when policy lag has driven a sampled action's probability to ~0.
R_t is the n-step return bootstrapped from V(s_T); transitions that end an
episode are kept and cut the bootstrap (GA3C's reference code drops them).
The batched envs reset finished slots at once, so the observation after a
truncation (frame cap) is already the next episode's: truncation is treated
like termination (no bootstrap), which only matters for the rare capped
episode.

RigL regrowth (pruned layers with `needs_gradient`, i.e. `dst` with regrowth
by gradient magnitude) gets the dense gradients of those layers' kernels
from the training step (already computed for RMSProp, unclipped: clipping
scales all gradients alike and so keeps their ranking). Networks without such
layers get no gradients: their training step is the same graph as without RigL.

XLA: with `jit_compile=True` the loss, the gradients, their clipping and the
optimizer step are one XLA-compiled function (pure compute on the batch and
the variables); the pruning hook stays outside it. XLA compiles that function
once per batch shape it meets (a trainer takes between its minimum and
maximum number of segments).
"""

import dataclasses
from typing import Callable, Dict, Optional

import tensorflow as tf

from tfrl import layers as tl


def n_step_returns(rewards, dones, bootstrap_value, discount):
  """Discounted n-step returns of fixed-length segments.

  Args:
    rewards: float32 [B, T].
    dones: bool or float [B, T]; True where the transition ended an episode
      (the next observation then belongs to a new episode).
    bootstrap_value: float32 [B], V(s_T) of the observation after the segment.
    discount: gamma.

  Returns:
    float32 [B, T] with R_t = r_t + gamma * (1 - done_t) * R_{t+1},
    R_T = bootstrap_value.
  """
  rewards = tf.convert_to_tensor(rewards, tf.float32)
  not_done = 1.0 - tf.cast(dones, tf.float32)
  bootstrap_value = tf.convert_to_tensor(bootstrap_value, tf.float32)

  def step(next_return, elems):
    r, nd = elems
    return r + discount * nd * next_return

  returns = tf.scan(step, (tf.transpose(rewards), tf.transpose(not_done)),
                    initializer=bootstrap_value, reverse=True)
  return tf.transpose(returns)


def a3c_loss(logits, values, actions, returns, *, entropy_beta, log_epsilon,
             value_coef=0.5, reduction="sum"):
  """The A3C loss of a flat batch of samples.

  Args:
    logits: float32 [N, A].
    values: float32 [N].
    actions: int32 [N].
    returns: float32 [N] (targets; no gradient flows into them).
    entropy_beta: weight of the entropy bonus.
    log_epsilon: lower bound of probabilities inside logs.
    value_coef: weight of the squared value error (0.5 as in GA3C).
    reduction: "sum" (GA3C) or "mean" over the N samples.

  Returns:
    (loss scalar, dict of scalar metrics: policy_loss, value_loss, entropy,
    advantage).
  """
  returns = tf.stop_gradient(returns)
  probs = tf.nn.softmax(logits, axis=-1)
  log_probs = tf.math.log(tf.maximum(probs, log_epsilon))
  num_actions = tf.shape(logits)[-1]
  selected = tf.reduce_sum(
      probs * tf.one_hot(actions, num_actions, dtype=probs.dtype), axis=-1)
  log_selected = tf.math.log(tf.maximum(selected, log_epsilon))
  advantage = returns - values
  policy = -log_selected * tf.stop_gradient(advantage)
  entropy = -tf.reduce_sum(probs * log_probs, axis=-1)
  value = tf.square(advantage)
  reduce = tf.reduce_sum if reduction == "sum" else tf.reduce_mean
  policy_loss = reduce(policy)
  entropy_total = reduce(entropy)
  value_loss = reduce(value)
  loss = policy_loss - entropy_beta * entropy_total + value_coef * value_loss
  metrics = {
      "policy_loss": policy_loss,
      "value_loss": value_loss,
      "entropy": tf.reduce_mean(entropy),
      "advantage": tf.reduce_mean(advantage),
  }
  return loss, metrics


@dataclasses.dataclass
class LearnerConfig:
  discount: float = 0.99
  entropy_beta: float = 0.01
  log_epsilon: float = 1e-6
  value_coef: float = 0.5
  reward_clip: float = 1.0
  loss_reduction: str = "sum"
  grad_clip_norm: float = 0.0


class Learner(tf.Module):
  """Applies A3C updates from batches of segments to one shared network.

  `train(batch)` is meant to run inside a trainer's `tf.function`:

    batch = training_queue.dequeue_many(n)     # obs [n, T+1, ...], ...
    metrics = learner.train(batch)

  Args:
    network: `net(obs) -> (logits [N, A], value [N] or [N, 1])`, float32
      outputs (a bfloat16 network casts them, see `tfrl.precision`).
    optimizer: has `apply(grads, variables)` (tfrl.optimizers.RMSProp).
    config: LearnerConfig.
    after_update: called after every optimizer step as
      `after_update(network)`, or as `after_update(network, grads_and_vars)`
      with the (gradient, kernel) pairs of the network's RigL layers when it
      has any (`tfrl.layers.after_update` re-applies pruning masks and
      regrows RigL layers by gradient magnitude); or None.
    jit_compile: XLA-compile the loss, gradient and optimizer step (see the
      module docstring).
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
    """Loss of a batch: obs [B, T+1, ...], action/reward/done [B, T]."""
    cfg = self.config
    obs = batch["obs"]
    shape = tf.shape(obs)
    b, t1 = shape[0], shape[1]
    t = t1 - 1
    flat_obs = tf.reshape(obs, tf.concat([[b * t1], shape[2:]], axis=0))
    logits, values = self.network(flat_obs)
    values = tf.reshape(values, [b, t1])
    logits = tf.reshape(logits, [b, t1, -1])
    rewards = tf.cast(batch["reward"], tf.float32)
    if cfg.reward_clip > 0:
      rewards = tf.clip_by_value(rewards, -cfg.reward_clip, cfg.reward_clip)
    returns = n_step_returns(rewards, batch["done"],
                             tf.stop_gradient(values[:, -1]), cfg.discount)
    num_actions = tf.shape(logits)[-1]
    loss, metrics = a3c_loss(
        tf.reshape(logits[:, :-1], [b * t, num_actions]),
        tf.reshape(values[:, :-1], [-1]),
        tf.reshape(tf.cast(batch["action"], tf.int32), [-1]),
        tf.reshape(returns, [-1]),
        entropy_beta=cfg.entropy_beta, log_epsilon=cfg.log_epsilon,
        value_coef=cfg.value_coef, reduction=cfg.loss_reduction)
    metrics["loss"] = loss
    metrics["batch_samples"] = b * t
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

  def train(self, batch) -> Dict[str, tf.Tensor]:
    """One gradient step on `batch`, then the pruning hook; returns scalar metrics."""
    metrics, rigl_grads = self._update(batch)
    if self._after_update is not None:
      # Checked at trace time, after the forward pass has built the layers.
      rigl_kernels = self._rigl_kernels()
      if rigl_kernels:
        self._after_update(self.network, list(zip(rigl_grads, rigl_kernels)))
      else:
        self._after_update(self.network)
    return metrics
