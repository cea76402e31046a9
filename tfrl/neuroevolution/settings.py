"""The typed config of a GA, ES or random-search run, one flag per field.

    NeuroevolutionConfig
      env:        tfrl.envs.EnvProtocol       --game, --env, --max_episode_frames, ...
      network:    NetworkSettings             --arch, --hidden, --inference, ...
      evaluator:  EvaluatorSettings           --num_envs, --slot_groups, --noise_table_size
      run:        RunSettings                 --generations, --logdir, --resume, ...
      ray:        RayConfig     --ray_address, --ray_workers, ...
      algorithm:  GAConfig or ESConfig        --population, --seed, --truncation, ...
      layer_plan: the layer flags' LayerPlan  --dense_layer, --layer_plan, ...

`tfrl.neuroevolution.cli` defines the flags of these fields (name, default and
help written once, `tfrl/flagconfig.py`) and builds the config; each part
checks its own values (ValueError), and library code reads the config, never
FLAGS. `population`, `seed`, `episodes_per_eval` and the observation
normalization (`--obs_norm*`) belong to the algorithm's config
(`SearchConfig`, the base of `GAConfig` and `ESConfig`).
"""

import dataclasses
from typing import Any, Optional, Tuple

from tfrl import flagconfig
from tfrl.envs.protocol import EnvProtocol
from tfrl.neuroevolution import noise as noise_lib

# Neuroevolution's own defaults for the env protocol's flags.
ENV_DEFAULTS = {"game": "pong", "repeat_action_probability": 0.0}


# The parts' own configs live here, free of TensorFlow, so that the entry
# points check their flags before importing it; the modules that build the
# parts (population_net, heads, normalization, ray_evaluator) re-export them.
ARCHS = ("mlp", "small", "large")
WEIGHT_DTYPES = ("float32", "bfloat16")
# The population ops' (tfrl.ops.reference.CONV_INPUT_DTYPES; a test checks they agree).
CONV_INPUT_DTYPES = ("float32", "bfloat16")
ACTIVATIONS = ("relu", "tanh")
SQUASHES = ("tanh", "linear")  # of heads.ActionHead


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
  """Which population network to build.

  Attributes:
    arch: `mlp`, `small` or `large`.
    hidden: dense sizes of the `mlp` arch.
    layer_plan: a `tfrl.layers.LayerPlan` (or LayerSpec / None = dense).
    use_op: True: the compiled op (ImportError if missing); False: the pure-TF
      reference; None: the op when it is built.
    weight_dtype: `float32`, or `bfloat16`: the kernels are stored rounded to
      bfloat16 (biases stay float32) and widened exactly in the op, with
      float32 arithmetic. On a CPU a population's dense layers are bound by
      reading every network's kernel once per step, so this about halves their time;
      the network played (and exported) is the one with the rounded kernels.
    conv_input_dtype: `float32`, or `bfloat16` (needs `weight_dtype="bfloat16"`):
      every convolution rounds its input to bfloat16 (nearest, ties to even)
      and accumulates the products in float32, in AMX tiles on CPUs that have
      AMX-BF16 (several times the float32 rate). The played and exported
      network rounds its convolution inputs the same way. No effect on `mlp`.
    activation: of the hidden layers, `relu`, or `tanh` (the `mlp` only).
  """

  arch: str = "large"
  hidden: Tuple[int, ...] = (64, 64)
  layer_plan: object = None
  use_op: Optional[bool] = None
  weight_dtype: str = "float32"
  conv_input_dtype: str = "float32"
  activation: str = "relu"

  def __post_init__(self):
    if self.arch not in ARCHS:
      raise ValueError(f"NetworkConfig.arch must be one of {ARCHS}, got {self.arch!r}.")
    if any(int(h) < 1 for h in self.hidden):
      raise ValueError(f"NetworkConfig.hidden sizes must be >= 1, got {self.hidden!r}.")
    if self.weight_dtype not in WEIGHT_DTYPES:
      raise ValueError(f"NetworkConfig.weight_dtype must be one of {WEIGHT_DTYPES}, "
                       f"got {self.weight_dtype!r}.")
    if self.conv_input_dtype not in CONV_INPUT_DTYPES:
      raise ValueError(f"NetworkConfig.conv_input_dtype must be one of "
                       f"{CONV_INPUT_DTYPES}, got {self.conv_input_dtype!r}.")
    if self.conv_input_dtype == "bfloat16" and self.weight_dtype != "bfloat16":
      raise ValueError("conv_input_dtype='bfloat16' requires weight_dtype='bfloat16' "
                       f"(bfloat16 kernels), got weight_dtype={self.weight_dtype!r}.")
    if self.activation not in (ACTIVATIONS if self.arch == "mlp" else ("relu",)):
      raise ValueError(f"--activation must be relu, or tanh for the mlp; got "
                       f"{self.activation!r} for arch {self.arch!r}.")


