"""Incremental (delta) inference of population networks, step after step.

`population_delta_net_op(obs, obs_prev, acc_prev, kernels, biases, index,
fresh, ...)` runs one step of a whole population network (convolutions, then
dense layers, each layer's input the one below through its bias and ReLU) in
one compiled op, `PopulationDeltaNet`
(`custom_ops/population/cc/kernels/population_delta_net.cc`). It returns the
logits and each layer's output before its bias (`acc`). A row that is not
`fresh` gets them as `acc_prev` plus what the change of its observation since
`obs_prev` changes, which costs only the input values that changed:
consecutive Atari frames differ in well under 1% of their values, so a
network played step by step mostly costs nothing. A dense layer is a
convolution whose kernel covers its whole input.

The result equals the full forward up to float rounding, which accumulates
from step to step: mark a row fresh when its network or episode changes, and
now and then (e.g. every 100 steps) to bound the drift. NaN and inf propagate
as in the full forward: an output whose updated value is not finite (an inf
or NaN entered or left its window, or a sum overflowed) is recomputed from
its whole window, so `inf - inf` in the accumulator never poisons the steps
after the non-finite value has gone.

`population_delta_conv2d(x, x_prev, acc_prev, w, index, fresh, ...)` is one
such layer on its own: `tfrl.ops.reference.population_delta_conv2d` (the
full convolution of the layer's input f(x)), or, in a library built with
TFRL_BUILD_DELTA_CONV2D=1, the per-layer op `PopulationDeltaConv2D`, which
the whole-network op equals bit for bit when chained.
"""

from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from tfrl.ops import population as pop_ops
from tfrl.ops import reference


def have_delta_conv2d_op() -> bool:
  """Whether the op library is built with the per-layer op (TFRL_BUILD_DELTA_CONV2D=1)."""
  return pop_ops.have_op() and hasattr(pop_ops.load_library(), "population_delta_conv2d")


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
  """The per-layer compiled op (ImportError if the library is not built, an
  AttributeError naming the build option if it is built without it).

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
  lib = pop_ops.load_library()
  if not hasattr(lib, "population_delta_conv2d"):
    raise AttributeError("this op library is built without PopulationDeltaConv2D; "
                         "rebuild it with TFRL_BUILD_DELTA_CONV2D=1 to have it")
  x, x_prev, acc_prev, w, index, fresh = _prepare(x, x_prev, acc_prev, w, index, fresh)
  return lib.population_delta_conv2d(
      x=x, x_prev=x_prev, acc_prev=acc_prev, w=w, index=index, fresh=fresh,
      input_bias=_input_bias(input_bias), kernel_size=kernel_size, stride=stride,
      input_scale=float(input_scale), input_relu=bool(input_relu))


def population_delta_net_op(obs, obs_prev, acc_prev: Sequence, kernels: Sequence,
                            biases: Sequence, index, fresh, *, kernel_sizes: Sequence[int],
                            strides: Sequence[int], relus: Sequence[bool],
                            input_scale: float = 1.0,
                            circulant_blocks: Optional[Sequence[int]] = None
                            ) -> Tuple[tf.Tensor, List[tf.Tensor]]:
  """One incremental step of a whole network (compiled op; ImportError if missing).

  Layer i convolves (VALID, kernel_sizes[i], strides[i]) its input: obs
  (scaled by input_scale) for i = 0, else acc[i - 1] with biases[i - 1] and
  ReLU if relus[i - 1]. Each acc_prev[i] is updated in place when
  TensorFlow hands its buffer over, the input changes of layer i + 1 are read
  off the outputs layer i updated, and the step is one op. What it computes
  is `tfrl.ops.reference.population_delta_net`.

  Args:
    obs, obs_prev: [B, H, W, C] uint8 or float32 (obs_prev ignored where fresh).
    acc_prev: each layer's output (no bias) at the previous step.
    kernels: [P, K_i, N_i] float32 or bfloat16, one dtype for all layers; a
      layer with circulant_blocks[i] = b > 0 (a multiple of 16): float32
      [P, Q * I, 2b], its block-circulant vectors each stored twice
      (`tfrl.neuroevolution.kernel_storage`), with the same results bit for bit
      as its expanded kernel.
    biases: [P, N_i] float32.
    index: [B] int32; fresh: [B] bool rows to compute in full.

  Returns:
    (logits [B, N_last] = acc[-1] + biases[-1][index], the new acc list).
  """
  obs = tf.convert_to_tensor(obs)
  if obs.dtype != tf.uint8:
    obs = tf.cast(obs, tf.float32)
  kernels = [tf.convert_to_tensor(w) for w in kernels]
  dtype = kernels[0].dtype if kernels[0].dtype in pop_ops.WEIGHT_DTYPES else tf.float32
  logits, acc = pop_ops.load_library().population_delta_net(
      obs=obs, obs_prev=tf.cast(tf.convert_to_tensor(obs_prev), obs.dtype),
      acc_prev=[tf.convert_to_tensor(a, tf.float32) for a in acc_prev],
      w=[tf.cast(w, dtype) for w in kernels],
      bias=[tf.convert_to_tensor(b, tf.float32) for b in biases],
      index=tf.cast(tf.convert_to_tensor(index), tf.int32),
      fresh=tf.convert_to_tensor(fresh, tf.bool), kernel_sizes=[int(k) for k in kernel_sizes],
      strides=[int(s) for s in strides], relus=[bool(r) for r in relus],
      input_scale=float(input_scale),
      circulant_blocks=[int(b) for b in (circulant_blocks or [])])
  return logits, list(acc)


def population_delta_conv2d(x, x_prev, acc_prev, w, index, fresh, *, kernel_size: int,
                            stride: int = 1, input_scale: float = 1.0, input_bias=None,
                            input_relu: bool = False,
                            use_op: Optional[bool] = None) -> tf.Tensor:
  """One incremental layer step (per-layer op), or its full convolution (reference).

  use_op: True forces the per-layer op (an error if the library lacks it),
  False the pure-TF reference; None uses the op when the library has it.
  """
  if use_op is None:
    use_op = have_delta_conv2d_op()
  kwargs = dict(kernel_size=kernel_size, stride=stride, input_scale=input_scale,
                input_bias=input_bias, input_relu=input_relu)
  if use_op:
    return population_delta_conv2d_op(x, x_prev, acc_prev, w, index, fresh, **kwargs)
  return reference.population_delta_conv2d(x, w, index, **kwargs)
