"""Compact serving form of compressed layers, for SavedModel export.

`pack(module)` converts every pruned layer of `module` in place to a
`PackedKernel` (a bitmask of n / 8 bytes plus the non-zero values) and drops
its dense kernel, mask and schedule state; circulant layers already store
only their vectors. The packed module computes the same outputs, with stock
TensorFlow ops only, so `tf.saved_model.save` of a packed policy is smaller
on disk by about the compression ratio and loads with `tf.saved_model.load`.
Pack a copy used only for export: a packed module can no longer train.
"""

import tensorflow as tf

from tfrl.layers import factory


def pack(module: tf.Module) -> tf.Module:
  for layer in factory.layers_of(module):
    if layer.built:
      layer.pack()
  return module


def copy_variables(source: tf.Module, target: tf.Module):
  """Assigns source's variables to target's (same structure, same order)."""
  src, dst = source.variables, target.variables
  if len(src) != len(dst):
    raise ValueError(f"copy_variables: {len(src)} source vs {len(dst)} target variables.")
  for s, d in zip(src, dst):
    if s.shape != d.shape:
      raise ValueError(f"copy_variables: shape mismatch {s.name} {s.shape} vs {d.name} {d.shape}.")
    d.assign(s)
