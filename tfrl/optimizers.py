"""RMSProp and Adam as `tf.Module`s: checkpointable, usable in tf.function.

Slots are created once, on the first `apply` (eagerly, even inside a
tf.function), one per variable in the order of the `variables` argument,
which must be the same list on every call. `learning_rate` may be a float or
a `tf.Variable` (e.g. annealed by the learner); it is tracked for checkpoints.
"""

from typing import Optional, Sequence

import tensorflow as tf


class _Meta:
  """Untracked bookkeeping (kept out of checkpoints)."""
  refs = None


class _Optimizer(tf.Module):

  def __init__(self, learning_rate, clip_global_norm: Optional[float], name):
    super().__init__(name=name)
    if not isinstance(learning_rate, tf.Variable) and not float(learning_rate) > 0:
      raise ValueError(f"{type(self).__name__}: learning_rate must be > 0, got {learning_rate!r}.")
    if clip_global_norm is not None and not clip_global_norm > 0:
      raise ValueError(f"{type(self).__name__}: clip_global_norm must be > 0 or None.")
    self.learning_rate = learning_rate
    self.clip_global_norm = clip_global_norm
    self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    self._slots = None
    self._meta = _Meta()

  def _slot_names(self):
    raise NotImplementedError

  def _slot_init(self, name, var):
    return tf.zeros_like(var)

  def build(self, variables: Sequence[tf.Variable]):
    """Creates the slots now (else the first `apply` does); idempotent."""
    if self._slots is not None:
      return
    variables = list(variables)
    with tf.init_scope():
      slots = []
      for var in variables:
        slots.append({n: tf.Variable(self._slot_init(n, var), trainable=False,
                                     name=f"{var.name.split(':')[0]}/{n}".replace("/", "_"))
                      for n in self._slot_names()})
      self._slots = slots
      self._meta.refs = [v.ref() for v in variables]

  def apply(self, grads: Sequence, variables: Sequence[tf.Variable]):
    """Applies one update; `None` gradients leave their variable unchanged."""
    variables = list(variables)
    grads = list(grads)
    if len(grads) != len(variables):
      raise ValueError(f"apply: {len(grads)} gradients for {len(variables)} variables.")
    if self._slots is None:
      self.build(variables)
    elif [v.ref() for v in variables] != self._meta.refs:
      raise ValueError(f"{type(self).__name__}.apply must get the same variables on every call.")
    if self.clip_global_norm is not None:
      present = [g for g in grads if g is not None]
      clipped, _ = tf.clip_by_global_norm(present, self.clip_global_norm)
      it = iter(clipped)
      grads = [next(it) if g is not None else None for g in grads]
    step = self.step.assign_add(1)
    lr = tf.cast(tf.convert_to_tensor(self.learning_rate), tf.float32)
    for g, v, slots in zip(grads, variables, self._slots):
      if g is None:
        continue
      if isinstance(g, tf.IndexedSlices):
        g = tf.convert_to_tensor(g)
      self._update(tf.cast(g, v.dtype), v, slots, lr, step)

  def _update(self, g, v, slots, lr, step):
    raise NotImplementedError


class RMSProp(_Optimizer):
  """RMSProp as in TF1's RMSPropOptimizer (used by GA3C):

      ms  <- decay * ms + (1 - decay) * g^2          (ms starts at `initial_ms`)
      mg  <- decay * mg + (1 - decay) * g            (centered only)
      mom <- momentum * mom + lr * g / sqrt(ms - mg^2 + epsilon)
      v   <- v - mom

  Defaults are GA3C's (decay 0.99, epsilon 0.1, momentum 0); `initial_ms=1`
  matches TF1's RMSPropOptimizer, which GA3C used.
  """

  def __init__(self, learning_rate, decay=0.99, epsilon=0.1, centered=False, momentum=0.0,
               initial_ms=1.0, clip_global_norm=None, name="rmsprop"):
    super().__init__(learning_rate, clip_global_norm, name)
    if not 0.0 <= decay < 1.0:
      raise ValueError(f"RMSProp: decay must be in [0, 1), got {decay!r}.")
    if not epsilon > 0:
      raise ValueError(f"RMSProp: epsilon must be > 0, got {epsilon!r}.")
    if not 0.0 <= momentum < 1.0:
      raise ValueError(f"RMSProp: momentum must be in [0, 1), got {momentum!r}.")
    self.decay, self.epsilon, self.centered = float(decay), float(epsilon), bool(centered)
    self.momentum, self.initial_ms = float(momentum), float(initial_ms)

  def _slot_names(self):
    names = ["ms"] + (["mg"] if self.centered else [])
    return names + (["mom"] if self.momentum > 0 else [])

  def _slot_init(self, name, var):
    if name == "ms":
      return tf.fill(tf.shape(var), tf.cast(self.initial_ms, var.dtype))
    return tf.zeros_like(var)

  def _update(self, g, v, slots, lr, step):
    ms = slots["ms"].assign(self.decay * slots["ms"] + (1.0 - self.decay) * tf.square(g))
    denom = ms
    if self.centered:
      mg = slots["mg"].assign(self.decay * slots["mg"] + (1.0 - self.decay) * g)
      denom = ms - tf.square(mg)
    delta = tf.cast(lr, v.dtype) * g / tf.sqrt(denom + self.epsilon)
    if self.momentum > 0:
      delta = slots["mom"].assign(self.momentum * slots["mom"] + delta)
    v.assign_sub(delta)


class Adam(_Optimizer):
  """Adam (Kingma & Ba 2015) with bias correction:

      m <- b1 m + (1 - b1) g;  u <- b2 u + (1 - b2) g^2
      v <- v - lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(u) + epsilon)
  """

  def __init__(self, learning_rate=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8,
               clip_global_norm=None, name="adam"):
    super().__init__(learning_rate, clip_global_norm, name)
    for n, b in (("beta1", beta1), ("beta2", beta2)):
      if not 0.0 <= b < 1.0:
        raise ValueError(f"Adam: {n} must be in [0, 1), got {b!r}.")
    if not epsilon > 0:
      raise ValueError(f"Adam: epsilon must be > 0, got {epsilon!r}.")
    self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

  def _slot_names(self):
    return ["m", "u"]

  def _update(self, g, v, slots, lr, step):
    t = tf.cast(step, v.dtype)
    m = slots["m"].assign(self.beta1 * slots["m"] + (1.0 - self.beta1) * g)
    u = slots["u"].assign(self.beta2 * slots["u"] + (1.0 - self.beta2) * tf.square(g))
    scale = tf.cast(lr, v.dtype) * tf.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
    v.assign_sub(scale * m / (tf.sqrt(u) + self.epsilon))
