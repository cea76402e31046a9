"""The population ops in plain TensorFlow: the one reference of each op.

Each function computes what its compiled op computes (`tfrl.ops.population`,
`tfrl.ops.population_delta`), with gathers and matmuls, on the active rows
only. They are
  * the fallback when the op library is not built, and what
    `--matmul=reference` runs (float32, inside graphs);
  * the yardstick of the tests, the fuzzer (`tests/fuzz_ops.py`) and the
    benchmarks, which call them with `dtype=tf.float64` to get sums without
    float32 rounding.

`dtype` is the type the products are summed in. The inputs are first taken
as the op takes them, in float32: uint8 frames times `input_scale`, bfloat16
weights widened exactly, a bfloat16-rounded convolution input, the delta ops'
input transform f. With `nonzero_only` a sum skips the zero input values, as
the incremental ops' sums do: there a zero input times an inf or NaN weight
adds nothing (it costs memory B * M * K * N: for checks on small shapes).

There are no gradients to care about: neuroevolution does not differentiate
its networks.
"""

from typing import List, Sequence, Tuple

import tensorflow as tf

WEIGHT_DTYPES = (tf.float32, tf.bfloat16)
CONV_INPUT_DTYPES = ("float32", "bfloat16")


def round_to_bfloat16(x) -> tf.Tensor:
  """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
  return tf.cast(tf.cast(x, tf.bfloat16), tf.float32)


def im2col(x, kernel_size: int, stride: int) -> Tuple[tf.Tensor, tf.Tensor]:
  """[B, H, W, C] -> ([B, OH * OW, kernel_size^2 * C] VALID patches, their
  [B, OH, OW, K] shape). K is ordered (kh, kw, C), as a conv2d kernel."""
  x = tf.convert_to_tensor(x)
  if not x.dtype.is_floating:
    x = tf.cast(x, tf.float32)
  patches = tf.image.extract_patches(x, [1, kernel_size, kernel_size, 1],
                                     [1, stride, stride, 1], [1, 1, 1, 1], "VALID")
  shape = tf.shape(patches)
  return tf.reshape(patches, [shape[0], shape[1] * shape[2], shape[3]]), shape


def check_input_dtype(input_dtype: str, w: tf.Tensor) -> None:
  """ValueError unless the convolution's `input_dtype` suits kernels `w`."""
  if input_dtype not in CONV_INPUT_DTYPES:
    raise ValueError(f"input_dtype must be one of {CONV_INPUT_DTYPES}, got {input_dtype!r}.")
  if input_dtype == "bfloat16" and w.dtype != tf.bfloat16:
    raise ValueError("input_dtype='bfloat16' needs bfloat16 kernels, got kernels of "
                     f"dtype {w.dtype.name}.")


def _values(a, dtype) -> tf.Tensor:
  """`a` as a tensor of `dtype` (float64 values, e.g. the fuzzer's error
  bounds, stay exact in a float64 reference)."""
  a = tf.convert_to_tensor(a)
  if not a.dtype.is_floating:
    a = tf.cast(a, tf.float32)
  return tf.cast(a, dtype)


def _widen(w, dtype) -> tf.Tensor:
  """Weights as the op widens them: bfloat16 exactly to float32, then to `dtype`."""
  if w.dtype == tf.bfloat16:
    w = tf.cast(w, tf.float32)
  return _values(w, dtype)


def _rows(index, active) -> Tuple[tf.Tensor, tf.Tensor]:
  """(active rows, their networks) as int32."""
  index = tf.cast(tf.convert_to_tensor(index), tf.int32)
  active = (tf.ones_like(index, dtype=tf.bool) if active is None
            else tf.convert_to_tensor(active, tf.bool))
  rows = tf.cast(tf.where(active)[:, 0], tf.int32)
  return rows, tf.gather(index, rows)


def _products_sum(x, w, nonzero_only: bool) -> tf.Tensor:
  """x [R, M, K] times w [R, K, N]; with nonzero_only, zero x values skipped."""
  if not nonzero_only:
    return tf.matmul(x, w)
  products = x[:, :, :, None] * w[:, None, :, :]
  return tf.reduce_sum(tf.where(x[:, :, :, None] != 0, products, tf.zeros_like(products)),
                       axis=2)


def population_matmul(x, w, index, active=None, *, bias=None, relu: bool = False,
                      dtype=tf.float32, nonzero_only: bool = False) -> tf.Tensor:
  """PopulationMatmul: y[b] = x[b] @ w[index[b]] for active rows, else 0.

  Args:
    x: [B, M, K]. w: [P, K, N] float32 or bfloat16 (widened exactly).
    index: [B] network of each row, in [0, P) for active rows.
    active: [B] bool rows to compute; None means all.
    bias, relu: the epilogue: + bias[index[b]] ([P, N]), then max(y, 0)
      (NaN stays NaN), on active rows.
    dtype: what the products are summed in (and the result's dtype).
    nonzero_only: skip the zero values of x in the sums.

  Returns:
    [B, M, N] of `dtype`.
  """
  x = _values(x, dtype)
  w = tf.convert_to_tensor(w)
  tf.debugging.assert_rank(x, 3, message="x must be [B, M, K]")
  tf.debugging.assert_rank(w, 3, message="w must be [P, K, N]")
  rows, nets = _rows(index, active)
  tf.debugging.assert_less(nets, tf.shape(w)[0], message="index out of range [0, P)")
  tf.debugging.assert_non_negative(nets, message="index out of range [0, P)")
  y = _products_sum(tf.gather(x, rows), _widen(tf.gather(w, nets), dtype), nonzero_only)
  if bias is not None:
    y = y + tf.cast(tf.gather(tf.convert_to_tensor(bias, tf.float32), nets), dtype)[:, None, :]
  if relu:
    y = tf.nn.relu(y)
  shape = tf.stack([tf.shape(x)[0], tf.shape(x)[1], tf.shape(w)[2]])
  return tf.scatter_nd(rows[:, None], y, shape)