@dataclasses.dataclass(frozen=True)
class NormalizationConfig:
  """Observation normalization (flags --obs_norm, --obs_norm_fraction, --obs_norm_clip)."""

  enabled: bool = flagconfig.field(
      False, "Normalize observations by running mean / std (vector observations), "
      "updated once per generation from a fraction of the episodes.", flag="obs_norm")
  fraction: float = flagconfig.field(
      0.01, "With --obs_norm: the fraction of the population's episodes whose "
      "observations update the statistics (chosen by their seeds).",
      flag="obs_norm_fraction")
  clip: float = flagconfig.field(
      5.0, "With --obs_norm: normalized observations are clipped to [-clip, clip].",
      flag="obs_norm_clip")

  def __post_init__(self):
    if not 0.0 < self.fraction <= 1.0:
      raise ValueError(f"--obs_norm_fraction must be in (0, 1], got {self.fraction}.")
    if not self.clip > 0.0:
      raise ValueError(f"--obs_norm_clip must be > 0, got {self.clip}.")

  def identity(self) -> Optional[dict]:
    """What a checkpoint records of it (None: off)."""
    return {"fraction": self.fraction, "clip": self.clip} if self.enabled else None


@dataclasses.dataclass(frozen=True)
class RayConfig:
  """Where and how the population is played on Ray (flags --ray_<field>)."""

  address: str = flagconfig.field(
      "", "'' (default): evaluate in this process, without Ray. 'local': start a "
      "Ray instance inside this process. 'auto' or HOST:PORT: join a running Ray "
      "cluster (`ray start --head` on one machine, `ray start --address=HOST:PORT` "
      "on the others).")
  workers: int = flagconfig.field(2, "Ray actors that play the population.")
  worker_cpus: float = flagconfig.field(
      1.0, "CPUs each Ray worker reserves; its TF thread pools are sized to them.")
  worker_envs: int = flagconfig.field(0, "Env slots per Ray worker (0: --num_envs).")
  worker_slot_groups: int = flagconfig.field(
      0, "Slot groups per Ray worker (0: --slot_groups).")
  chunks_per_worker: int = flagconfig.field(
      2, "Chunks a generation is cut into, per worker: more balance the workers "
      "better and lose less when one dies; fewer cost less dispatch.")
  max_worker_restarts: int = flagconfig.field(
      4, "Replacement workers started in a run for workers that died (0: none).")
  worker_start_timeout: float = flagconfig.field(
      300.0, "Seconds to wait for the workers to start, and for a replacement "
      "when no worker is left.")
  noise: str = flagconfig.field(
      "seed", "How a worker gets the noise table: 'seed' rebuilds it from its seed; "
      "'object_store' reads the driver's copy once through Ray's object store.",
      choices=("seed", "object_store"))

  def __post_init__(self):
    if self.workers < 1:
      raise ValueError(f"--ray_workers must be >= 1, got {self.workers}.")
    if self.worker_cpus <= 0:
      raise ValueError(f"--ray_worker_cpus must be > 0, got {self.worker_cpus}.")
    if self.worker_envs < 0 or self.worker_slot_groups < 0:
      raise ValueError("--ray_worker_envs and --ray_worker_slot_groups must be >= 0.")
    if self.chunks_per_worker < 1:
      raise ValueError(f"--ray_chunks_per_worker must be >= 1, got "
                       f"{self.chunks_per_worker}.")
    if self.max_worker_restarts < 0 or self.worker_start_timeout <= 0:
      raise ValueError("--ray_max_worker_restarts must be >= 0 and "
                       "--ray_worker_start_timeout > 0.")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """What GA, ES and random search share: the base of GAConfig and ESConfig."""
  population: int = flagconfig.field(64, "Individuals per generation.")
  seed: int = flagconfig.field(
      0, "Seed of the algorithm (and of the noise table and the env slots).")
  episodes_per_eval: int = flagconfig.field(1, "Episodes per individual per generation.")
  normalization: NormalizationConfig = flagconfig.nested(
      NormalizationConfig)

  def capacity(self) -> int:
    """Networks an evaluation call may hold (one per individual)."""
    return self.population


