"""OpenAI-ES (Salimans et al. 2017) on the batched population networks.

Each generation samples `population / 2` noise offsets e_i from the shared
table and evaluates the mirrored pairs theta +- sigma * e_i in one batch. The
returns are replaced by centered ranks in [-0.5, 0.5] (fitness shaping), the
gradient estimate is

    g = sum_i (F(theta + sigma e_i) - F(theta - sigma e_i)) e_i / (2 n sigma),

and Adam ascends it with L2 weight decay (theta <- theta + Adam(g - l2 theta)).
The centre is evaluated on `center_episodes` episodes and is the elite.

Optional virtual batch norm (`ESConfig.vbn`, see `virtual_batch_norm.py`): a
reference batch of observations from random play is collected once, before the
first generation (and kept in the checkpoint); every evaluated network, each
perturbation and the centre, is normalized by its own statistics on that
batch. The exported elite is the centre with its statistics baked in.

Optional observation normalization (`--obs_norm`,
`tfrl/neuroevolution/normalization.py`): the perturbations and the centre of a
generation play with the statistics fixed at its start; a fraction of the
perturbations' episodes update them after the centre's evaluation. The
exported elite is the centre with the statistics it was scored with.
"""

import time
from typing import Dict, Optional

import numpy as np

from tfrl.es import virtual_batch_norm as vbn_lib
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import search
from tfrl.neuroevolution import timing
from tfrl.neuroevolution.metrics import generation_metrics
from tfrl.neuroevolution.metrics import rankable
from tfrl.es.config import ESConfig

# The evaluation calls of a generation, for `evaluators.episode_seeds`.
PERTURBATION_PHASE, CENTER_PHASE = 0, 1
_CENTER = genome_lib.Genome(genome_lib.CENTER)


def centered_ranks(x: np.ndarray) -> np.ndarray:
  """Ranks of x scaled to [-0.5, 0.5] (ties broken by position; NaN ranks last)."""
  x = rankable(np.asarray(x).ravel())
  ranks = np.empty(len(x), np.float64)
  ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
  if len(x) > 1:
    ranks /= len(x) - 1
  return ranks - 0.5


def worst_for_nan(fitness: np.ndarray) -> np.ndarray:
  """Raw returns with NaN replaced by the generation's lowest return (0 if all
  are NaN), so that unshaped fitness ranks them last without a NaN gradient."""
  fitness = np.asarray(fitness, np.float64)
  nan = np.isnan(fitness)
  if not nan.any():
    return fitness
  return np.where(nan, fitness[~nan].min() if (~nan).any() else 0.0, fitness)


def estimate_gradient(noise: np.ndarray, f_plus: np.ndarray, f_minus: np.ndarray,
                      sigma: float) -> np.ndarray:
  """Mirrored-sampling gradient estimate of E[F(theta + sigma e)].

  Args:
    noise: [n, D] the perturbation directions e_i.
    f_plus, f_minus: [n] fitness (or shaped fitness) of theta +- sigma e_i.
    sigma: the perturbation scale.
  """
  weights = (np.asarray(f_plus, np.float64) - np.asarray(f_minus, np.float64))
  return (weights @ np.asarray(noise, np.float64)) / (2.0 * len(weights) * sigma)


