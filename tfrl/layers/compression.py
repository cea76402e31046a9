"""Compression reporting: per-layer and total ratios, stored params, bytes.

compression ratio = 1 - stored kernel parameters / dense kernel parameters
(GST's metric, in [0, 1); 0.9 means 90 % of the weights are not stored).
It counts kernels only (biases are reported in bytes but not in the ratio).
`CompressionTracker` averages the total ratio over all training iterations,
each recorded ratio weighted by the number of steps since the previous
record (GST reports this average, which favours compressing early).
"""

import tensorflow as tf

from tfrl.layers import factory


def compression_report(modules) -> dict:
  """Returns {"layers": {name: stats}, "total": stats} as Python numbers.

  stats = dense_params, stored_params, compression_ratio, bytes (compressed
  storage of the kernel plus 4 bytes per bias entry).
  """
  if isinstance(modules, tf.Module):
    modules = [modules]
  layers = {}
  total_dense = total_stored = total_bytes = 0.0
  for module in modules:
    for layer in factory.layers_of(module):
      if not layer.built:
        continue
      n, stored, nbytes = layer.kernel_stats()
      stored = float(stored)
      nbytes = float(nbytes)
      if getattr(layer, "with_bias", False) and getattr(layer, "bias", None) is not None:
        nbytes += 4.0 * float(layer.bias.shape.num_elements())
      name = getattr(layer, "plan_name", layer.name)
      while name in layers:
        name += "_"
      layers[name] = dict(dense_params=int(n), stored_params=int(round(stored)),
                          compression_ratio=1.0 - stored / max(n, 1), bytes=int(nbytes))
      total_dense += n
      total_stored += stored
      total_bytes += nbytes
  total = dict(dense_params=int(total_dense), stored_params=int(round(total_stored)),
               compression_ratio=1.0 - total_stored / max(total_dense, 1.0),
               bytes=int(total_bytes))
  return dict(layers=layers, total=total)


class CompressionTracker(tf.Module):
  """Step-weighted average of the total compression ratio (checkpointable)."""

  def __init__(self, name=None):
    super().__init__(name=name)
    self.weighted_sum = tf.Variable(0.0, dtype=tf.float64, trainable=False)
    self.last_step = tf.Variable(0, dtype=tf.int64, trainable=False)

  def record(self, step: int, modules) -> float:
    """Records the current ratio for the steps since the last record; returns it."""
    ratio = compression_report(modules)["total"]["compression_ratio"]
    steps = int(step) - int(self.last_step.numpy())
    if steps > 0:
      self.weighted_sum.assign_add(ratio * steps)
      self.last_step.assign(int(step))
    return ratio

  def average(self) -> float:
    steps = int(self.last_step.numpy())
    return float(self.weighted_sum.numpy()) / steps if steps else 0.0
