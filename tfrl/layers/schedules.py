"""Sparsity schedules and mask rules, as pure TensorFlow functions.

All functions work eagerly and inside `tf.function`. Masks are float32
tensors of the kernel's shape with 1 = kept, 0 = pruned.

* `polynomial_sparsity`: Zhu & Gupta (2017), "To prune, or not to prune":
  s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (t1 - t0)) ** power for
  t0 <= t <= t1, s_i before t0 and s_f after t1.
* `magnitude_mask`: keep the round((1 - s) * n) largest |w| (exact count).
* `nm_mask`: N:M structured sparsity (NVIDIA Ampere 2:4): in every group of
  M consecutive weights along the fan-in axis, keep the N largest |w|.
* `dst_update`: dynamic sparse training (SET, Mocanu et al. 2018; RigL, Evci
  et al. 2020): drop the `k` smallest-magnitude active weights and regrow `k`
  among the previously inactive ones, by random score (SET) or by gradient
  magnitude (RigL); `cosine_drop_fraction` decays the drop fraction.
"""

import math

import tensorflow as tf


def polynomial_sparsity(step, begin, end, initial, final, power=3.0):
  step = tf.cast(step, tf.float32)
  span = float(max(end - begin, 1))
  progress = tf.clip_by_value((step - float(begin)) / span, 0.0, 1.0)
  return final + (initial - final) * tf.pow(1.0 - progress, power)


def cosine_drop_fraction(step, begin, end, drop_fraction):
  step = tf.cast(step, tf.float32)
  span = float(max(end - begin, 1))
  progress = tf.clip_by_value((step - float(begin)) / span, 0.0, 1.0)
  return drop_fraction * 0.5 * (1.0 + tf.cos(math.pi * progress))


def _first_k(scores, k):
  """{0,1} float mask of the k largest entries of flat `scores` (ties broken
  by position). Static shapes only (XLA-friendly, `k` may be a tensor)."""
  order = tf.argsort(scores, direction="DESCENDING", stable=True)
  ranks = tf.math.invert_permutation(order)
  return tf.cast(ranks < k, tf.float32)


def magnitude_mask(weights, sparsity):
  """Mask keeping exactly round((1 - sparsity) * n) largest-magnitude weights."""
  flat = tf.reshape(tf.abs(weights), [-1])
  n = tf.size(flat)
  keep = tf.cast(tf.round((1.0 - tf.cast(sparsity, tf.float32)) * tf.cast(n, tf.float32)),
                 tf.int32)
  keep = tf.clip_by_value(keep, 0, n)
  return tf.reshape(_first_k(flat, keep), tf.shape(weights))


def nm_mask(weights, n, m):
  """N:M mask over groups of M consecutive fan-in weights of each output unit.

  The kernel is viewed as [fan_in, fan_out] (conv kernels [kh, kw, cin, cout]
  as [kh * kw * cin, cout]); fan_in is padded to a multiple of M with entries
  that are never kept when a group has at least N real weights.
  """
  shape = tf.shape(weights)
  out = weights.shape[-1]
  w2d = tf.reshape(tf.abs(weights), [-1, out])
  rows = w2d.shape[0]
  pad = (-rows) % m
  scores = tf.transpose(tf.pad(w2d, [[0, pad], [0, 0]], constant_values=-1.0))
  groups = tf.reshape(scores, [out, (rows + pad) // m, m])
  top = tf.math.top_k(groups, k=n, sorted=False).indices
  mask = tf.reduce_sum(tf.one_hot(top, m, dtype=tf.float32), axis=-2)
  mask = tf.reshape(mask, [out, rows + pad])[:, :rows]
  return tf.reshape(tf.transpose(mask), shape)


def dst_update(weights, mask, drop_fraction, regrow_scores):
  """One prune-and-regrow step at constant sparsity.

  Args:
    weights: kernel (pruned entries are zero).
    mask: current mask.
    drop_fraction: fraction of the active weights to drop (scalar tensor).
    regrow_scores: same shape as `weights`; larger = regrown first (random
      numbers for SET, |gradient| for RigL).
  Returns:
    The new mask, with the same number of ones as `mask`.
  """
  shape = tf.shape(weights)
  w = tf.reshape(tf.abs(weights), [-1])
  m = tf.reshape(mask, [-1])
  s = tf.reshape(tf.cast(regrow_scores, tf.float32), [-1])
  active = m > 0.5
  n_active = tf.reduce_sum(tf.cast(active, tf.int32))
  n_inactive = tf.size(m) - n_active
  k = tf.cast(tf.floor(tf.cast(drop_fraction, tf.float32) * tf.cast(n_active, tf.float32)),
              tf.int32)
  k = tf.minimum(k, n_inactive)
  inf = tf.constant(float("inf"))
  drop = _first_k(tf.where(active, -w, -inf), k)      # k smallest active weights.
  grow = _first_k(tf.where(active, -inf, s), k)       # k best-scored inactive ones.
  m = m - drop + grow
  return tf.reshape(m, shape)
