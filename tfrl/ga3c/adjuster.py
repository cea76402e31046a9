"""Run-time balancing of agents / predictors / trainers (GA3C, section 4.2).

Hill climbing on the training rate: measure the current setting for one
period, try a random +-1 change of one of (agents, predictors, trainers) for
the next period, keep it if the training rate went up, revert otherwise, and
repeat. Pure Python, so the policy is testable without threads.
"""

import dataclasses
import random
from typing import Optional, Tuple

Counts = Tuple[int, int, int]  # (agents, predictors, trainers)
NAMES = ("agents", "predictors", "trainers")


@dataclasses.dataclass
class Bounds:
  max_agents: int
  max_predictors: int
  max_trainers: int

  def clip(self, counts: Counts) -> Counts:
    maxima = (self.max_agents, self.max_predictors, self.max_trainers)
    return tuple(min(max(1, c), m) for c, m in zip(counts, maxima))


class DynamicAdjuster:
  """Proposes (agents, predictors, trainers) from measured training rates.

  Usage, once per period:

    counts = adjuster.update(trainings_per_second)   # apply counts
  """

  def __init__(self, initial: Counts, bounds: Bounds, seed: int = 0):
    self.bounds = bounds
    self.current: Counts = bounds.clip(tuple(initial))
    self._trial: Optional[Counts] = None
    self._baseline: Optional[float] = None
    self._rng = random.Random(seed)

  def _propose(self) -> Counts:
    for _ in range(20):
      which = self._rng.randrange(3)
      delta = self._rng.choice((-1, 1))
      trial = list(self.current)
      trial[which] += delta
      trial = self.bounds.clip(tuple(trial))
      if trial != self.current:
        return trial
    return self.current

  def update(self, rate: float) -> Counts:
    """Takes the rate measured with the last returned counts; returns the next."""
    if self._trial is None:
      self._baseline = rate
      self._trial = self._propose()
      return self._trial
    if rate > self._baseline:
      self.current = self._trial
    self._trial = None
    return self.current
