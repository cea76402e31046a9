"""Compact genomes: an individual is the chain of noise seeds that made it.

Uber AI's deep GA (Such et al. 2017) stores an individual as the list of
mutation seeds since its random initialisation; here a seed is an offset into
the shared `NoiseTable`:

    theta_0 = init_scale * noise[o_0 : o_0 + D]
    theta_i = theta_{i-1} + sigma_i * noise[o_i : o_i + D]

An evolution strategy's perturbation theta +- sigma * noise[o] is the chain
(CENTER, ((o, +-sigma),)) rooted at the current centre theta instead of at
an initial offset. The arithmetic is float32 in a fixed order, so a chain
gives bitwise the same weights in any process. `ParamBuilder` caches the weights of recent chains
(the parents of the next generation), so that a child costs one mutation.
"""

import collections
import dataclasses
from typing import Iterable, List, Sequence, Tuple

import numpy as np

from tfrl.neuroevolution import noise as noise_lib

# `Genome.init` of chains rooted at the centre given to `ParamBuilder.set_center`.
CENTER = -1


@dataclasses.dataclass(frozen=True)
class Genome:
  """An initial offset (or CENTER) plus a tuple of (offset, sigma) mutations."""

  init: int
  mutations: Tuple[Tuple[int, float], ...] = ()

  def child(self, offset: int, sigma: float) -> "Genome":
    return Genome(self.init, self.mutations + ((int(offset), float(sigma)),))

  @property
  def parent(self) -> "Genome":
    if not self.mutations:
      raise ValueError("A genome without mutations has no parent.")
    return Genome(self.init, self.mutations[:-1])

  def to_json(self) -> list:
    return [int(self.init), [[int(o), float(s)] for o, s in self.mutations]]

  @classmethod
  def from_json(cls, data) -> "Genome":
    init, mutations = data
    return cls(int(init), tuple((int(o), float(s)) for o, s in mutations))


class ParamBuilder:
  """Rebuilds flat float32 parameter vectors from genomes, with a parent cache.

  Args:
    table: the shared noise table.
    init_scale: [D] float32 per-parameter scale of the initial noise (0 for
      biases); its length is the parameter dimension D.
    cache_size: how many recent chains to keep (>= the number of parents).
  """

  def __init__(self, table: noise_lib.NoiseTable, init_scale: np.ndarray,
               cache_size: int = 64):
    self.table = table
    self.init_scale = np.asarray(init_scale, np.float32)
    self.dim = int(self.init_scale.shape[0])
    if self.dim > table.size:
      raise ValueError(
          f"parameter dimension {self.dim} exceeds the noise table size "
          f"{table.size}; raise --noise_table_size.")
    self.cache_size = int(cache_size)
    self._cache = collections.OrderedDict()
    self.mutations_applied = 0
    self.center = None  # [D] float32, the root of CENTER chains

  def set_center(self, center: np.ndarray) -> None:
    """The root of chains whose `init` is CENTER (e.g. ES's theta)."""
    center = np.asarray(center, np.float32)
    if center.shape != (self.dim,):
      raise ValueError(f"center must be [{self.dim}], got {list(center.shape)}.")
    self.center = center.copy()
    self.center.setflags(write=False)

  def _remember(self, genome: Genome, params: np.ndarray) -> None:
    self._cache[genome] = params
    self._cache.move_to_end(genome)
    while len(self._cache) > self.cache_size:
      self._cache.popitem(last=False)

  def build(self, genome: Genome, cache: bool = True) -> np.ndarray:
    """The [D] float32 weights of `genome` (a fresh array)."""
    if genome.init == CENTER:
      # The centre changes between calls: these chains are never cached.
      if self.center is None:
        raise ValueError("a CENTER-rooted genome needs set_center() first.")
      params = self.center.copy()
      for offset, sigma in genome.mutations:
        params += np.float32(sigma) * self.table.get(offset, self.dim)
      return params
    if genome in self._cache:
      self._cache.move_to_end(genome)
      return self._cache[genome].copy()
    # Longest cached prefix of the chain.
    start, params = 0, None
    for n in range(len(genome.mutations) - 1, -1, -1):
      prefix = Genome(genome.init, genome.mutations[:n])
      if prefix in self._cache:
        start, params = n, self._cache[prefix].copy()
        break
    if params is None:
      params = self.init_scale * self.table.get(genome.init, self.dim)
    for offset, sigma in genome.mutations[start:]:
      params += np.float32(sigma) * self.table.get(offset, self.dim)
      self.mutations_applied += 1
    if cache:
      self._remember(genome, params.copy())
    return params

  def build_many(self, genomes: Sequence[Genome], out: np.ndarray = None) -> np.ndarray:
    """[len(genomes), D] float32 weights."""
    if out is None:
      out = np.empty((len(genomes), self.dim), np.float32)
    for i, g in enumerate(genomes):
      out[i] = self.build(g, cache=False)
    return out

  def remember(self, genomes: Iterable[Genome]) -> None:
    """Caches `genomes` (e.g. the parents of the next generation)."""
    for g in genomes:
      self.build(g, cache=True)

  def cached(self) -> List[Genome]:
    return list(self._cache)
