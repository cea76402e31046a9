"""One network of a population layout as plain TensorFlow ops, for export.

The exported elite's policy: it computes what `PopulationNetwork` computes
for that network's row, with the kernels rounded as the population stores them.
"""

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution.population_net import ParamLayout, preprocess
from tfrl.ops import population as pop_ops


def round_kernel(kernel, weight_dtype: str) -> np.ndarray:
  """A float32 kernel as the network with `weight_dtype` kernels computes with it."""
  kernel = np.asarray(kernel, np.float32)
  if weight_dtype == "float32":
    return kernel
  return tf.cast(tf.cast(kernel, weight_dtype), tf.float32).numpy()



class SingleNetwork(tf.Module):
  """One network of a layout as plain TF ops (conv2d / matmul), for export.

  `__call__(obs)` returns the head's outputs (`tfrl.export`'s policy format).
  It computes what the population network computes: kernels rounded as stored,
  with `conv_input_dtype="bfloat16"` each convolution's input cast to bfloat16
  and back, observations normalized first by `layout.observation_filter`, if any.
  """

  def __init__(self, layout: ParamLayout, flat: np.ndarray, name=None):
    super().__init__(name=name)
    self.layout = layout
    make_filter = getattr(layout, "observation_filter", None)
    self.observation_filter = make_filter(flat) if make_filter else None
    expanded = layout.expand(np.asarray(flat, np.float32).reshape(1, -1))
    self.round_conv_inputs = layout.config.conv_input_dtype == "bfloat16"
    self.kernels, self.biases = [], []
    for layer, (kernel, bias) in zip(layout.layers, expanded):
      w = round_kernel(kernel[0], layout.config.weight_dtype)
      if layer.conv is not None:
        ks = layer.conv[0]
        w = w.reshape(ks, ks, layer.k // (ks * ks), layer.n)
      self.kernels.append(tf.Variable(w, trainable=False,
                                      name=layer.name.replace("/", "_") + "_kernel"))
      self.biases.append(tf.Variable(bias[0], trainable=False,
                                     name=layer.name.replace("/", "_") + "_bias"))

  def logits(self, obs):
    h = preprocess(obs)
    if self.observation_filter is not None:
      h = self.observation_filter(h)
    for layer, kernel, bias in zip(self.layout.layers, self.kernels, self.biases):
      if layer.conv is not None:
        if self.round_conv_inputs:
          h = pop_ops.round_to_bfloat16(h)
        h = tf.nn.conv2d(h, kernel, layer.conv[1], "VALID") + bias
      else:
        h = tf.matmul(tf.reshape(h, [-1, layer.k]), kernel) + bias
      if layer.relu:
        h = tf.tanh(h) if self.layout.config.activation == "tanh" else tf.nn.relu(h)
    return h

  def __call__(self, obs):
    return self.layout.head.policy_outputs(self.logits(obs))
