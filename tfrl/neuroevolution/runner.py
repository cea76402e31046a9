"""GA, ES and random search in the run skeleton (`tfrl.run_loop`): a step is one generation.

Each algorithm's `build(config)` (`tfrl.ga`, `tfrl.es`, `tfrl.random_search`)
is `build(config, its search class)` here, and its entry point runs it:

    summary = run_loop.run(ga.build(config))   # a NeuroevolutionConfig

    for each generation (until `generations`, `max_frames` or `target_score`):
      metrics = algorithm.step()          # evaluate, select / update
      write TensorBoard scalars
      checkpoint the algorithm state      # resumable with resume=True
      print one console line, with where the generation's time went (`timing`)
    export the elite as a SavedModel policy (tfrl.export format)

The skeleton does the rest, as for every algorithm: the logdir lock, the
checkpoint already in `logdir` (a fresh run refuses to write over it;
`resume=True` restores it after checking that it is a checkpoint of the same
run, `run_identity`: algorithm, env, network, virtual batch norm, population,
noise table, observation spec), `flags.txt`, signals, the final export and
`summary.json`. `build` makes the evaluator (local, or Ray workers) and the
search only once the logdir is locked and its checkpoint accepted.
Ctrl-C / SIGTERM abandon the generation under way (its evaluation stops within
one graph call of the evaluator, at most its `steps_per_call` env steps); the
run goes back to the checkpoint of the last finished generation, exports its
elite and ends normally.

`profile_generation=N` records a TensorBoard profiler trace of generation N,
its checkpoint included, under <logdir>/profile (`tfrl.profiling`); every
generation's step is marked in a trace as "generation" with its number.
"""

import dataclasses
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type

import tensorflow as tf

from tfrl import profiling
from tfrl import resume
from tfrl import run_loop
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net
from tfrl.neuroevolution import ray_evaluator
from tfrl.neuroevolution import search as search_lib
from tfrl.neuroevolution import settings as settings_lib
from tfrl.neuroevolution import single_network
from tfrl.neuroevolution import timing
from tfrl.neuroevolution import worker as worker_lib
from tfrl.ops import population as population_ops

SCALARS = ("best", "mean", "elite", "frames", "frames_per_second",
           "generation_seconds")


@dataclasses.dataclass(frozen=True)
class RunConfig:
  logdir: str
  generations: int = 100
  max_frames: int = 0           # 0: no frame budget
  resume: bool = False
  export: bool = True           # elite SavedModel under <logdir>/elite
  export_every: int = 0         # also export every N generations (0: at the end)
  target_score: Optional[float] = None  # stop once the elite reaches it
  # What else a checkpoint of this run records and a resume must match, on
  # top of `run_identity` (the entry points add the env protocol).
  identity: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  env_protocol: Any = None      # tfrl.envs.EnvProtocol, written into the export
  profile_generation: int = 0   # a profiler trace of this generation (0: none)


def format_line(algorithm_name: str, m: Dict[str, float]) -> str:
  line = (f"[{algorithm_name}] gen {m['generation']:4d} | best {m['best']:9.2f} | "
          f"mean {m['mean']:9.2f} | elite {m['elite']:9.2f} | "
          f"frames {m['frames']:11d} | {m['frames_per_second']:9.0f} frames/s | "
          f"{m['generation_seconds']:6.2f} s")
  if m.get("nan_returns"):
    line += f" | {m['nan_returns']} NaN returns (ranked last)"
  return line


