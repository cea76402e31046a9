"""What GA, ES and random search share: a search over the genomes of the
shared noise table, one generation per `step`, its networks played by an
`evaluators.Evaluator`.

`Search` holds the run's counters (`generation`, `frames`, `elite_score`),
the observation normalizer (`--obs_norm`, normalization.py) and the part of
the checkpoint state every algorithm has, with the checks a restore makes of
it. An algorithm adds its generation (`step`), its elite (`elite_params`) and
its own state (`_own_state`, `_restore_own`).
"""

import abc
import dataclasses
from typing import Any, Dict, Optional, Tuple

import numpy as np

from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import normalization
from tfrl.neuroevolution import settings


class Search(abc.ABC):
  """A GA, ES or random search over `evaluator`.

  Usage (the run skeleton's, through `runner.Generations`):
    search = GeneticAlgorithm(config, layout, table, evaluator)
    for _ in range(generations):
      metrics = search.step()

  `genome_layout` is the searched genome; `layout` and `elite_params()`
  describe the exported elite (with observation normalization, a
  `normalization.NormalizedInputLayout` and the genome followed by the
  observations' mean and std).
  """

  name: str
  # The config class the search runs (GAConfig, ESConfig).
  config_type: type = settings.SearchConfig

  def __init__(self, config: settings.SearchConfig, layout, table,
               evaluator: evaluators.Evaluator):
    if evaluator.capacity < config.population:
      raise ValueError(f"evaluator capacity {evaluator.capacity} < population "
                       f"{config.population}.")
    self.config = config
    self.genome_layout = layout
    self.normalizer: Optional[normalization.Normalizer] = None
    if config.normalization.enabled:
      self.normalizer = normalization.Normalizer(config.normalization,
                                                 layout.observation_shape)
    self.layout = self.normalizer.export_layout(layout) if self.normalizer else layout
    self.table = table
    self.evaluator = evaluator
    self.generation = 0
    self.frames = 0
    self.elite_score = -np.inf

  @abc.abstractmethod
  def step(self) -> Dict[str, float]:
    """Runs one generation; returns its metrics."""

  @abc.abstractmethod
  def elite_params(self) -> np.ndarray:
    """The exported elite's flat vector (see `layout`)."""

  @abc.abstractmethod
  def _own_state(self) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """The algorithm's part of the checkpoint: JSON entries and arrays."""

  @abc.abstractmethod
  def _restore_own(self, state: dict, arrays) -> None:
    """Checks and restores the algorithm's part of a checkpoint."""

  def _seeds(self, phase: int, count: int, episodes: int) -> np.ndarray:
    """The episode seeds of one evaluation call of this generation."""
    return evaluators.episode_seeds(self.config.seed, self.generation, phase, count,
                                    episodes)

  def _observing(self, seeds: np.ndarray) -> Dict[str, Any]:
    """The `evaluate` arguments of the call whose episodes update the
    observation statistics (none without normalization); the generation's
    calls play with the statistics fixed here."""
    if self.normalizer is None:
      return {}
    self.normalizer.begin(self.evaluator)
    return {"observe": self.normalizer.observe(seeds)}

  def state(self) -> Tuple[Dict[str, Any], Optional[Dict[str, np.ndarray]]]:
    """The checkpoint: JSON state and arrays (None if it has none)."""
    norm = self.normalizer
    own, arrays = self._own_state()
    state = {
        "algorithm": self.name,
        "generation": self.generation,
        "frames": self.frames,
        "config": dataclasses.asdict(self.config),
        "noise_seed": self.table.seed,
        "noise_size": self.table.size,
        "param_dim": self.genome_layout.dim,
        "elite_score": self.elite_score,
        "observation_normalization": norm.config.identity() if norm else None,
        **own,
    }
    if norm is not None:
      arrays = {**arrays, **norm.arrays()}
    return state, arrays or None

  def restore(self, state: dict, arrays=None) -> None:
    """Restores a checkpoint of `state()`, after checking it is this search's."""
    if state.get("algorithm") != self.name:
      raise ValueError(f"checkpoint is for {state.get('algorithm')!r}, not {self.name!r}.")
    saved = (state["noise_seed"], state["noise_size"], state["param_dim"])
    here = (self.table.seed, self.table.size, self.genome_layout.dim)
    if saved != here:
      raise ValueError(f"checkpoint noise table / network do not match this run: "
                       f"(seed, size, D) = {saved} vs {here}.")
    normalization.check_resume(state.get("observation_normalization"), self.normalizer,
                               arrays)
    self._restore_own(state, arrays)
    self.generation = int(state["generation"])
    self.frames = int(state["frames"])
    self.elite_score = float(state["elite_score"])
