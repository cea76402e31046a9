"""GA3C's losses on flat batches of samples: A3C's, V-trace's and APPO's.

All three share one shape, per sample t:

  loss = policy_t - entropy_beta * entropy_t + value_coef * (target_t - V(x_t))^2

and differ in the policy term:

  a3c     -log(max(pi(a_t|x_t), log_epsilon)) * (R_t - V(x_t))     (Mnih et al. 2016)
  vtrace  -log pi(a_t|x_t) * A_t                                   (IMPALA, A_t from tfrl.ga3c.vtrace)
  appo    -min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t)   (PPO's clipped surrogate,
          ratio_t = pi(a_t|x_t) / mu(a_t|x_t), mu the behaviour     with V-trace targets: RLlib APPO)
          policy that acted)

and in their targets: a3c's are n-step returns, vtrace's and appo's V-trace's
v_t. The losses are summed (GA3C) or averaged over the samples.
"""

from typing import Dict, Tuple

import tensorflow as tf


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


def _reduce(reduction: str):
  if reduction not in ("sum", "mean"):
    raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}.")
  return tf.reduce_sum if reduction == "sum" else tf.reduce_mean


def _combine(policy, entropy, value, *, entropy_beta, value_coef, reduction, advantage):
  reduce = _reduce(reduction)
  policy_loss, entropy_total, value_loss = reduce(policy), reduce(entropy), reduce(value)
  loss = policy_loss - entropy_beta * entropy_total + value_coef * value_loss
  metrics = {"policy_loss": policy_loss, "value_loss": value_loss,
             "entropy": tf.reduce_mean(entropy), "advantage": tf.reduce_mean(advantage)}
  return loss, metrics


def a3c_loss(logits, values, actions, returns, *, entropy_beta, log_epsilon,
             value_coef=0.5, reduction="sum") -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
  """The A3C loss of a flat batch of samples.

  The log-epsilon guard keeps the log finite when policy lag has driven a
  sampled action's probability to ~0.

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
  selected = tf.reduce_sum(probs * tf.one_hot(actions, tf.shape(logits)[-1], dtype=probs.dtype),
                           axis=-1)
  log_selected = tf.math.log(tf.maximum(selected, log_epsilon))
  advantage = returns - values
  policy = -log_selected * tf.stop_gradient(advantage)
  entropy = -tf.reduce_sum(probs * log_probs, axis=-1)
  return _combine(policy, entropy, tf.square(advantage), entropy_beta=entropy_beta,
                  value_coef=value_coef, reduction=reduction, advantage=advantage)


def log_prob_and_entropy(logits, actions) -> Tuple[tf.Tensor, tf.Tensor]:
  """log pi(a|x) of the taken actions [N] and the policy's entropy [N]."""
  log_probs = tf.nn.log_softmax(logits, axis=-1)
  taken = tf.gather(log_probs, tf.cast(actions, tf.int32), axis=-1, batch_dims=1)
  entropy = -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)
  return taken, entropy


def vtrace_loss(logits, values, actions, vs, pg_advantages, *, entropy_beta, value_coef=0.5,
                reduction="mean") -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
  """IMPALA's loss: policy gradient with V-trace advantages, values regressed on v_t.

  Args:
    logits [N, A], values [N], actions [N]; vs, pg_advantages [N] from
    `tfrl.ga3c.vtrace.vtrace` (no gradient flows into them).
  """
  vs, pg_advantages = tf.stop_gradient(vs), tf.stop_gradient(pg_advantages)
  log_pi, entropy = log_prob_and_entropy(logits, actions)
  return _combine(-log_pi * pg_advantages, entropy, tf.square(vs - values),
                  entropy_beta=entropy_beta, value_coef=value_coef, reduction=reduction,
                  advantage=pg_advantages)


def appo_loss(logits, values, actions, anchor_log_probs, vs, advantages, *, clip,
              entropy_beta, value_coef=0.5,
              reduction="mean") -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
  """PPO's clipped surrogate around an anchor policy, values regressed on v_t.

  Outside [1 - clip, 1 + clip] on the side the advantage pushes towards, the
  surrogate is flat: such a sample gives no policy gradient.

  Args:
    logits [N, A], values [N], actions [N]; anchor_log_probs [N], log of the
    anchor policy's probability of each action: the behaviour policy mu that
    acted, or the learner's policy when the batch arrived (the lag then left
    to V-trace's weights in the advantages: "decoupled" PPO, Hilton et al.
    2021); vs, advantages [N] (no gradient flows into them); clip: epsilon of
    the clip range (> 0).
  """
  vs, advantages = tf.stop_gradient(vs), tf.stop_gradient(advantages)
  log_pi, entropy = log_prob_and_entropy(logits, actions)
  ratio = tf.exp(log_pi - tf.stop_gradient(anchor_log_probs))
  surrogate = tf.minimum(ratio * advantages,
                         tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip) * advantages)
  loss, metrics = _combine(-surrogate, entropy, tf.square(vs - values),
                           entropy_beta=entropy_beta, value_coef=value_coef,
                           reduction=reduction, advantage=advantages)
  metrics["clip_fraction"] = tf.reduce_mean(
      tf.cast(tf.abs(ratio - 1.0) > clip, tf.float32))
  return loss, metrics
