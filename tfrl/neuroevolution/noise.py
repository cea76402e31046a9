"""The shared noise table of seed-chain genomes (Salimans et al. 2017; Such et al. 2017).

A large fixed float32 array of standard-normal samples generated from one
seed. Every worker rebuilds the same table from (seed, size), so a parameter
perturbation is named by an integer offset into it: `table[offset:offset+dim]`.
numpy's PCG64 generator gives the same bits on every platform and in every
process, which is what makes genomes reproducible.
"""

import numpy as np

DEFAULT_SIZE = 1 << 25  # 32M floats, 128 MiB: room for ~20x the large net.


class NoiseTable:
  """A fixed float32 N(0, 1) table.

  Args:
    seed: the table's seed (stored in checkpoints).
    size: number of floats; must exceed the parameter dimension of the
      networks that sample from it.
  """

  def __init__(self, seed: int = 0, size: int = DEFAULT_SIZE):
    if not isinstance(size, (int, np.integer)) or size < 1:
      raise ValueError(f"NoiseTable size must be a positive int, got {size!r}.")
    self.seed = int(seed)
    self.size = int(size)
    rng = np.random.Generator(np.random.PCG64(self.seed))
    self.noise = rng.standard_normal(self.size, dtype=np.float32)
    self.noise.setflags(write=False)

  def get(self, offset: int, dim: int) -> np.ndarray:
    """The read-only slice `noise[offset:offset+dim]`."""
    if not 0 <= offset <= self.size - dim:
      raise ValueError(
          f"noise offset {offset} with dim {dim} is out of range: expected "
          f"0 <= offset <= {self.size - dim} (table size {self.size}).")
    return self.noise[offset:offset + dim]

  def sample_offsets(self, rng: np.random.Generator, dim: int, count: int) -> np.ndarray:
    """`count` random valid offsets for perturbations of size `dim`."""
    if dim > self.size:
      raise ValueError(
          f"noise table of size {self.size} is smaller than the parameter "
          f"dimension {dim}; raise --noise_table_size.")
    return rng.integers(0, self.size - dim + 1, size=count, dtype=np.int64)
