"""Typed configuration of a GA3C run; `__main__` generates its flags from it.

Each field made with `flagconfig.field` is a flag of the same name, with the
field's default and help (`tfrl/flagconfig.py`), and so is each field of the
env protocol and of the learner's config; the other fields (the layer plan)
are set by code.
"""

import dataclasses
from typing import Any, Optional, Tuple

from tfrl import flagconfig
from tfrl import precision_choices
from tfrl import ray_cluster
from tfrl.envs.protocol import EnvProtocol

LOSSES = ("a3c", "vtrace", "appo")          # tfrl/ga3c/losses.py's
LOSS_REDUCTIONS = ("sum", "mean")
APPO_ANCHORS = ("learner", "behaviour")
VTRACE_TARGETS = ("step", "batch")
OPTIMIZERS = ("rmsprop", "adam")
LR_SCHEDULES = ("constant", "linear")
INITS = ("glorot", "orthogonal")
# --torso's values: tfrl.networks.CONV_TORSOS' keys (image observations).
TORSOS = ("atari", "nature")

PRECISIONS = precision_choices.CHOICES


@dataclasses.dataclass
class LearnerConfig:
  """The learner's loss and its settings (tfrl/ga3c/learner.py): a GA3C run's
  `learner`, each field a flag of the same name."""
  loss: str = flagconfig.field(
      "a3c", "<a3c|vtrace|appo>: a3c: the paper's n-step A3C loss. vtrace: IMPALA's "
      "V-trace targets, correcting the lag between the policy that acted and the learner's. "
      "appo: PPO's clipped surrogate on V-trace targets, --epochs passes over each batch.",
      choices=LOSSES)
  discount: float = flagconfig.field(
      0.99, "Discount gamma.")
  entropy_beta: float = flagconfig.field(
      0.01, "Weight of the entropy bonus.")
  value_coef: float = flagconfig.field(
      0.5, "Weight of the squared value error.")
  log_epsilon: float = flagconfig.field(
      1e-6, "Probabilities are clipped below at this inside logs (policy-lag "
      "guard).")
  reward_clip: float = flagconfig.field(
      1.0, "Clip training rewards to [-c, c]; 0 disables.")
  loss_reduction: str = flagconfig.field(
      "sum", "<sum|mean>: Sum (GA3C) or average the loss over the samples of a "
      "batch.", choices=LOSS_REDUCTIONS)
  grad_clip_norm: float = flagconfig.field(
      0.0, "Clip gradients to this global norm; 0 disables.")
  vtrace_lambda: float = flagconfig.field(
      1.0, "V-trace's lambda in [0, 1] (vtrace, appo): 1 is IMPALA's V-trace; below 1 the "
      "traces are cut like GAE(lambda)'s.")
  clip_rho: float = flagconfig.field(
      1.0, "V-trace's truncation of the importance weights in the targets and the policy "
      "gradient (IMPALA: 1).")
  clip_c: float = flagconfig.field(
      1.0, "V-trace's truncation of the trace coefficients c_t (IMPALA: 1).")
  ppo_clip: float = flagconfig.field(
      0.1, "appo: the clipped surrogate's epsilon.")
  appo_anchor: str = flagconfig.field(
      "learner", "<learner|behaviour>: appo's clip range is centred on the learner's policy "
      "when the batch arrives (V-trace's weights carry the lag) or on the behaviour policy "
      "that acted.", choices=APPO_ANCHORS)
  vtrace_targets: str = flagconfig.field(
      "step", "<step|batch>: vtrace's and appo's targets and advantages, computed under "
      "the network at every gradient step (RLlib's APPO) or once when the batch arrives "
      "and held through its epochs (as PPO's GAE).", choices=VTRACE_TARGETS)
  epochs: int = flagconfig.field(
      1, "Passes over each training batch (appo, vtrace; a3c: 1).")
  minibatches: int = flagconfig.field(
      1, "Minibatches of whole segments per pass (appo, vtrace; a3c: 1).")
  normalize_advantages: bool = flagconfig.field(
      False, "Normalize the advantages of each minibatch to mean 0, std 1 (vtrace, appo).")

  def __post_init__(self):
    for name, allowed in (("loss", LOSSES), ("loss_reduction", LOSS_REDUCTIONS),
                          ("appo_anchor", APPO_ANCHORS), ("vtrace_targets", VTRACE_TARGETS)):
      if getattr(self, name) not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got "
                         f"{getattr(self, name)!r}.")
    for name in ("epochs", "minibatches"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
    if self.loss == "a3c" and (self.epochs, self.minibatches) != (1, 1):
      raise ValueError("--loss=a3c takes one pass over each batch: --epochs and "
                       "--minibatches must be 1 (--loss=appo or vtrace take more).")
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}.")
    if not 0.0 <= self.vtrace_lambda <= 1.0:
      raise ValueError(f"vtrace_lambda must be in [0, 1], got {self.vtrace_lambda}.")
    if not self.ppo_clip > 0.0:
      raise ValueError(f"ppo_clip must be > 0, got {self.ppo_clip}.")