def run_identity(algorithm, observation_spec: tf.TensorSpec,
                 extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
  """What a checkpoint of this run records and a resume must match."""
  layout = getattr(algorithm, "genome_layout", algorithm.layout)  # ES: the searched one
  identity = {"algorithm": algorithm.name}
  identity.update(extra or {})
  if "kernel_isa" in identity:
    # The population kernels run in this process: record the build they run.
    identity["kernel_isa"] = population_ops.select_isa(identity["kernel_isa"])
  identity.update({
      "network": layout.describe(),
      # ES's VBN: the genome's layout is the same with or without it.
      "virtual_batch_norm": "on" if getattr(algorithm.config, "vbn", None) else "off",
      "population": algorithm.config.population,
      "noise_table_seed": algorithm.table.seed,
      "noise_table_size": algorithm.table.size,
      "observation_spec": f"{list(observation_spec.shape)} {observation_spec.dtype.name}",
  })
  return resume.as_json(identity)


def export_elite(algorithm, export_dir: str, observation_spec: tf.TensorSpec,
                 env_protocol=None) -> str:
  """Slices the elite out of the population into a plain network and exports it."""
  from tfrl import export as export_lib  # the GA3C engineer's policy format.
  policy = single_network.SingleNetwork(algorithm.layout, algorithm.elite_params())
  return export_lib.export_policy(policy, observation_spec, export_dir, env_protocol)


class Generations(run_loop.Algorithm):
  """A GA, ES or random search (a `search.Search`) as a `run_loop.Algorithm`.

  `history` collects each generation's metrics; `close` (the evaluator's)
  runs when the run ends.
  """

  def __init__(self, search: search_lib.Search, config: RunConfig,
               observation_spec: tf.TensorSpec, print_fn: Callable[[str], None] = print,
               close: Optional[Callable[[], None]] = None):
    self.search = search
    self.config = config
    self.observation_spec = observation_spec
    self.name = search.name
    self.console = run_loop.Console(search.name, print_fn)
    self.history: List[Dict[str, float]] = []
    self._close = close
    self._breakdown: Optional[timing.Breakdown] = None
    self._profiler: Optional[profiling.Window] = None  # profile_generation=N: [N - 1, N)
    self._traced = 0  # the generation the profiler traces
    self._checkpointed = 0  # the generation of the run's last checkpoint (0: none)
    if config.profile_generation:
      self._profiler = profiling.Window(
          config.logdir, config.profile_generation - 1, config.profile_generation,
          on_written=lambda path: self.console.say(
              f"profiler trace of generation {self._traced} written under {path}"))

  def identity(self) -> Dict[str, Any]:
    return run_identity(self.search, self.observation_spec, self.config.identity)

  def count(self) -> int:
    return self.search.generation

  def progress(self) -> str:
    return f"generation {self.search.generation} ({self.search.frames} frames)"

  def state(self) -> Tuple[dict, Optional[Dict[str, Any]]]:
    return self.search.state()

  def restore(self, state: dict, arrays) -> None:
    self.search.restore(state, arrays)

  def request_stop(self) -> None:
    self.search.evaluator.stop()

  def begin(self) -> None:
    self._checkpointed = self.search.generation  # restored, or 0

  def step(self) -> str:
    self._breakdown = breakdown = timing.Breakdown()
    number = self.search.generation + 1
    if self._profiler is not None and self._profiler.update(self.search.generation):
      self._traced = number
    try:
      with tf.profiler.experimental.Trace("generation", number=number):
        metrics = self.search.step()
    except evaluation.Stopped as e:
      # The step may have changed the state half-way (ES updates theta before
      # it scores the centre): the skeleton goes back to the saved generation.
      raise run_loop.Interrupted() from e
    except evaluators.WorkersLost as e:
      raise evaluators.WorkersLost(
          f"{e}; the checkpoint in {self.config.logdir} holds generation "
          f"{self._checkpointed} (resume with --resume, with or without Ray)") from e
    self.history.append(metrics)
    started = time.perf_counter()
    for part, seconds in metrics.get("time", {}).items():
      breakdown.add(part, seconds)
    for key in SCALARS:
      tf.summary.scalar(f"{self.name}/{key}", metrics[key], step=metrics["generation"])
    tf.summary.scalar(f"{self.name}/nan_returns", metrics.get("nan_returns", 0),
                      step=metrics["generation"])
    line = format_line(self.name, metrics)
    breakdown.add("log", time.perf_counter() - started)
    return line

  def saved(self, line: Optional[str], seconds: Dict[str, float]) -> Optional[str]:
    """The generation's line with its time breakdown, also written to its
    metrics (`time`) and TensorBoard (`time/...`), once its checkpoint is written."""
    for part, value in seconds.items():
      self._breakdown.add(part, value)
    if "checkpoint" in seconds:
      self._checkpointed = self.search.generation
    if self._profiler is not None:
      self._profiler.stop()  # the trace holds one generation and its checkpoint
    metrics = self.history[-1]
    metrics["time"] = self._breakdown.seconds()
    evaluation_parts = metrics.get("evaluation", {})
    timing.write_scalars(metrics["time"], evaluation_parts, metrics["generation"])
    return f"{line} | {timing.format_line(metrics['time'], evaluation_parts)}"

  def finished(self) -> Optional[str]:
    config, search = self.config, self.search
    if search.generation >= config.generations:
      return "generations"
    if 0 < config.max_frames <= search.frames:
      return "max_frames"
    if (config.target_score is not None and self.history and
        self.history[-1]["elite"] >= config.target_score):
      return "target_score"
    return None

  def export(self) -> Dict[str, Any]:
    if self.search.generation == 0:
      return {}  # no elite yet
    export_dir = os.path.join(self.config.logdir, "elite")
    export_elite(self.search, export_dir, self.observation_spec, self.config.env_protocol)
    self.console.say(f"elite ({self.search.elite_score:.2f}) exported to {export_dir}")
    return {"elite": export_dir}

  def results(self) -> Dict[str, Any]:
    return {"algorithm": self.name, "generation": self.search.generation,
            "frames": self.search.frames, "elite_score": self.search.elite_score,
            "last": self.history[-1] if self.history else None}

  def close(self) -> None:
    if self._profiler is not None:
      self._profiler.stop()  # a generation that did not finish
    if self._close is not None:
      self._close()


def _job(config: RunConfig, make: Callable[[], Generations]) -> run_loop.Job:
  """A checkpoint every generation; an export every `export_every` and at the end."""
  return run_loop.Job(make, checkpoint.Store(config.logdir), run_loop.RunOptions(
      logdir=config.logdir, resume=config.resume, checkpoint_every=run_loop.Every(steps=1),
      export=config.export, export_every=run_loop.Every(steps=config.export_every)))


# -- A run of a NeuroevolutionConfig, as the entry points make it ------------


@dataclasses.dataclass
class Setup:
  spec: worker_lib.WorkerSpec
  layout: population_net.ParamLayout
  table: noise_lib.NoiseTable
  evaluator: evaluators.Evaluator
  observation_spec: tf.TensorSpec


def worker_spec(config: settings_lib.NeuroevolutionConfig, capacity: int):
  """The WorkerSpec of a run (per Ray worker with --ray_address), and the obs spec."""
  seed = config.algorithm.seed
  probe = worker_lib.make_worker_env(config.env, 1, seed)  # the spaces, from one slot
  try:
    head = heads.for_env(probe, config.network.action_head)
    norm = config.algorithm.normalization
    if norm.enabled and len(probe.observation_shape) != 1:
      raise ValueError(f"--obs_norm needs vector observations, got shape "
                       f"{list(probe.observation_shape)} from {config.env.name}.")
    observation_spec = tf.TensorSpec([None] + list(probe.observation_shape),
                                     getattr(probe, "observation_dtype", tf.uint8))
    network = config.network.network_config(probe.observation_shape, config.layer_plan)
    ray = config.ray if config.uses_ray else None
    spec = worker_lib.WorkerSpec(
        env=config.env, network=network, observation_shape=tuple(probe.observation_shape),
        num_actions=head.size, noise_seed=seed,
        noise_size=config.evaluator.noise_table_size, capacity=capacity,
        num_envs=(ray and ray.worker_envs) or config.evaluator.num_envs,
        slot_groups=(ray and ray.worker_slot_groups) or config.evaluator.slot_groups,
        incremental=config.network.incremental(network),
        # Incremental inference reads circulant kernels compact, unless VBN
        # folds its statistics into them.
        compact_circulant=(config.network.incremental(network)
                           and getattr(config.algorithm, "vbn", None) is None),
        refresh_steps=config.network.refresh_steps, cache_size=config.cache_size(),
        env_seed=seed, head=None if head.is_discrete else head,
        obs_norm_clip=norm.clip if norm.enabled else None)
  finally:
    probe.close()
  return spec, observation_spec


def setup(config: settings_lib.NeuroevolutionConfig, log=print) -> Setup:
  """Layout, noise table and evaluator (local, or on Ray) of a run."""
  spec, observation_spec = worker_spec(config, config.algorithm.capacity())
  layout = spec.layout()
  table = noise_lib.NoiseTable(config.algorithm.seed, config.evaluator.noise_table_size)
  if not config.uses_ray:
    evaluator = worker_lib.build_local(spec, table)
  else:
    evaluator = ray_evaluator.RayEvaluator(spec, config.ray, table, log=log)
  return Setup(spec, layout, table, evaluator, observation_spec)


def _check_algorithm(config: settings_lib.NeuroevolutionConfig,
                     search_cls: Type[search_lib.Search]) -> None:
  if not isinstance(config.algorithm, search_cls.config_type):
    raise ValueError(f"{search_cls.__name__} runs a {search_cls.config_type.__name__}, "
                     f"got {type(config.algorithm).__name__}.")


def build_search(config: settings_lib.NeuroevolutionConfig,
                 search_cls: Type[search_lib.Search], log=print):
  """(setup, search): the run's evaluator and its `search_cls` (GeneticAlgorithm,
  EvolutionStrategy) of `config.algorithm`, as `build` makes them; the
  evaluator is closed if the search cannot be made."""
  _check_algorithm(config, search_cls)
  parts = setup(config, log)
  try:
    return parts, search_cls(config.algorithm, parts.layout, parts.table, parts.evaluator)
  except BaseException:
    parts.evaluator.close()
    raise


def run_config(config: settings_lib.NeuroevolutionConfig) -> RunConfig:
  run_settings = config.run
  # The env protocol a checkpoint was trained on is part of what a resume must match.
  return RunConfig(
      logdir=run_settings.logdir, generations=run_settings.generations,
      max_frames=run_settings.max_frames, resume=run_settings.resume,
      export=run_settings.export, export_every=run_settings.export_every,
      target_score=run_settings.target_score,
      identity={**config.env.identity(), "kernel_isa": config.env.kernel_isa},
      env_protocol=config.env, profile_generation=run_settings.profile_generation)


def print_now(line: str) -> None:
  """A console line, flushed at once (the default `print_fn` of `build`)."""
  print(line, flush=True)


def build(config: settings_lib.NeuroevolutionConfig, search_cls: Type[search_lib.Search],
          print_fn: Callable[[str], None] = print_now) -> run_loop.Job:
  """A run of `config` by `search_cls` for `run_loop.run` (each algorithm's
  `build(config)` names its class)."""
  _check_algorithm(config, search_cls)
  run_settings = run_config(config)

  def make() -> Generations:
    parts, search = build_search(config, search_cls, log=print_fn)
    print_fn(f"[{search.name}] {parts.layout.describe()} | population "
             f"{config.algorithm.population} | {parts.evaluator.describe()} | "
             f"{'incremental' if parts.spec.incremental else 'full'} inference")
    return Generations(search, run_settings, parts.observation_spec, print_fn,
                       close=parts.evaluator.close)

  return _job(run_settings, make)
