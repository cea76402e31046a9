"""How a `PopulationNetwork` stores each layer's kernel.

Expanded, [K, N] per network, as every op reads it; or, for a block-circulant
layer played by incremental inference, compact: the layer's vectors
v[q, p, 0:b] (`tfrl.layers.circulant`'s layout), each stored twice,
[Q * I, 2b] per network (Q = ceil(N / b) output and I = ceil(K / b) input
blocks), which `PopulationDeltaNet` reads as the expanded kernel's values.

Why: each of a group's slots plays its own network, and the expanded kernels
of the Frostbite preset's circulant dense layer (2.7 MB per network) stream
from memory at every step; compact, a network's kernel is 2 / b of that
(0.33 MB for b = 16), and a group's 32 networks stay in the last-level cache
(docs/neuroevolution_throughput.md, "The bound: memory bandwidth").
"""

import numpy as np

# The op's contiguous column spans need b to be a multiple of every build's
# vector width (16, 8 or 4 floats).
BLOCK_MULTIPLE = 16


def can_be_compact(layer, weight_dtype: str) -> bool:
  """Whether the op can read `layer`'s kernel compact (float32 circulant)."""
  return (layer.kind == "circulant" and weight_dtype == "float32"
          and layer.block_size % BLOCK_MULTIPLE == 0)


def _blocks(layer):
  b = layer.block_size
  return -(-layer.n // b), -(-layer.k // b), b


def compact_shape(layer):
  """[Q * I, 2b]: one network's compact kernel."""
  out_blocks, in_blocks, b = _blocks(layer)
  return (out_blocks * in_blocks, 2 * b)


def compact_kernels(layer, flat: np.ndarray) -> np.ndarray:
  """[n, D] flat genomes -> [n, Q * I, 2b] float32: each vector twice."""
  out_blocks, in_blocks, b = _blocks(layer)
  vectors = flat[:, layer.kernel_offset:layer.kernel_offset + layer.kernel_size]
  vectors = vectors.reshape(flat.shape[0], out_blocks * in_blocks, b)
  return np.concatenate([vectors, vectors], axis=2).astype(np.float32, copy=False)


def expansion_index(layer) -> np.ndarray:
  """[K, N] positions in a compact kernel's flat [Q * I * 2b] values such that
  compact.reshape(-1)[index] is the expanded kernel (C transposed)."""
  _, in_blocks, b = _blocks(layer)
  i = np.arange(layer.k)[:, None]
  o = np.arange(layer.n)[None, :]
  return ((o // b) * in_blocks + i // b) * 2 * b + (o % b - i % b) % b
