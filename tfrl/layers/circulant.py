"""Block-circulant dense layer (CirCNN, Ding et al. 2017; used by GST, 2021).

The [in, out] weight matrix is split into b x b blocks, each a circulant
matrix C defined by one length-b vector w: C[r, c] = w[(r - c) mod b], so
C x = irfft(rfft(w) * rfft(x)). With P = ceil(in / b) input blocks and
Q = ceil(out / b) output blocks the layer stores Q * P * b parameters
(= in * out / b when b divides both), and the forward pass is
  X = rfft(x blocks)            [N, P, b/2+1]
  Y_q = sum_p rfft(w_qp) * X_p  [N, Q, b/2+1]
  y = irfft(Y)                  one inverse FFT per output block.
Sizes that are not multiples of b are zero-padded (inputs) and sliced
(outputs). Computation runs in float32 even under mixed precision (the FFT
ops need it); the output is cast back to the input dtype. Gradients flow
through `tf.signal.rfft` / `irfft`.

`method="matmul"` computes the same function by materialising the kernel
from the vectors (`expand`) and one matmul; values and gradients are the
same, the stored parameters are still in * out / b. On CPUs it is faster
for small b (see benchmarks/layers.py); `fft` is the default.

Conv layers have no circulant variant: `make_conv2d` builds a plain
`Conv2D` for kind `circulant` (documented fallback).

`kernel_index` is the layout of the kernel in the vectors, shared by
`BlockCirculantDense.to_dense` and the population networks of
neuroevolution, which expand many genomes' vectors at once in NumPy.
"""

import functools

import numpy as np
import tensorflow as tf

from tfrl.layers import base
from tfrl.layers import dense


METHODS = ("fft", "matmul")


