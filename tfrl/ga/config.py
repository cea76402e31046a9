"""`GAConfig`: the GA's settings (random search's too), free of TensorFlow so
that `python -m tfrl.ga` and `tfrl.random_search` check their flags before
importing it; `tfrl.ga.genetic_algorithm` runs them."""

import dataclasses

from tfrl import flagconfig
from tfrl.neuroevolution import settings

# The GA's settings that random search (no selection) does not have.
SELECTION_FIELDS = ("truncation", "mutation_power")


@dataclasses.dataclass(frozen=True)
class GAConfig(settings.SearchConfig):
  """The GA's settings (and `population`, `seed`, `episodes_per_eval` of
  `SearchConfig`); those made with `flagconfig.field` are flags of the same
  names (`tfrl.ga`, and `tfrl.random_search` but for SELECTION_FIELDS)."""
  truncation: int = flagconfig.field(10, "Parents: the top T individuals.")
  mutation_power: float = flagconfig.field(0.005, "sigma of a mutation.")
  elite_candidates: int = flagconfig.field(
      5, "Top individuals re-evaluated for the elite.")
  elite_episodes: int = flagconfig.field(
      5, "Episodes of each elite candidate's re-evaluation.")
  overlap_elite: bool = flagconfig.field(
      True, "Play the elite candidates' re-evaluation in one call with the next "
      "generation's population, whose episodes fill the slots the candidates leave "
      "idle (the same results; without observation normalization, locally).")
  random_search: bool = False

  def capacity(self) -> int:
    """Networks an evaluation call may hold: with overlap_elite, the population
    and the elite candidates (and the last elite) together."""
    overlap = self.overlap_elite and not self.normalization.enabled
    return self.population + (self.elite_candidates + 1 if overlap else 0)

  def __post_init__(self):
    if self.population < 2:
      raise ValueError(f"population must be >= 2, got {self.population}.")
    if not 1 <= self.truncation <= self.population:
      raise ValueError(f"truncation must be in [1, population={self.population}], "
                       f"got {self.truncation}.")
    if not 1 <= self.elite_candidates <= self.population:
      raise ValueError(f"elite_candidates must be in [1, population], got "
                       f"{self.elite_candidates}.")
    if self.mutation_power <= 0:
      raise ValueError(f"mutation_power must be > 0, got {self.mutation_power}.")
    if self.elite_episodes < 1 or self.episodes_per_eval < 1:
      raise ValueError("elite_episodes and episodes_per_eval must be >= 1.")

  @classmethod
  def from_flag_values(cls, values, defaults):
    """The flags' GAConfig: --truncation and --elite_candidates above
    --population mean the whole population; random search has no selection."""
    del defaults
    values = dict(values)
    population = values.get("population", cls.population)
    if values.get("random_search"):
      values["truncation"] = 1
    for name in ("truncation", "elite_candidates"):
      if name in values:
        values[name] = min(values[name], population)
    return cls(**values)
