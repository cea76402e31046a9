"""Observation normalization of population networks (OpenAI-ES's scheme, Salimans et al. 2017).

Every network of a run sees its observations as

    clip((obs - mean) / std, -clip, clip)       # float32, per observation dimension

with `mean` and `std` running statistics of the observations played so far,
gathered from a fraction of the episodes and updated once per generation:

  * Which episodes: `chosen(seeds, fraction)`, a hash of each episode's reset
    seed below `fraction`, so the choice is a function of the run's seed,
    generation, individual and episode, not of where the episode was played.
    Only the population's evaluation (GA, random search: its first call; ES:
    the perturbations) contributes; the re-evaluations of elite candidates and
    ES's centre do not.
  * What: the evaluator sums each chosen episode's observations (those the
    network acted on) in float64, step by step (`EpisodeSums`: sum, sum of
    squares, count per episode), wherever it is played (a slot group, a Ray
    worker).
  * Merge: after the generation, the episodes' sums are added to the running
    sums in the order of (individual, episode), so the statistics are bit for
    bit the same for any number of slots, groups or Ray workers.
  * Use: every evaluation call of generation g (population, elite
    re-evaluation, ES's centre) plays with the statistics fixed at the start
    of g; the elite is scored with them, and the exported elite carries them
    (`NormalizedInputLayout`), as the checkpoint carries the running sums.

    mean = sum / count,  std = sqrt(max(sumsq / count - mean^2, MIN_VARIANCE))

(mean 0, std 1 before any observation). The floor on the variance keeps
dimensions that barely move (e.g. contact forces that stay zero) from being
blown up.
"""

import dataclasses
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution.settings import NormalizationConfig

MIN_VARIANCE = 1e-2


def chosen(seeds: np.ndarray, fraction: float) -> np.ndarray:
  """Which episodes (by reset seed) update the statistics: bool, seeds' shape.

  A 64-bit mix (splitmix64's finalizer) of each seed, as a uniform number in
  [0, 1), below `fraction`.
  """
  z = np.asarray(seeds, np.int64).astype(np.uint64)
  with np.errstate(over="ignore"):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
  return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 < fraction


@dataclasses.dataclass
class EpisodeSums:
  """The observation sums of some episodes, keyed by (row, episode) of a call."""

  keys: np.ndarray    # [k, 2] int64: (network row, episode)
  sum: np.ndarray     # [k, D] float64
  sumsq: np.ndarray   # [k, D] float64
  count: np.ndarray   # [k] int64: steps

  @classmethod
  def empty(cls, dim: int) -> "EpisodeSums":
    return cls(np.zeros((0, 2), np.int64), np.zeros((0, dim)), np.zeros((0, dim)),
               np.zeros(0, np.int64))

  @classmethod
  def concat(cls, parts: Sequence["EpisodeSums"], dim: int) -> "EpisodeSums":
    parts = [p for p in parts if p is not None]
    if not parts:
      return cls.empty(dim)
    return cls(*(np.concatenate([getattr(p, f) for p in parts])
                 for f in ("keys", "sum", "sumsq", "count")))

  def shifted(self, rows: int, episodes: int) -> "EpisodeSums":
    """The same sums with keys offset (a Ray chunk's rows in the whole call)."""
    return dataclasses.replace(self, keys=self.keys + np.array([rows, episodes], np.int64))

  def ordered(self) -> Iterable[Tuple[np.ndarray, np.ndarray, int]]:
    """(sum, sumsq, count) per episode in (row, episode) order."""
    order = np.lexsort((self.keys[:, 1], self.keys[:, 0])) if len(self.keys) else []
    for i in order:
      yield self.sum[i], self.sumsq[i], int(self.count[i])


class RunningStats:
  """Float64 running sums of observations; `mean_std` the statistics they give."""

  def __init__(self, dim: int):
    self.dim = int(dim)
    self.sum = np.zeros(self.dim)
    self.sumsq = np.zeros(self.dim)
    self.count = 0

  def add(self, sums: EpisodeSums) -> int:
    """Adds each episode's sums in (row, episode) order; returns the episodes added."""
    added = 0
    for s, sq, n in sums.ordered():
      self.sum += s
      self.sumsq += sq
      self.count += n
      added += 1
    return added

  def mean_std(self) -> Tuple[np.ndarray, np.ndarray]:
    """float32 [D] mean and std (0 and 1 before any observation)."""
    if self.count == 0:
      return np.zeros(self.dim, np.float32), np.ones(self.dim, np.float32)
    mean = self.sum / self.count
    var = np.maximum(self.sumsq / self.count - mean * mean, MIN_VARIANCE)
    return mean.astype(np.float32), np.sqrt(var).astype(np.float32)

  def arrays(self) -> dict:
    return {"obs_norm_sum": self.sum, "obs_norm_sumsq": self.sumsq,
            "obs_norm_count": np.array(self.count, np.int64)}

  def restore(self, arrays) -> None:
    shapes = (arrays["obs_norm_sum"].shape, arrays["obs_norm_sumsq"].shape)
    if shapes != ((self.dim,), (self.dim,)):
      raise ValueError(f"the checkpoint's observation statistics are for observations "
                       f"of shape {list(shapes[0])}, this run's are [{self.dim}].")
    self.sum = arrays["obs_norm_sum"].astype(np.float64)
    self.sumsq = arrays["obs_norm_sumsq"].astype(np.float64)
    self.count = int(arrays["obs_norm_count"])


def normalize(obs: tf.Tensor, mean, std, clip: float) -> tf.Tensor:
  """clip((float32(obs) - mean) / std, -clip, clip): the one formula, in training
  and in the exported policy."""
  x = tf.cast(obs, tf.float32)
  return tf.clip_by_value((x - mean) / std, -clip, clip)


