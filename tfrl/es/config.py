"""`ESConfig` and `VBNConfig`: the settings of ES and of its virtual batch
norm, free of TensorFlow so that `python -m tfrl.es` checks its flags before
importing it; `tfrl.es.evolution_strategy` and `tfrl.es.virtual_batch_norm`
run them."""

import dataclasses
from typing import Optional

from tfrl import flagconfig
from tfrl.neuroevolution import settings


@dataclasses.dataclass(frozen=True)
class VBNConfig:
  """Virtual batch norm settings.

  Attributes:
    reference_size: observations in the reference batch.
    keep_probability: random-action play keeps each observation of each env
      slot with this probability, so that the batch spreads over episodes
      rather than holding only their first frames (OpenAI-ES kept frames of
      random play with probability 0.01).
    epsilon: added to the variance.
    max_rows: rows (networks x reference_size) per statistics call; bounds
      the memory of the statistics pass.
  """

  reference_size: int = flagconfig.field(
      128, "Observations in the virtual batch norm reference batch.")
  keep_probability: float = 0.01
  epsilon: float = 1e-5
  max_rows: int = 512

  def __post_init__(self):
    if isinstance(self.reference_size, bool) or int(self.reference_size) < 2:
      raise ValueError(f"--vbn_reference_size must be >= 2, got {self.reference_size!r}.")
    if not 0.0 < self.keep_probability <= 1.0:
      raise ValueError(
          f"VBN keep_probability must be in (0, 1], got {self.keep_probability!r}.")
    if self.epsilon <= 0:
      raise ValueError(f"VBN epsilon must be > 0, got {self.epsilon!r}.")
    if self.max_rows < 1:
      raise ValueError(f"VBN max_rows must be >= 1, got {self.max_rows!r}.")


@dataclasses.dataclass(frozen=True)
class ESConfig(settings.SearchConfig):
  """ES's settings (and `population`, `seed`, `episodes_per_eval` of
  `SearchConfig`: here evaluations per generation, pairs = population / 2);
  those made with `flagconfig.field` are flags of `tfrl.es`."""
  sigma: float = flagconfig.field(0.02, "Perturbation scale.")
  learning_rate: float = flagconfig.field(0.01, "Adam step size.")
  l2: float = flagconfig.field(0.005, "L2 weight decay coefficient.")
  center_episodes: int = flagconfig.field(
      5, "Episodes of the centre's evaluation (elite score).")
  fitness_shaping: bool = flagconfig.field(
      True, "Centered ranks instead of raw returns.")
  vbn: Optional[VBNConfig] = None  # virtual batch norm (None: off)

  def __post_init__(self):
    if self.population < 2 or self.population % 2:
      raise ValueError(f"ES population must be even (mirrored sampling) and >= 2, got "
                       f"{self.population}.")
    if self.sigma <= 0 or self.learning_rate <= 0 or self.l2 < 0:
      raise ValueError("ES needs sigma > 0, learning_rate > 0, l2 >= 0.")
    if self.episodes_per_eval < 1 or self.center_episodes < 1:
      raise ValueError("episodes_per_eval and center_episodes must be >= 1.")
    if self.vbn is not None and not isinstance(self.vbn, VBNConfig):
      raise ValueError(f"ESConfig.vbn must be a VBNConfig or None, got {self.vbn!r}.")
