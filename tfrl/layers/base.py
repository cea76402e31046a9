"""Shared base of every tfrl layer: lazy build, activation, hooks.

Layers are Sonnet-style `tf.Module`s (no Keras): constructors validate their
arguments at once, variables are created once on the first call (eager or
inside a `tf.function`), and every layer reports its storage through
`kernel_stats()` so that `tfrl.layers.compression_report` can average the
compression ratio over training (GST's metric).
"""

from typing import Callable, Optional, Union

import tensorflow as tf

_ACTIVATIONS = {
    "relu": tf.nn.relu,
    "tanh": tf.nn.tanh,
    "sigmoid": tf.nn.sigmoid,
    "elu": tf.nn.elu,
    "softplus": tf.nn.softplus,
    "linear": None,
    "none": None,
}


def get_activation(activation: Union[None, str, Callable]) -> Optional[Callable]:
  """Maps None / a name (`relu`, `tanh`, ...) / a callable to a callable or None."""
  if activation is None or callable(activation):
    return activation
  if isinstance(activation, str) and activation.lower() in _ACTIVATIONS:
    return _ACTIVATIONS[activation.lower()]
  raise ValueError(
      f"Unknown activation {activation!r}; use a callable or one of {sorted(_ACTIVATIONS)}.")


def glorot_uniform(shape, fan_in: int, fan_out: int, dtype=tf.float32):
  """Glorot & Bengio (2010) uniform initialisation."""
  limit = (6.0 / float(fan_in + fan_out)) ** 0.5
  return tf.random.uniform(shape, -limit, limit, dtype=dtype)


def check_positive_int(name: str, value, cls: str):
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError(f"{cls}: {name} must be a positive int, got {value!r}.")


class Layer(tf.Module):
  """Base class: subclasses implement `_build(input_shape)` and `_forward(x)`.

  `after_update(grads_and_vars=None)` is called by `tfrl.layers.after_update`
  after each optimizer step; layers that need no hook leave
  `has_update_hook = False` so that the walk adds no ops for them. Layers
  whose hook uses the step's gradients (RigL regrowth) set
  `needs_gradient = True`, so a trainer can hand them over only then.
  Layers whose forward reads a value derived from their trained variables set
  `has_apply_hook = True` and refresh it in `after_apply`, which trainers call
  (`tfrl.layers.after_apply`) right after each optimizer step.
  """

  has_update_hook = False
  has_apply_hook = False
  needs_gradient = False

  def __init__(self, activation=None, name=None):
    super().__init__(name=name)
    self._activation = get_activation(activation)
    self._built = False

  @property
  def built(self) -> bool:
    return self._built

  def _build(self, input_shape: tf.TensorShape):
    raise NotImplementedError

  def _forward(self, x: tf.Tensor) -> tf.Tensor:
    raise NotImplementedError

  def __call__(self, x):
    x = tf.convert_to_tensor(x)
    if not self._built:
      # Built eagerly even when first called inside a tf.function, so that
      # build-time work (initial masks) runs once, not on every call.
      with tf.init_scope(), self.name_scope:
        self._build(x.shape)
      self._built = True
    with self.name_scope:
      y = self._forward(x)
      if self._activation is not None:
        y = self._activation(y)
    return y

  def after_apply(self):
    """Called by `tfrl.layers.after_apply` right after each optimizer step that
    moved the layer's variables, before any other forward pass uses them (for a
    layer whose forward reads a value derived from its trained variables)."""

  def after_update(self, grads_and_vars=None):
    """Post-optimizer-step hook.

    Args:
      grads_and_vars: None or (gradient, variable) pairs of the step; a
        gradient may also be a zero-argument callable returning it, which a
        layer calls only when it needs the gradient (so a trainer can defer
        an extra backward pass to the rare steps that use it).
    """
    del grads_and_vars

  def kernel_stats(self):
    """Returns (dense_params: int, stored_params: scalar tensor, stored_bytes: tensor).

    `dense_params` is the size of the equivalent dense kernel; `stored_params`
    the number of weights actually kept (non-zeros, circulant vectors);
    `stored_bytes` the kernel's size in the compressed export format.
    """
    raise NotImplementedError

  def pack(self):
    """Converts the layer in place to its compact serving form (see export.py)."""
