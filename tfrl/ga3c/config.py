"""Typed configuration of a GA3C run (built from flags in `__main__`)."""

import dataclasses
from typing import Any, Optional, Tuple


@dataclasses.dataclass
class GA3CConfig:
  """Everything a GA3C run needs; library code reads this, never FLAGS.

  Defaults follow the GA3C paper (Babaeizadeh et al., ICLR 2017) and its
  reference code: t_max 5, RMSProp lr 3e-4 / decay 0.99 / epsilon 0.1,
  entropy beta 0.01, log epsilon 1e-6, rewards clipped to [-1, 1], losses
  summed over the batch.
  """
  # Environment.
  game: Optional[str] = "PongNoFrameskip-v4"  # Atari game (AtariEnv).
  env: Optional[str] = None                  # Any gymnasium id (GymEnv).
  seed: int = 0
  envs_per_agent: int = 1
  frame_skip: int = 4
  episodic_life: bool = False
  repeat_action_probability: float = 0.0

  # Machinery.
  agents: int = 16
  predictors: int = 1
  trainers: int = 1
  max_agents: int = 32
  max_predictors: int = 4
  max_trainers: int = 4
  dynamic_adjustment: bool = False
  adjustment_period: float = 10.0           # Seconds per hill-climbing trial.
  prediction_batch_size: int = 128
  training_min_batch_size: int = 0          # Samples; 0 = one segment.
  training_max_batch_size: int = 0          # Samples; 0 = 4x the minimum.
  prediction_queue_size: int = 128
  training_queue_size: int = 64

  # Learner.
  t_max: int = 5
  discount: float = 0.99
  learning_rate: float = 3e-4
  rmsprop_decay: float = 0.99
  rmsprop_epsilon: float = 0.1
  entropy_beta: float = 0.01
  value_coef: float = 0.5
  log_epsilon: float = 1e-6
  reward_clip: float = 1.0                  # 0 disables clipping.
  loss_reduction: str = "sum"               # "sum" (paper) or "mean".
  grad_clip_norm: float = 0.0               # 0 disables clipping.
  hidden_sizes: Tuple[int, ...] = (64, 64)  # MLP torso for non-image envs.
  layer_plan: Any = None                    # tfrl.layers LayerPlan or None.
  # tfrl.layers.RewardAwareConfig for the `reward_aware` layers (GST's pruned
  # ones); None: its defaults.
  reward_aware: Any = None

  # Run.
  logdir: str = "/tmp/tfrl_ga3c"
  max_frames: int = 0                       # 0 = until stopped.
  max_seconds: float = 0.0                  # 0 = no wall-clock limit.
  checkpoint_every: float = 600.0           # Seconds.
  resume: bool = False
  profile_steps: Optional[Tuple[int, int]] = None  # Training steps.
  stats_every: float = 5.0                  # Seconds between console lines.
  score_window: int = 100                   # Episodes in the rolling score.
  target_score: Optional[float] = None      # Stop once the rolling score >= it.

  def __post_init__(self):
    if (self.game is None) == (self.env is None):
      raise ValueError("Set exactly one of `game` (Atari) or `env` (gymnasium).")
    for name in ("agents", "predictors", "trainers", "envs_per_agent", "t_max",
                 "prediction_batch_size", "prediction_queue_size",
                 "training_queue_size", "max_agents", "max_predictors",
                 "max_trainers"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
    self.max_agents = max(self.max_agents, self.agents)
    self.max_predictors = max(self.max_predictors, self.predictors)
    self.max_trainers = max(self.max_trainers, self.trainers)
    if self.loss_reduction not in ("sum", "mean"):
      raise ValueError(
          f"loss_reduction must be 'sum' or 'mean', got {self.loss_reduction!r}.")
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}.")
    if self.profile_steps is not None:
      start, end = self.profile_steps
      if not 0 <= start < end:
        raise ValueError(
            f"profile_steps must be START,END with 0 <= START < END, got "
            f"{self.profile_steps}.")

  @property
  def num_env_slots(self) -> int:
    return self.max_agents * self.envs_per_agent

  @property
  def segments_per_min_batch(self) -> int:
    samples = self.training_min_batch_size or self.t_max
    return max(1, -(-samples // self.t_max))

  @property
  def segments_per_max_batch(self) -> int:
    samples = self.training_max_batch_size or 0
    n = -(-samples // self.t_max) if samples else 0
    return max(n, 4 * self.segments_per_min_batch)