@dataclasses.dataclass
class GA3CConfig:
  """Everything a GA3C run needs; library code reads this, never FLAGS.

  Defaults follow the GA3C paper (Babaeizadeh et al., ICLR 2017) and its
  reference code: t_max 5, RMSProp lr 3e-4 / decay 0.99 / epsilon 0.1,
  entropy beta 0.01, log epsilon 1e-6, rewards clipped to [-1, 1], losses
  summed over the batch.
  """
  # Environment: the env protocol's flags (--game, --env, --frame_skip,
  # --repeat_action_probability, ...; tfrl/envs/protocol.py) and the seed.
  protocol: EnvProtocol = flagconfig.nested(
      EnvProtocol, defaults={"game": "PongNoFrameskip-v4", "repeat_action_probability": 0.0})
  seed: int = flagconfig.field(
      0, "Random seed (envs, sampling).")
  envs_per_agent: int = flagconfig.field(
      1, "Env slots each agent steps together (1 = the paper's one env per "
      "agent).")

  # Machinery.
  agents: int = flagconfig.field(
      16, "Number of agents (NA) at start (0: none, only the --ray_address runners).")
  predictors: int = flagconfig.field(
      1, "Number of predictor loops (NP) at start.")
  trainers: int = flagconfig.field(
      1, "Number of trainer loops (NT) at start.")
  max_agents: int = flagconfig.field(
      32, "Most agents the dynamic adjustment may run (env slots are created for "
      "max_agents x envs_per_agent).")
  max_predictors: int = flagconfig.field(
      4, "Most predictors the dynamic adjustment may run.")
  max_trainers: int = flagconfig.field(
      4, "Most trainers the dynamic adjustment may run.")
  dynamic_adjustment: bool = flagconfig.field(
      False, "Hill-climb NA/NP/NT at run time on the training rate (GA3C, sec. 4.2).")
  adjustment_period: float = flagconfig.field(
      10.0, "Seconds per dynamic-adjustment trial.")
  prediction_batch_size: int = flagconfig.field(
      128, "Most prediction requests a predictor takes per forward pass.")
  training_min_batch_size: int = flagconfig.field(
      0, "Samples a trainer waits for before an update (rounded up to whole "
      "t_max segments); 0 = one segment.")
  training_max_batch_size: int = flagconfig.field(
      0, "Most samples per update when more are waiting; 0 = 4x the minimum.")
  prediction_queue_size: int = flagconfig.field(
      128, "Capacity of the prediction queue.")
  training_queue_size: int = flagconfig.field(
      64, "Capacity of the training queue (segments).")

  # Learner.
  # The loss and its settings: --loss, --discount, --entropy_beta, ...
  learner: LearnerConfig = flagconfig.nested(LearnerConfig)
  t_max: int = flagconfig.field(
      5, "Segment length: n of the n-step returns (a3c), the V-trace horizon (vtrace, appo).")
  optimizer: str = flagconfig.field(
      "rmsprop", "<rmsprop|adam>: The optimizer (GA3C: RMSProp).", choices=OPTIMIZERS)
  learning_rate: float = flagconfig.field(
      3e-4, "The optimizer's step size.")
  lr_schedule: str = flagconfig.field(
      "constant", "<constant|linear>: linear decays the step size to 0 at --lr_decay_frames.",
      choices=LR_SCHEDULES)
  lr_decay_frames: int = flagconfig.field(
      0, "Frames at which --lr_schedule=linear reaches 0 (so that a run stopped early by "
      "--max_frames keeps a longer run's schedule); 0: --max_frames.")
  adam_epsilon: float = flagconfig.field(
      1e-5, "Adam's epsilon.")
  rmsprop_decay: float = flagconfig.field(
      0.99, "RMSProp decay.")
  rmsprop_epsilon: float = flagconfig.field(
      0.1, "RMSProp epsilon (GA3C: 0.1).")
  init: str = flagconfig.field(
      "glorot", "<glorot|orthogonal>: The network's initial weights. orthogonal: gain "
      "sqrt(2) for hidden layers, 0.01 for the policy head, 1 for the value head, zero "
      "biases (PPO's Atari setting; compressed layers keep theirs).", choices=INITS)
  torso: str = flagconfig.field(
      "atari", "<atari|nature>: The conv net for image observations. atari: GA3C's (conv "
      "16-32, dense 256); nature: DQN Nature's (conv 32-64-64, dense 512; about 3x the "
      "multiply-adds, what SB3 and CleanRL train on Atari).", choices=TORSOS)
  hidden_sizes: Tuple[int, ...] = flagconfig.field(
      (64, 64), "MLP torso sizes for non-image envs.")
  precision: str = flagconfig.field(
      "float32", "<auto|float32|bfloat16>: The network's compute dtype (variables, "
      "loss and optimizer state stay float32). auto: bfloat16 for the conv net where "
      "the CPU has AVX-512 BF16 or AMX-BF16 (/proc/cpuinfo), else float32. The default "
      "stays float32: bfloat16 sped the steps up but not a whole run (docs/ga3c.md).",
      choices=PRECISIONS)
  jit_compile_predict: bool = flagconfig.field(
      False, "XLA-compile the predictors' forward pass (the queue ops stay outside).")
  jit_compile_train: bool = flagconfig.field(
      False, "XLA-compile the trainers' loss, gradients and RMSProp step (the queue "
      "ops and the pruning hook stay outside).")
  layer_plan: Any = None                    # tfrl.layers LayerPlan or None.
  # tfrl.layers.RewardAwareConfig for the `reward_aware` layers (GST's pruned
  # ones); None: its defaults.
  reward_aware: Any = None

  # Remote env runners on Ray (tfrl/ga3c/remote_feed.py, docs/scaling.md).
  ray_address: str = flagconfig.field(
      "", "'' (default): no Ray. 'local': start a Ray instance inside this process, on the "
      "loopback address. 'auto' or HOST:PORT: join a running Ray cluster. With an address, "
      "--ray_runners Ray actors play segments for the learner too, each with its own env "
      "slots (--max_agents x --envs_per_agent), predictor and copy of the network.")
  ray_runners: int = flagconfig.field(
      2, "Ray actors that play segments (with --ray_address); a lost one is replaced.")
  ray_runner_cpus: float = flagconfig.field(
      1.0, "CPUs each Ray runner reserves; its TF thread pools are sized to them.")
  ray_broadcast_every: int = flagconfig.field(
      5, "Optimizer steps between the learner's weight broadcasts to the Ray runners.")
  ray_runner_queue_size: int = flagconfig.field(
      0, "Finished segments a Ray runner holds until the learner collects them; its agents "
      "wait while it is full, so a smaller queue keeps the policy lag down. 0: the larger "
      "of --training_queue_size and the runner's env slots.")

  # Run.
  logdir: str = flagconfig.field(
      "/tmp/tfrl_ga3c", "Directory for checkpoints, TensorBoard summaries, the SavedModel "
      "policy and profiler traces.")
  max_frames: int = flagconfig.field(
      0, "Stop after this many emulator frames (env steps x frame skip); 0 "
      "trains until stopped.")
  max_seconds: float = flagconfig.field(
      0.0, "Stop after this many seconds of training; 0: no limit.")
  checkpoint_every: float = flagconfig.field(
      600.0, "Seconds between checkpoints (each also exports the SavedModel); 0: "
      "only at the end.")
  resume: bool = flagconfig.field(
      False, "Continue from the latest checkpoint in --logdir (weights, optimizer, "
      "frame/episode counters).")
  profile_steps: Optional[Tuple[int, int]] = flagconfig.field(
      None, "START,END training steps between which a TensorBoard profiler trace is "
      "recorded under <logdir>/profile.")
  stats_every: float = flagconfig.field(
      5.0, "Seconds between console/TensorBoard stats lines.")
  score_window: int = flagconfig.field(
      100, "Episodes in the rolling score.")
  target_score: Optional[float] = flagconfig.field(
      None, "Stop once the rolling score over --score_window episodes reaches this.")

  def __post_init__(self):
    ray_cluster.check_address(self.ray_address)
    if self.agents < 0 or (self.agents == 0 and not self.ray_address):
      raise ValueError(f"agents must be >= 1 (0 only with --ray_address, to play on the Ray "
                       f"runners alone), got {self.agents}.")
    if self.agents == 0 and self.dynamic_adjustment:
      raise ValueError("--dynamic_adjustment needs local agents: --agents >= 1.")
    if self.ray_runners < 1 or self.ray_broadcast_every < 1 or self.ray_runner_cpus <= 0:
      raise ValueError(f"ray_runners and ray_broadcast_every must be >= 1 and "
                       f"ray_runner_cpus > 0, got {self.ray_runners}, "
                       f"{self.ray_broadcast_every}, {self.ray_runner_cpus}.")
    if self.ray_runner_queue_size and self.ray_runner_queue_size < self.envs_per_agent:
      raise ValueError(f"ray_runner_queue_size must be 0 (the default) or at least "
                       f"envs_per_agent ({self.envs_per_agent}: an agent's segments go "
                       f"in together), got {self.ray_runner_queue_size}.")
    for name in ("predictors", "trainers", "envs_per_agent", "t_max",
                 "prediction_batch_size", "prediction_queue_size",
                 "training_queue_size", "max_agents", "max_predictors",
                 "max_trainers"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
    self.max_agents = max(self.max_agents, self.agents)
    self.max_predictors = max(self.max_predictors, self.predictors)
    self.max_trainers = max(self.max_trainers, self.trainers)
    if self.precision not in PRECISIONS:
      raise ValueError(
          f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}.")
    for name, allowed in (("optimizer", OPTIMIZERS),
                          ("lr_schedule", LR_SCHEDULES), ("init", INITS),
                          ("torso", TORSOS)):
      if getattr(self, name) not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got "
                         f"{getattr(self, name)!r}.")
    if self.lr_decay_frames < 0:
      raise ValueError(f"lr_decay_frames must be >= 0 (0: max_frames), got "
                       f"{self.lr_decay_frames}.")
    if self.lr_schedule == "linear" and not (self.lr_decay_frames or self.max_frames):
      raise ValueError("lr_schedule linear decays to 0 at lr_decay_frames (default: "
                       "max_frames): set --max_frames or --lr_decay_frames.")
    if self.segments_per_max_batch < self.segments_per_min_batch:
      raise ValueError(
          f"training_max_batch_size ({self.training_max_batch_size}) must be 0 (4x the "
          f"minimum) or at least training_min_batch_size ({self.training_min_batch_size}).")
    if self.learner.minibatches > self.segments_per_min_batch:
      raise ValueError(
          f"minibatches ({self.learner.minibatches}) must be at most the segments of the smallest "
          f"batch ({self.segments_per_min_batch} = training_min_batch_size / t_max).")
    if self.profile_steps is not None:
      if len(self.profile_steps) != 2:
        raise ValueError(f"--profile_steps must be START,END (two integers), got "
                         f"{self.profile_steps}.")
      start, end = self.profile_steps
      if not 0 <= start < end:
        raise ValueError(
            f"profile_steps must be START,END with 0 <= START < END, got "
            f"{self.profile_steps}.")

  @property
  def local_agents(self) -> int:
    """Agents the learner's process builds: --max_agents, or, when only Ray runners
    play (--agents=0), one idle agent whose env slots give the specs."""
    return self.max_agents if self.agents else 1

  @property
  def num_env_slots(self) -> int:
    """Env slots of the learner's process (a Ray runner has max_agents x envs_per_agent)."""
    return self.local_agents * self.envs_per_agent

  def learning_rate_at(self, frames: int) -> float:
    """The step size after `frames` frames (--lr_schedule)."""
    if self.lr_schedule == "linear":
      return self.learning_rate * max(0.0, 1.0 - frames / (self.lr_decay_frames
                                                           or self.max_frames))
    return self.learning_rate

  @property
  def runner_queue_capacity(self) -> int:
    """Finished segments a Ray runner holds (--ray_runner_queue_size, 0: the larger of
    the training queue's size and the runner's env slots)."""
    return (self.ray_runner_queue_size
            or max(self.training_queue_size, self.max_agents * self.envs_per_agent))

  @property
  def segments_per_min_batch(self) -> int:
    samples = self.training_min_batch_size or self.t_max
    return max(1, -(-samples // self.t_max))

  @property
  def segments_per_max_batch(self) -> int:
    if not self.training_max_batch_size:
      return 4 * self.segments_per_min_batch
    return -(-self.training_max_batch_size // self.t_max)