@dataclasses.dataclass(frozen=True)
class NetworkSettings:
  """The population network and how it plays."""
  arch: str = flagconfig.field(
      "auto", "Population network: mlp, small (16/32/256), large (Nature "
      "32/64/64/512); auto = mlp for vector obs, large for Atari.",
      choices=("auto",) + tuple(ARCHS))
  hidden: Tuple[int, ...] = flagconfig.field((64, 64), "Hidden sizes of the mlp arch.")
  activation: str = flagconfig.field(
      "relu", "Activation of the hidden layers: relu, or tanh (the mlp only).",
      choices=ACTIVATIONS)
  action_head: str = flagconfig.field(
      "tanh", "Continuous (Box) action spaces: one output per action dimension, "
      "scaled to the action bounds by tanh, or linear (clipped to the bounds). "
      "Discrete actions are the argmax of the outputs either way.",
      choices=SQUASHES)
  matmul: str = flagconfig.field(
      "auto", "auto: the compiled population op when built; op: require it; "
      "reference: the pure-TF gather+matmul.", choices=("auto", "op", "reference"))
  weight_dtype: str = flagconfig.field(
      "float32", "Storage of the population's kernels: bfloat16 halves the memory a "
      "step streams through the dense layers (the played and exported networks use "
      "the rounded kernels; float32 arithmetic).",
      choices=tuple(WEIGHT_DTYPES))
  conv_input_dtype: str = flagconfig.field(
      "float32", "bfloat16: the convolutions round their inputs to bfloat16 and "
      "accumulate in float32, in AMX tiles on CPUs with AMX-BF16 (needs "
      "--weight_dtype=bfloat16; the played and exported networks round the same way).",
      choices=tuple(CONV_INPUT_DTYPES))
  inference: str = flagconfig.field(
      "auto", "How the networks play an episode: full (every layer at every step) or "
      "incremental (each step computes only what the change of the observation since "
      "the previous step changes: for Atari frames a few percent of the work; the same "
      "logits up to float rounding). auto: incremental for conv nets with float32 "
      "conv inputs, else full.", choices=("auto", "full", "incremental"))
  refresh_steps: int = flagconfig.field(
      100, "With incremental inference, recompute every network in full every N "
      "steps of an episode (bounds the float rounding that incremental steps "
      "accumulate).")

  def __post_init__(self):
    if self.refresh_steps < 1:
      raise ValueError(f"--refresh_steps must be >= 1, got {self.refresh_steps}.")
    if self.inference == "incremental" and self.conv_input_dtype != "float32":
      raise ValueError("--inference=incremental needs --conv_input_dtype=float32, got "
                       f"{self.conv_input_dtype}.")

  def network_config(self, observation_shape, layer_plan=None
                     ) -> NetworkConfig:
    """The NetworkConfig for an env's observations (`auto` picks the arch)."""
    arch = self.arch
    if arch == "auto":
      arch = "mlp" if len(observation_shape) == 1 else "large"
    return NetworkConfig(
        arch=arch, hidden=self.hidden, layer_plan=layer_plan,
        use_op={"auto": None, "op": True, "reference": False}[self.matmul],
        weight_dtype=self.weight_dtype, conv_input_dtype=self.conv_input_dtype,
        activation=self.activation)

  def incremental(self, config: NetworkConfig) -> bool:
    """Whether `inference` asks for incremental inference of this network."""
    if self.inference == "auto":
      return config.arch != "mlp" and config.conv_input_dtype == "float32"
    return self.inference == "incremental"


