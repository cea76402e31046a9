"""Typed TD3 configuration; the entry point generates its flags from it
(`tfrl/flagconfig.py`: a flag per field, with the field's default and help)."""

import dataclasses
from typing import Any, Tuple

from tfrl import flagconfig
from tfrl import precision_choices
from tfrl.envs.protocol import EnvProtocol

PRECISIONS = precision_choices.CHOICES


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Where a TD3 run writes, and whether it resumes (flags of the same names)."""

  logdir: str = flagconfig.field("/tmp/tfrl_td3",
                                 "Checkpoints, TensorBoard, summary, export.")
  resume: bool = flagconfig.field(False, "Resume from the latest checkpoint in --logdir.")
  resume_without_replay: bool = flagconfig.field(
      False, "With --resume: accept a checkpoint whose replay buffer is missing and "
      "start with an empty buffer (else such a resume is refused).")
  export: bool = flagconfig.field(True, "Export SavedModel policies (live and compressed).")


@dataclasses.dataclass(frozen=True)
class TD3Config:
  """Everything a TD3 run needs; the hyper-parameters' defaults are Fujimoto et
  al. (2018) / their repo.

  Attributes:
    protocol: the env protocol (`tfrl.envs.EnvProtocol`, its flags --env,
      --max_episode_frames, ...): a gymnasium id of a continuous-control (Box
      action) environment.
    total_steps: environment steps of the whole run.
    start_steps: initial steps with uniformly random actions (no updates).
    batch_size, replay_size: replay sampling.
    hidden_sizes: actor and critic MLP widths.
    discount, tau: return discount and target-network Polyak rate.
    policy_noise, noise_clip: target policy smoothing (times the action scale).
    policy_delay: actor (and target) update every `policy_delay` critic updates.
    exploration_noise: Gaussian action noise std (times the action scale).
    actor_lr, critic_lr: Adam learning rates.
    update_every: env steps per training phase: those env steps, then as many
      updates (ratio 1), run in one tf.function call (`tfrl/td3/phase.py`).
    eval_every, eval_episodes: deterministic evaluation schedule (0 = never).
    checkpoint_every, log_every: in env steps.
    seed: seeds the initial weights, the environment's episodes and the
      training phases' random streams (exploration, sampling, smoothing).
    jit_compile: compile a training phase's updates with XLA (its env steps
      stay outside: the env ops have no XLA kernels). XLA fuses the many
      small mask / FFT / optimizer ops, but its CPU matmuls were slower than
      oneDNN's (30 vs 5.6 ms per 256x256 dense TD3 update, measured when
      this flag was added); off. `benchmarks/td3_throughput.py --jit_row`
      compares the two.
    precision: the networks' compute dtype (`tfrl.precision`): `float32`,
      `bfloat16` (matmuls in bfloat16; weights, losses, Adam and the targets'
      averages stay float32) or `auto` (float32 for these MLPs).
    run: where the run writes and whether it resumes (`RunSettings`).
    layer_plan: the layer variants (a `tfrl.layers` LayerSpec or LayerPlan;
      None: dense), set from the layer flags.
    reward_aware: the GST controller's `RewardAwareConfig` (None: its
      defaults), set from the layer flags.
  """

  protocol: EnvProtocol = flagconfig.nested(EnvProtocol, defaults={"env": "Pendulum-v1"})
  total_steps: int = flagconfig.field(100_000, "Environment steps.")
  start_steps: int = flagconfig.field(10_000, "Initial random-action steps.")
  batch_size: int = flagconfig.field(256, "Batch size.")
  replay_size: int = flagconfig.field(1_000_000, "Replay capacity.")
  hidden_sizes: Tuple[int, ...] = flagconfig.field((256, 256), "MLP widths.")
  discount: float = flagconfig.field(0.99, "Discount.")
  tau: float = flagconfig.field(0.005, "Target Polyak rate.")
  policy_noise: float = flagconfig.field(0.2, "Target smoothing noise std.")
  noise_clip: float = flagconfig.field(0.5, "Target smoothing noise clip.")
  policy_delay: int = flagconfig.field(2, "Critic updates per actor update.")
  exploration_noise: float = flagconfig.field(0.1, "Action noise std.")
  actor_lr: float = flagconfig.field(3e-4, "Actor Adam learning rate.")
  critic_lr: float = flagconfig.field(3e-4, "Critic Adam learning rate.")
  update_every: int = flagconfig.field(50, "Env steps per training phase.")
  eval_every: int = flagconfig.field(10_000, "Env steps between evaluations.")
  eval_episodes: int = flagconfig.field(5, "Episodes per evaluation.")
  checkpoint_every: int = flagconfig.field(10_000, "Env steps per checkpoint.")
  log_every: int = flagconfig.field(1000, "Env steps per log line.")
  seed: int = flagconfig.field(0, "Random seed.")
  jit_compile: bool = flagconfig.field(False, "Compile the training phases' updates with "
                                       "XLA.")
  precision: str = flagconfig.field(
      "float32", "Networks' compute dtype: float32, bfloat16 (matmuls in bfloat16, "
      "float32 weights, losses and optimizer) or auto (float32 for TD3's MLPs).")
  run: RunSettings = flagconfig.nested(RunSettings)
  layer_plan: Any = None
  reward_aware: Any = None

  def __post_init__(self):
    if self.protocol.is_atari:
      raise ValueError(f"TD3 needs a gymnasium env id with a continuous action space "
                       f"(--env), not an Atari game (--game={self.protocol.game}).")
    positive = ("total_steps", "batch_size", "replay_size", "policy_delay", "update_every",
                "checkpoint_every", "log_every", "eval_episodes")
    for name in positive:
      if getattr(self, name) < 1:
        raise ValueError(f"TD3Config.{name} must be >= 1, got {getattr(self, name)!r}.")
    if self.start_steps < 0 or self.eval_every < 0:
      raise ValueError("TD3Config.start_steps and eval_every must be >= 0.")
    if not self.hidden_sizes or any(h < 1 for h in self.hidden_sizes):
      raise ValueError(f"TD3Config.hidden_sizes must be positive, got {self.hidden_sizes!r}.")
    if not 0.0 <= self.discount <= 1.0 or not 0.0 < self.tau <= 1.0:
      raise ValueError("TD3Config needs 0 <= discount <= 1 and 0 < tau <= 1.")
    for name in ("policy_noise", "noise_clip", "exploration_noise"):
      if getattr(self, name) < 0:
        raise ValueError(f"TD3Config.{name} must be >= 0.")
    if self.precision not in PRECISIONS:
      raise ValueError(f"TD3Config.precision must be one of {', '.join(PRECISIONS)}, "
                       f"got {self.precision!r}.")
    if self.actor_lr <= 0 or self.critic_lr <= 0:
      raise ValueError("TD3Config learning rates must be > 0.")