@functools.lru_cache(maxsize=64)
def kernel_index(input_size: int, units: int, block_size: int) -> np.ndarray:
  """Where each kernel entry sits in the flattened vectors.

  The vectors are [Q, P, b] (Q = ceil(units / b) output blocks, P =
  ceil(input_size / b) input blocks); block (q, p) of the [units, input_size]
  matrix C (y = C x) is the circulant C[r, c] = vectors[q, p, (r - c) mod b].
  Returns the read-only [input_size, units] array of positions in
  vectors.reshape(-1) such that kernel = vectors.reshape(-1)[kernel_index(...)]
  is the layer's kernel, C transposed.
  """
  b = block_size
  in_blocks = -(-input_size // b)
  i = np.arange(input_size)[:, None]
  o = np.arange(units)[None, :]
  p, c = i // b, i % b
  q, r = o // b, o % b
  index = (q * in_blocks + p) * b + (r - c) % b
  index.flags.writeable = False
  return index


@functools.lru_cache(maxsize=64)
def _shift_basis(block_size: int) -> np.ndarray:
  """[b, b * b] one-hot rows: row k marks the entries (c, r) of a b x b block
  (flattened c * b + r) with (r - c) mod b == k, i.e. where vector entry k sits."""
  b = block_size
  c = np.arange(b)[:, None]
  r = np.arange(b)[None, :]
  basis = np.zeros([b, b * b], np.float32)
  basis[(r - c) % b, c * b + r] = 1.0
  basis.flags.writeable = False
  return basis


def expand(vectors: tf.Tensor, input_size: int, units: int) -> tf.Tensor:
  """The [input_size, units] kernel of [Q, P, b] vectors (the layout of
  `kernel_index`), as a matmul with a one-hot basis: each entry is one vector
  entry times 1 plus zeros, so the values are exact, and on CPUs it is about
  3x faster than gathering 65k scalars (b = 8, 256 x 256)."""
  q, p, b = (int(d) for d in vectors.shape)
  blocks = tf.matmul(tf.reshape(vectors, [q * p, b]), _shift_basis(b))  # [QP, (c, r)]
  kernel = tf.transpose(tf.reshape(blocks, [q, p, b, b]), [1, 2, 0, 3])  # [P, c, Q, r]
  return tf.reshape(kernel, [p * b, q * b])[:input_size, :units]


def expand_adjoint(d_kernel: tf.Tensor, vectors_shape) -> tf.Tensor:
  """The gradient of the vectors from that of `expand`'s kernel: each vector
  entry sums the kernel entries it was copied to."""
  q, p, b = (int(d) for d in vectors_shape)
  input_size, units = (int(d) for d in d_kernel.shape)
  d_kernel = tf.pad(d_kernel, [[0, p * b - input_size], [0, q * b - units]])
  blocks = tf.transpose(tf.reshape(d_kernel, [p, b, q, b]), [2, 0, 1, 3])  # [Q, P, c, r]
  d_vectors = tf.matmul(tf.reshape(blocks, [q * p, b * b]), _shift_basis(b), transpose_b=True)
  return tf.reshape(d_vectors, [q, p, b])


class BlockCirculantDense(base.Layer):
  """Dense layer whose kernel is block-circulant with block size b.

  Args:
    units: output size.
    block_size: b >= 1 (b = 1 is an ordinary dense layer, computed by FFT).
    method: `fft` (rfft / irfft, one inverse FFT per output block) or
      `matmul` (materialised kernel, same values and gradients).
    activation: None, a name or a callable.
    with_bias: whether to add a bias (a plain length-`units` vector).
    kernel_scale: multiplies the initial weights.
    name: module name.
  """

  def __init__(self, units: int, block_size: int, *, method: str = "fft", activation=None,
               with_bias=True, kernel_scale: float = 1.0, name=None):
    super().__init__(activation=activation, name=name)
    cls = type(self).__name__
    base.check_positive_int("units", units, cls)
    base.check_positive_int("block_size", block_size, cls)
    if method not in METHODS:
      raise ValueError(f"{cls}: method must be one of {METHODS}, got {method!r}.")
    self.units = units
    self.block_size = block_size
    self.method = method
    self.with_bias = with_bias
    self.kernel_scale = float(kernel_scale)

  def _build(self, input_shape):
    if input_shape.rank is None or input_shape[-1] is None:
      raise ValueError(f"{self.name}: last input dimension must be known, got {input_shape}.")
    b = self.block_size
    self.input_size = int(input_shape[-1])
    self.in_blocks = -(-self.input_size // b)
    self.out_blocks = -(-self.units // b)
    # Each output sums `in` products, as in a dense layer: Glorot limits.
    self.vectors = tf.Variable(
        self.kernel_scale * base.glorot_uniform(
            [self.out_blocks, self.in_blocks, b], self.input_size, self.units),
        name="vectors")
    if self.with_bias:
      self.bias = tf.Variable(tf.zeros([self.units]), name="bias")

  def _forward(self, x):
    flat, restore = dense.flatten_leading(x)
    dtype = flat.dtype
    b = self.block_size
    h = tf.cast(flat, tf.float32)
    if self.method == "matmul":
      y = tf.matmul(h, self.to_dense())
      if self.with_bias:
        y = y + self.bias
      return restore(tf.cast(y, dtype))
    pad = self.in_blocks * b - self.input_size
    if pad:
      h = tf.pad(h, [[0, 0], [0, pad]])
    h = tf.reshape(h, [-1, self.in_blocks, b])
    xf = tf.signal.rfft(h)                                   # [N, P, F]
    wf = tf.signal.rfft(self.vectors)                        # [Q, P, F]
    yf = tf.einsum("npf,qpf->nqf", xf, wf)                   # [N, Q, F]
    y = tf.signal.irfft(yf, fft_length=[b])                  # [N, Q, b]
    y = tf.reshape(y, [-1, self.out_blocks * b])[:, :self.units]
    if self.with_bias:
      y = y + self.bias
    return restore(tf.cast(y, dtype))

  def to_dense(self) -> tf.Tensor:
    """The equivalent [in, out] kernel (so that x @ to_dense() + bias == layer(x))."""
    return expand(self.vectors, self.input_size, self.units)

  def kernel_stats(self):
    n = self.input_size * self.units
    stored = float(self.vectors.shape.num_elements())
    return n, tf.constant(stored), tf.constant(4.0 * stored)