class Adam:
  """Adam (Kingma & Ba 2015) on a flat numpy vector, as an ascent step."""

  def __init__(self, dim: int, learning_rate: float, beta1=0.9, beta2=0.999, eps=1e-8):
    self.learning_rate, self.beta1, self.beta2, self.eps = learning_rate, beta1, beta2, eps
    self.m = np.zeros(dim, np.float32)
    self.v = np.zeros(dim, np.float32)
    self.t = 0

  def ascent(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
    self.t += 1
    g = grad.astype(np.float32)
    self.m = self.beta1 * self.m + (1 - self.beta1) * g
    self.v = self.beta2 * self.v + (1 - self.beta2) * g * g
    a = self.learning_rate * np.sqrt(1 - self.beta2 ** self.t) / (1 - self.beta1 ** self.t)
    return (theta + a * self.m / (np.sqrt(self.v) + self.eps)).astype(np.float32)


class EvolutionStrategy(search.Search):
  """OpenAI-ES over an `evaluators.Evaluator` (`search.Search`).

  With VBN, `layout` is a `virtual_batch_norm.NormalizedLayout` and `elite_params()` the
  centre followed by its statistics; else the centre (with observation
  normalization, followed by the observations' mean and std).
  """

  name = "es"
  config_type = ESConfig

  def __init__(self, config: ESConfig, layout, table, evaluator: evaluators.Evaluator):
    if config.vbn is not None and config.normalization.enabled:
      raise ValueError("virtual batch norm normalizes raw observations: not with --obs_norm.")
    if config.vbn is not None and not isinstance(evaluator, evaluators.LocalEvaluator):
      raise ValueError("virtual batch norm needs the local evaluator (it is not "
                       "supported on Ray workers yet).")
    super().__init__(config, layout, table, evaluator)
    if config.vbn is not None:
      self.layout = vbn_lib.NormalizedLayout(layout)
    rng = np.random.default_rng([config.seed, 0, 0])
    init = int(table.sample_offsets(rng, layout.dim, 1)[0])
    self.theta = (layout.init_scale * table.get(init, layout.dim)).astype(np.float32)
    self.adam = Adam(layout.dim, config.learning_rate)
    self.vbn: Optional[vbn_lib.VirtualBatchNorm] = None  # built on the first step
    self._elite_stats: Optional[np.ndarray] = None

  def _ensure_reference(self) -> None:
    """Collects the VBN reference batch by random play (once per run)."""
    if self.config.vbn is None or self.vbn is not None:
      return
    cfg = self.config.vbn
    rng = np.random.default_rng([self.config.seed, 0, 2])
    reference = vbn_lib.collect_reference_batch(self.evaluator.env, cfg.reference_size,
                                                rng, cfg.keep_probability)
    self._set_reference(reference)

  def _set_reference(self, reference: np.ndarray) -> None:
    self.vbn = vbn_lib.VirtualBatchNorm(self.evaluator.network, reference,
                                        self.config.vbn)
    self.evaluator.normalizer = self.vbn

  def step(self) -> Dict[str, float]:
    cfg = self.config
    start = time.time()
    breakdown = timing.Breakdown()
    self._ensure_reference()
    pairs = cfg.population // 2
    rng = np.random.default_rng([cfg.seed, self.generation + 1, 1])
    dim = self.genome_layout.dim
    offsets = self.table.sample_offsets(rng, dim, pairs)
    noise = np.stack([self.table.get(int(o), dim) for o in offsets])
    # theta +- sigma e_i as chains rooted at the centre, mirrored pairs side by side.
    genomes = [genome_lib.Genome(genome_lib.CENTER, ((int(o), sign * cfg.sigma),))
               for o in offsets for sign in (1.0, -1.0)]
    self.evaluator.set_center(self.theta)
    seeds = self._seeds(PERTURBATION_PHASE, cfg.population, cfg.episodes_per_eval)
    res = breakdown.evaluate("eval", self.evaluator, genomes, cfg.episodes_per_eval, seeds,
                             **self._observing(seeds))
    fitness = res.fitness
    shaped = centered_ranks(fitness) if cfg.fitness_shaping else worst_for_nan(fitness)
    grad = estimate_gradient(noise, shaped[0::2], shaped[1::2], cfg.sigma)
    self.theta = self.adam.ascent(self.theta, grad - cfg.l2 * self.theta)

    self.evaluator.set_center(self.theta)
    center = breakdown.evaluate("elite", self.evaluator, [_CENTER], cfg.center_episodes,
                                self._seeds(CENTER_PHASE, 1, cfg.center_episodes))
    self._elite_stats = self._center_statistics()
    self.elite_score = float(center.fitness[0])
    if self.normalizer is not None:
      self.normalizer.end(res)
    metrics = generation_metrics(self, fitness, res.frames + center.frames, start,
                                 res.seconds + center.seconds)
    metrics["grad_norm"] = float(np.linalg.norm(grad))
    metrics.update(breakdown.step_metrics())
    return metrics

  def elite_params(self) -> np.ndarray:
    """The exported elite's flat vector (see `layout`)."""
    if self.normalizer is not None:
      return self.normalizer.export_params(self.theta)
    if self.config.vbn is None:
      return self.theta.copy()
    if self._elite_stats is None:  # e.g. just restored: recompute for the centre.
      self._ensure_reference()
      self.evaluator.set_center(self.theta)
      self.evaluator.load([_CENTER])
      self._elite_stats = self._center_statistics()
    return np.concatenate([self.theta, self._elite_stats])

  def _center_statistics(self) -> Optional[np.ndarray]:
    """The VBN statistics of the centre, just loaded (None without VBN)."""
    if self.vbn is None:
      return None
    return self.evaluator.last_statistics[0]

  def _own_state(self):
    arrays = {"theta": self.theta, "adam_m": self.adam.m, "adam_v": self.adam.v}
    if self.vbn is not None:
      arrays["vbn_reference"] = self.vbn.reference
    return {"adam_t": self.adam.t, "virtual_batch_norm": self.vbn is not None}, arrays

  def _restore_own(self, state: dict, arrays) -> None:
    dim = self.genome_layout.dim
    if arrays["theta"].shape != (dim,):
      raise ValueError(f"checkpoint parameter dimension {arrays['theta'].shape} does not "
                       f"match the network's {dim}.")
    saved_vbn = "vbn_reference" in arrays
    if saved_vbn != (self.config.vbn is not None):
      raise ValueError(
          f"checkpoint was trained {'with' if saved_vbn else 'without'} virtual batch "
          f"norm; resume it {'with' if saved_vbn else 'without'} --virtual_batch_norm.")
    self.theta = arrays["theta"].astype(np.float32)
    self.adam.m = arrays["adam_m"].astype(np.float32)
    self.adam.v = arrays["adam_v"].astype(np.float32)
    self.adam.t = int(state["adam_t"])
    self._elite_stats = None
    if saved_vbn:
      self._set_reference(arrays["vbn_reference"])
