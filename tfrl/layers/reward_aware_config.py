"""`RewardAwareConfig`: the thresholds of GST's reward-aware rule (the rule is
`tfrl.layers.gst.RewardAwareController`'s). Its own module, free of TensorFlow,
so that the entry points parse and check their flags before importing it."""

import dataclasses

from tfrl.layers import spec as spec_lib


@dataclasses.dataclass(frozen=True)
class RewardAwareConfig:
  """Thresholds of the reward-aware rule (see module docstring)."""

  initial_sparsity: float = 0.0
  min_sparsity: float = 0.0
  max_sparsity: float = 0.9
  window: int = 10
  tolerance: float = 0.05
  backoff: float = 0.2
  step_up: float = 0.05
  step_down: float = 0.1
  reward_scale: float = 1.0
  distribution: str = "uniform"

  def __post_init__(self):
    if self.distribution not in spec_lib.DISTRIBUTIONS:
      raise ValueError(f"RewardAwareConfig.distribution must be one of "
                       f"{spec_lib.DISTRIBUTIONS}, got {self.distribution!r}.")
    for f in ("initial_sparsity", "min_sparsity", "max_sparsity"):
      if not 0.0 <= getattr(self, f) < 1.0:
        raise ValueError(f"RewardAwareConfig.{f} must be in [0, 1), got {getattr(self, f)!r}.")
    if not self.min_sparsity <= self.initial_sparsity <= self.max_sparsity:
      raise ValueError("RewardAwareConfig needs min_sparsity <= initial_sparsity <= max_sparsity.")
    if self.window < 1:
      raise ValueError(f"RewardAwareConfig.window must be >= 1, got {self.window}.")
    for f in ("tolerance", "backoff", "step_up", "step_down", "reward_scale"):
      if getattr(self, f) < 0:
        raise ValueError(f"RewardAwareConfig.{f} must be >= 0, got {getattr(self, f)!r}.")
    if self.backoff < self.tolerance:
      raise ValueError("RewardAwareConfig needs backoff >= tolerance.")
