"""Builds the layer variant a `LayerSpec` asks for, and the post-step hook.

    layer = make_dense(256, spec, activation="relu", name="torso/dense_0")
    ...
    optimizer.apply(grads, variables)
    after_apply(network)    # refreshes values derived from the trained variables
    after_update(network)   # re-applies masks, advances pruning schedules

`name` may be a path (`actor/dense_1`): the module gets its last component
as tf.Module name and keeps the full path as `layer.plan_name` (used by
`compression_report`).
"""

import re

import tensorflow as tf

from tfrl.layers import base
from tfrl.layers import circulant
from tfrl.layers import dense
from tfrl.layers import gst
from tfrl.layers import pruned
from tfrl.layers import spec as spec_lib


def _module_name(name, default):
  if name is None:
    return default, None
  short = re.sub(r"[^A-Za-z0-9_.\-]", "_", name.split("/")[-1]) or default
  if not short[0].isalpha():
    short = "l_" + short
  return short, name


def _check_spec(spec):
  if not isinstance(spec, spec_lib.LayerSpec):
    raise ValueError(f"Expected a LayerSpec, got {type(spec).__name__}: {spec!r}.")


def make_dense(units: int, spec: spec_lib.LayerSpec = spec_lib.LayerSpec(), *,
               activation=None, name=None, with_bias=True, kernel_scale=1.0) -> base.Layer:
  """A dense-like layer: Dense, BlockCirculantDense, PrunedDense or GSTDense."""
  _check_spec(spec)
  short, plan_name = _module_name(name, "dense")
  kwargs = dict(activation=activation, with_bias=with_bias, kernel_scale=kernel_scale,
                name=short)
  if spec.kind == "dense":
    layer = dense.Dense(units, **kwargs)
  elif spec.kind == "circulant":
    layer = circulant.BlockCirculantDense(units, spec.block_size,
                                          method=spec.circulant_method, **kwargs)
  elif spec.kind == "pruned":
    layer = pruned.PrunedDense(units, spec, **kwargs)
  else:
    layer = gst.GSTDense(units, spec, **kwargs)
  layer.plan_name = plan_name or short
  return layer


def make_conv2d(filters: int, kernel_size, stride, spec: spec_lib.LayerSpec = spec_lib.LayerSpec(),
                *, activation=None, padding="VALID", name=None, with_bias=True) -> base.Layer:
  """A conv layer: Conv2D for `dense` and `circulant` (no circulant conv:
  documented fallback to plain conv), PrunedConv2D for `pruned`, and
  PrunedConv2D with the reward-aware schedule for `gst`."""
  _check_spec(spec)
  short, plan_name = _module_name(name, "conv")
  kwargs = dict(activation=activation, padding=padding, with_bias=with_bias, name=short)
  if spec.kind in ("dense", "circulant"):
    layer = dense.Conv2D(filters, kernel_size, stride, **kwargs)
  elif spec.kind == "pruned":
    layer = pruned.PrunedConv2D(filters, kernel_size, stride, spec, **kwargs)
  else:
    layer = pruned.PrunedConv2D(filters, kernel_size, stride,
                                spec.replace(kind="pruned", schedule="reward_aware"), **kwargs)
  layer.plan_name = plan_name or short
  return layer


def layers_of(module: tf.Module) -> list:
  """All tfrl layers in `module` (itself included), wrappers excluded."""
  mods = (module,) + tuple(module.submodules)
  return [m for m in mods if isinstance(m, base.Layer) and not getattr(m, "is_wrapper", False)]


def _modules(module):
  return module if isinstance(module, (list, tuple)) else [module]


def after_apply(module):
  """Call right after each optimizer step, before the next forward pass: layers
  whose forward reads a value derived from their trained variables refresh it
  (GST's dual-mode layer). Adds no ops for other layers.

  Args:
    module: a tf.Module (network) or a list of them: those the step trained.
  """
  for mod in _modules(module):
    for layer in layers_of(mod):
      if layer.has_apply_hook:
        layer.after_apply()


def after_update(module, grads_and_vars=None):
  """Call after every optimizer step: advances pruning schedules, re-applies
  masks. Adds no ops for layers without a hook (plain dense, circulant).

  Args:
    module: a tf.Module (network) or a list of them.
    grads_and_vars: optional (gradient, variable) pairs of the step, used by
      DST with `regrow="gradient"` (RigL).
  """
  pairs = list(grads_and_vars) if grads_and_vars is not None else None
  for mod in _modules(module):
    for layer in layers_of(mod):
      if layer.has_update_hook:
        layer.after_update(pairs)
