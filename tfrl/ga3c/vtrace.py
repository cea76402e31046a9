"""V-trace targets (Espeholt et al. 2018, IMPALA, arXiv 1802.01561, sec. 4.1).

The behaviour policy mu that acted may lag the learner's policy pi by a few
updates. V-trace corrects the n-step targets with truncated importance
weights rho_t = pi(a_t|x_t) / mu(a_t|x_t):

  delta_t = min(clip_rho, rho_t) * (r_t + gamma_t V(x_{t+1}) - V(x_t))
  c_t     = lambda * min(clip_c, rho_t)
  v_t     = V(x_t) + delta_t + gamma_t c_t (v_{t+1} - V(x_{t+1}))
  A_t     = min(clip_pg_rho, rho_t) * (r_t + gamma_t v_{t+1} - V(x_t))

with v_T = V(x_T) (the bootstrap value). gamma_t is 0 where the transition
ended an episode. With pi == mu, lambda = 1 and clips >= 1 the targets are
the n-step returns, and the advantages R_t - V(x_t): A3C's.

Everything here is a pure function of its inputs; no gradient flows through
the targets.
"""

from typing import NamedTuple

import tensorflow as tf


class VTrace(NamedTuple):
  vs: tf.Tensor              # [B, T] value targets
  pg_advantages: tf.Tensor   # [B, T] advantages for the policy gradient
  rhos: tf.Tensor            # [B, T] unclipped importance weights


def vtrace(behaviour_log_probs, target_log_probs, rewards, discounts, values,
           bootstrap_value, *, clip_rho=1.0, clip_pg_rho=1.0, clip_c=1.0,
           lambda_=1.0) -> VTrace:
  """V-trace targets of batch-major segments.

  Args:
    behaviour_log_probs: float32 [B, T], log mu(a_t|x_t) of the actions taken.
    target_log_probs: float32 [B, T], log pi(a_t|x_t) under the learner's policy.
    rewards: float32 [B, T].
    discounts: float32 [B, T], gamma * (1 - done_t).
    values: float32 [B, T], V(x_t).
    bootstrap_value: float32 [B], V(x_T).
    clip_rho, clip_pg_rho, clip_c: truncation levels (IMPALA: 1.0); None: no clip.
    lambda_: trace-cutting factor in [0, 1] (1: plain V-trace).

  Returns:
    VTrace(vs, pg_advantages, rhos), all with stopped gradients.
  """
  as_float = lambda x: tf.stop_gradient(tf.convert_to_tensor(x, tf.float32))
  log_rhos = as_float(target_log_probs) - as_float(behaviour_log_probs)
  rewards, discounts = as_float(rewards), as_float(discounts)
  values, bootstrap_value = as_float(values), as_float(bootstrap_value)
  rhos = tf.exp(log_rhos)
  clip = lambda x, c: x if c is None else tf.minimum(float(c), x)
  clipped_rhos = clip(rhos, clip_rho)
  cs = float(lambda_) * clip(rhos, clip_c)
  next_values = tf.concat([values[:, 1:], bootstrap_value[:, None]], axis=1)
  deltas = clipped_rhos * (rewards + discounts * next_values - values)

  def backward(acc, elems):
    delta, discount, c = elems
    return delta + discount * c * acc

  time_major = lambda x: tf.transpose(x)
  vs_minus_v = tf.scan(backward, (time_major(deltas), time_major(discounts), time_major(cs)),
                       initializer=tf.zeros_like(bootstrap_value), reverse=True)
  vs = tf.transpose(vs_minus_v) + values
  next_vs = tf.concat([vs[:, 1:], bootstrap_value[:, None]], axis=1)
  pg_advantages = clip(rhos, clip_pg_rho) * (rewards + discounts * next_vs - values)
  return VTrace(tf.stop_gradient(vs), tf.stop_gradient(pg_advantages), rhos)
