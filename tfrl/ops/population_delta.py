"""Incremental (delta) inference of population layers, step after step.

`population_delta_conv2d(x, x_prev, acc_prev, w, index, fresh, ...)` returns
`acc`, each row's VALID convolution (no bias) of f(x) with its own network's
kernel, where f(v) = v * input_scale + input_bias[index] (then ReLU if
`input_relu`). A row that is not `fresh` gets it as
`acc_prev + conv(f(x) - f(x_prev))`, which costs only the input values that
changed since the last step: consecutive Atari frames differ in well under 1%
of their values, so a network played step by step mostly costs nothing
(`custom_ops/cc/kernels/population_delta.cc`). A dense layer is the same op
with `kernel_size` equal to the spatial size of its input.

The result equals the full convolution up to float rounding, which
accumulates from step to step: mark a row fresh when its network or episode
changes, and now and then (e.g. every 100 steps) to bound the drift.

`population_delta_conv2d_reference` computes the full convolution of f(x) in
plain TensorFlow (x_prev, acc_prev and fresh do not matter to it); it is the
fallback when the compiled library is absent and the tests' yardstick.
"""

from typing import Optional

import tensorflow as tf

from tfrl.ops import population as pop_ops


def _input_bias(input_bias):
  if input_bias is None:
    return tf.zeros([0, 0])
  return tf.convert_to_tensor(input_bias, tf.float32)


def _prepare(x, x_prev, acc_prev, w, index, fresh):
  x = tf.convert_to_tensor(x)
  if x.dtype != tf.uint8:
    x = tf.cast(x, tf.float32)
  x_prev = tf.cast(tf.convert_to_tensor(x_prev), x.dtype)
  w = tf.convert_to_tensor(w)
  if w.dtype not in pop_ops.WEIGHT_DTYPES:
    w = tf.cast(w, tf.float32)
  return (x, x_prev, tf.convert_to_tensor(acc_prev, tf.float32), w,
          tf.cast(tf.convert_to_tensor(index), tf.int32),
          tf.convert_to_tensor(fresh, tf.bool))


def population_delta_conv2d_op(x, x_prev, acc_prev, w, index, fresh, *,
                               kernel_size: int, stride: int = 1,
                               input_scale: float = 1.0, input_bias=None,
                               input_relu: bool = False) -> tf.Tensor:
  """The compiled op (raises ImportError if the library is not built).

  Args:
    x: [B, H, W, C] float32 or uint8, this step's input.
    x_prev: the previous step's input, same shape and dtype (ignored where fresh).
    acc_prev: [B, OH, OW, N] float32, this op's previous output (ignored where fresh).
    w: [P, kernel_size^2 * C, N] float32 or bfloat16, rows ordered (kh, kw, C).
    index: [B] int32 network of each row, in [0, P).
    fresh: [B] bool rows to compute in full.
    kernel_size, stride: square kernel and stride; padding is VALID.
    input_scale, input_bias, input_relu: f(v) = relu?(v * input_scale +
      input_bias[index[b], c]); input_bias is [P, C] float32 or None.

  Returns:
    acc [B, OH, OW, N] float32.
  """
  x, x_prev, acc_prev, w, index, fresh = _prepare(x, x_prev, acc_prev, w, index, fresh)
  return pop_ops.load_library().population_delta_conv2d(
      x=x, x_prev=x_prev, acc_prev=acc_prev, w=w, index=index, fresh=fresh,
      input_bias=_input_bias(input_bias), kernel_size=kernel_size, stride=stride,
      input_scale=float(input_scale), input_relu=bool(input_relu))


def layer_input(x, index, *, input_scale: float = 1.0, input_bias=None,
                input_relu: bool = False) -> tf.Tensor:
  """f(x) [B, H, W, C] float32: what the layer convolves (see the module doc)."""
  index = tf.cast(tf.convert_to_tensor(index), tf.int32)
  u = tf.cast(tf.convert_to_tensor(x), tf.float32) * input_scale
  if input_bias is not None:
    u = u + tf.gather(tf.convert_to_tensor(input_bias, tf.float32), index)[:, None, None, :]
  return tf.nn.relu(u) if input_relu else u


def population_delta_conv2d_reference(x, x_prev, acc_prev, w, index, fresh, *,
                                      kernel_size: int, stride: int = 1,
                                      input_scale: float = 1.0, input_bias=None,
                                      input_relu: bool = False) -> tf.Tensor:
  """The full convolution of f(x), with `population_conv2d_reference`."""
  del x_prev, acc_prev, fresh  # the exact value does not depend on them.
  u = layer_input(x, index, input_scale=input_scale, input_bias=input_bias,
                  input_relu=input_relu)
  return pop_ops.population_conv2d_reference(u, w, tf.cast(index, tf.int32),
                                             kernel_size=kernel_size, stride=stride)


def population_delta_conv2d(x, x_prev, acc_prev, w, index, fresh, *, kernel_size: int,
                            stride: int = 1, input_scale: float = 1.0, input_bias=None,
                            input_relu: bool = False,
                            use_op: Optional[bool] = None) -> tf.Tensor:
  """One incremental step (compiled op), or the full convolution (reference).

  use_op: True forces the compiled op (ImportError if missing), False the
  pure-TF reference; None uses the op when it is built.
  """
  if use_op is None:
    use_op = pop_ops.have_op()
  fn = population_delta_conv2d_op if use_op else population_delta_conv2d_reference
  return fn(x, x_prev, acc_prev, w, index, fresh, kernel_size=kernel_size, stride=stride,
            input_scale=input_scale, input_bias=input_bias, input_relu=input_relu)