def population_conv2d(x, w, index, active=None, *, kernel_size: int, stride: int,
                      input_dtype: str = "float32", input_scale: float = 1.0, bias=None,
                      relu: bool = False, dtype=tf.float32) -> tf.Tensor:
  """PopulationConv2D: each active row's VALID convolution with its network's
  kernel ([P, kernel_size^2 * C, N], rows ordered (kh, kw, C)), as im2col
  patches times `population_matmul`.

  The input is float32(x) * input_scale (if not 1), then with input_dtype
  `bfloat16` rounded to bfloat16, as the op reads it; the epilogue is
  `population_matmul`'s. Returns [B, OH, OW, N] of `dtype`.
  """
  x = tf.cast(tf.convert_to_tensor(x), tf.float32)
  if input_scale != 1.0:
    x = x * input_scale
  check_input_dtype(input_dtype, tf.convert_to_tensor(w))
  if input_dtype == "bfloat16":
    x = round_to_bfloat16(x)
  patches, shape = im2col(x, kernel_size, stride)
  y = population_matmul(patches, w, index, active, bias=bias, relu=relu, dtype=dtype)
  return tf.reshape(y, [shape[0], shape[1], shape[2], tf.shape(y)[2]])


def layer_input(x, index, *, input_scale: float = 1.0, input_bias=None,
                input_relu: bool = False) -> tf.Tensor:
  """f(x) [B, H, W, C] float32, what an incremental layer convolves:
  float32(x) * input_scale + input_bias[index[b]] ([P, C]), then max(., 0)
  if input_relu."""
  index = tf.cast(tf.convert_to_tensor(index), tf.int32)
  u = tf.cast(tf.convert_to_tensor(x), tf.float32) * input_scale
  if input_bias is not None:
    u = u + tf.gather(tf.convert_to_tensor(input_bias, tf.float32), index)[:, None, None, :]
  return tf.nn.relu(u) if input_relu else u


def population_delta_conv2d(x, w, index, *, kernel_size: int, stride: int = 1,
                            input_scale: float = 1.0, input_bias=None,
                            input_relu: bool = False, dtype=tf.float32,
                            nonzero_only: bool = False) -> tf.Tensor:
  """What PopulationDeltaConv2D's `acc` holds after any step: the VALID
  convolution (no bias) of every row's f(x) (`layer_input`) with its
  network's kernel. The op's x_prev, acc_prev and fresh change only its
  rounding, so they are not arguments here. Returns [B, OH, OW, N]."""
  u = layer_input(x, index, input_scale=input_scale, input_bias=input_bias,
                  input_relu=input_relu)
  patches, shape = im2col(u, kernel_size, stride)
  y = population_matmul(patches, w, index, dtype=dtype, nonzero_only=nonzero_only)
  return tf.reshape(y, [shape[0], shape[1], shape[2], tf.shape(y)[2]])


def population_delta_net(obs, kernels: Sequence, biases: Sequence, index, *,
                         kernel_sizes: Sequence[int], strides: Sequence[int],
                         relus: Sequence[bool], input_scale: float = 1.0,
                         dtype=tf.float32, nonzero_only: bool = False
                         ) -> Tuple[tf.Tensor, List[tf.Tensor]]:
  """What PopulationDeltaNet returns after any step: (logits [B, N_last],
  each layer's acc). Layer i is `population_delta_conv2d` of its input: obs
  scaled by input_scale for i = 0, else acc[i - 1] through biases[i - 1] and
  a ReLU if relus[i - 1] (in float32, as the op); logits = acc[-1] +
  biases[-1][index]. The last layer has one output position."""
  accs, x = [], obs
  for i, (kernel, ks, stride) in enumerate(zip(kernels, kernel_sizes, strides)):
    inputs = (dict(input_scale=input_scale) if i == 0 else
              dict(input_bias=biases[i - 1], input_relu=bool(relus[i - 1])))
    acc = population_delta_conv2d(x, kernel, index, kernel_size=ks, stride=stride,
                                  dtype=dtype, nonzero_only=nonzero_only, **inputs)
    accs.append(acc)
    x = tf.cast(acc, tf.float32)
  index = tf.cast(tf.convert_to_tensor(index), tf.int32)
  last_bias = tf.cast(tf.gather(tf.convert_to_tensor(biases[-1], tf.float32), index), dtype)
  return accs[-1][:, 0, 0, :] + last_bias, accs