@dataclasses.dataclass(frozen=True)
class EvaluatorSettings:
  """The local evaluator's slots and the shared noise table."""
  num_envs: int = flagconfig.field(32, "Env slots (split over --slot_groups).")
  slot_groups: int = flagconfig.field(2, "Slot groups pipelined against each other.")
  noise_table_size: int = flagconfig.field(noise_lib.DEFAULT_SIZE,
                                           "Floats in the shared noise table.")


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Budget, output and resume of a run."""
  generations: int = flagconfig.field(100, "Generations to run (total, with --resume).")
  max_frames: int = flagconfig.field(0, "Stop after this many frames (0: no limit).")
  logdir: str = flagconfig.field(
      "/tmp/tfrl_neuroevolution",
      "Where TensorBoard scalars, checkpoints, the flags and the elite go.")
  resume: bool = flagconfig.field(False, "Resume from the checkpoint in --logdir.")
  export: bool = flagconfig.field(True, "Export the elite SavedModel to <logdir>/elite.")
  export_every: int = flagconfig.field(
      0, "Also export every N generations (0: at the end).")
  target_score: Optional[float] = flagconfig.field(
      None, "Stop once the elite's score reaches this.")
  profile_generation: int = flagconfig.field(
      0, "Record a TensorBoard profiler trace of generation N (counted from 1, "
      "its checkpoint included) under <logdir>/profile (0: none).")

  def __post_init__(self):
    if self.profile_generation < 0:
      raise ValueError(f"--profile_generation must be >= 0, got "
                       f"{self.profile_generation}.")


@dataclasses.dataclass(frozen=True)
class NeuroevolutionConfig:
  """Everything a GA, ES or random-search run needs (see the module docstring)."""
  env: EnvProtocol = flagconfig.nested(EnvProtocol, defaults=ENV_DEFAULTS)
  network: NetworkSettings = flagconfig.nested(NetworkSettings)
  evaluator: EvaluatorSettings = flagconfig.nested(EvaluatorSettings)
  run: RunSettings = flagconfig.nested(RunSettings)
  ray: RayConfig = flagconfig.nested(RayConfig, prefix="ray_")
  algorithm: Any = None    # a SearchConfig: GAConfig or ESConfig (the entry point's)
  layer_plan: Any = None   # a tfrl.layers LayerPlan (None: dense)

  def __post_init__(self):
    if not isinstance(self.algorithm, SearchConfig):
      raise ValueError(f"NeuroevolutionConfig.algorithm must be a GAConfig or ESConfig, "
                       f"got {self.algorithm!r}.")
    if getattr(self.algorithm, "vbn", None) is not None:
      if self.ray.address:
        raise ValueError("--virtual_batch_norm is not supported with --ray_address yet "
                         "(it runs in the local evaluator only).")
      if self.algorithm.normalization.enabled or self.network.activation != "relu":
        raise ValueError("--virtual_batch_norm normalizes ReLU layers of raw observations: "
                         "not with --obs_norm or --activation=tanh.")

  @property
  def uses_ray(self) -> bool:
    return bool(self.ray.address)

  def cache_size(self) -> int:
    """Chains a parent cache keeps: the parents, the elite candidates, the elite."""
    a = self.algorithm
    parents = 0 if getattr(a, "random_search", True) else a.truncation
    return parents + getattr(a, "elite_candidates", 0) + 2