class ObservationFilter(tf.Module):
  """`normalize` with its statistics in variables (`set` them; `__call__(obs)`)."""

  def __init__(self, dim: int, clip: float, mean=None, std=None, name=None):
    super().__init__(name=name)
    self.clip = float(clip)
    self.mean = tf.Variable(np.zeros(dim, np.float32) if mean is None else mean,
                            trainable=False, dtype=tf.float32, name="obs_mean")
    self.std = tf.Variable(np.ones(dim, np.float32) if std is None else std,
                           trainable=False, dtype=tf.float32, name="obs_std")

  def set(self, mean: np.ndarray, std: np.ndarray) -> None:
    self.mean.assign(np.asarray(mean, np.float32))
    self.std.assign(np.asarray(std, np.float32))

  def __call__(self, obs):
    return normalize(obs, self.mean, self.std, self.clip)


class NormalizedInputLayout:
  """A layout whose flat vectors are a genome followed by its observations' mean and std.

  `single_network.SingleNetwork(NormalizedInputLayout(base, clip), flat)` is the
  plain network with the normalization baked in (the exported elite).
  """

  def __init__(self, base, clip: float):
    self.base = base
    self.clip = float(clip)
    for name in ("config", "observation_shape", "num_actions", "layers", "head"):
      setattr(self, name, getattr(base, name))
    self.genome_dim = base.dim
    self.obs_dim = int(np.prod(base.observation_shape))
    self.dim = self.genome_dim + 2 * self.obs_dim

  def _check(self, flat: np.ndarray) -> np.ndarray:
    """[n, dim] float32 of [dim] or [n, dim] flat vectors (ValueError otherwise)."""
    flat = np.asarray(flat, np.float32)
    flat = flat[None] if flat.ndim == 1 else flat
    if flat.ndim != 2 or flat.shape[1] != self.dim:
      raise ValueError(f"flat genome + observation statistics must be [n, {self.dim}] "
                       f"({self.genome_dim} + 2 x {self.obs_dim}), got {flat.shape}.")
    return flat

  def expand(self, flat: np.ndarray):
    return self.base.expand(self._check(flat)[:, :self.genome_dim])

  def observation_filter(self, flat: np.ndarray) -> ObservationFilter:
    stats = self._check(flat)[0, self.genome_dim:]
    return ObservationFilter(self.obs_dim, self.clip, stats[:self.obs_dim],
                             stats[self.obs_dim:])

  def describe(self) -> str:
    return self.base.describe() + f" + observation normalization (clip {self.clip:g})"


class Normalizer:
  """A run's observation normalization on the algorithm's side (GA, ES, random search).

      normalizer.begin(evaluator)               # the generation's statistics
      result = evaluator.evaluate(..., observe=normalizer.observe(seeds))
      ...                                       # the elite's calls
      normalizer.end(result)                    # merged for the next generation

  `elite` holds the statistics the elite was last scored with (those of the
  generation that scored it): the exported elite carries them.
  """

  def __init__(self, config: NormalizationConfig, observation_shape):
    if len(tuple(observation_shape)) != 1:
      raise ValueError(f"--obs_norm needs vector observations, got shape "
                       f"{list(observation_shape)}.")
    self.config = config
    self.stats = RunningStats(int(observation_shape[0]))
    self.in_use = self.stats.mean_std()
    self.elite = self.in_use
    self.episodes = 0   # episodes merged so far

  def begin(self, evaluator) -> None:
    self.in_use = self.stats.mean_std()
    evaluator.set_normalization(*self.in_use)

  def observe(self, seeds: np.ndarray) -> np.ndarray:
    return chosen(seeds, self.config.fraction)

  def end(self, result) -> None:
    """The generation's elite was scored with `in_use`; merges `result`'s sums."""
    self.elite = self.in_use
    if result.observations is not None:
      self.episodes += self.stats.add(result.observations)

  def export_layout(self, base) -> NormalizedInputLayout:
    return NormalizedInputLayout(base, self.config.clip)

  def export_params(self, genome_params: np.ndarray) -> np.ndarray:
    """The exported elite's flat vector: its genome's, then `elite`'s mean and std."""
    return np.concatenate([np.asarray(genome_params, np.float32), *self.elite])

  def arrays(self) -> dict:
    arrays = self.stats.arrays()
    arrays.update(obs_norm_elite_mean=self.elite[0], obs_norm_elite_std=self.elite[1],
                  obs_norm_episodes=np.array(self.episodes, np.int64))
    return arrays

  def restore(self, arrays) -> None:
    self.stats.restore(arrays)
    self.elite = (arrays["obs_norm_elite_mean"].astype(np.float32),
                  arrays["obs_norm_elite_std"].astype(np.float32))
    self.episodes = int(arrays["obs_norm_episodes"])
    self.in_use = self.stats.mean_std()


def check_resume(saved: Optional[dict], normalizer: Optional[Normalizer],
                 arrays) -> None:
  """A checkpoint's observation normalization (`saved`: its `identity()`) must be
  this run's: ValueError, one line, naming what differs."""
  current = normalizer.config.identity() if normalizer is not None else None
  if saved != current:
    def show(identity):
      return ("off" if identity is None else
              f"--obs_norm_fraction={identity['fraction']:g} "
              f"--obs_norm_clip={identity['clip']:g}")
    raise ValueError(f"the checkpoint's observation normalization ({show(saved)}) is not "
                     f"this run's ({show(current)}); resume with the checkpoint's flags.")
  if normalizer is not None:
    normalizer.restore(arrays)
