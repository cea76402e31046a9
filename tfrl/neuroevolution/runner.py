"""GA, ES and random search in the run skeleton (`tfrl.run_loop`): a step is one generation.

    history = run(algorithm, RunConfig(logdir=...), observation_spec)

    for each generation (until `generations`, `max_frames` or `target_score`):
      metrics = algorithm.step()          # evaluate, select / update
      write TensorBoard scalars
      checkpoint the algorithm state      # resumable with resume=True
      print one console line, with where the generation's time went (`timing`)
    export the elite as a SavedModel policy (tfrl.export format)

The skeleton does the rest, as for every algorithm: the logdir lock, the
checkpoint already in `logdir` (a fresh run refuses to write over it;
`resume=True` restores it after checking that it is a checkpoint of the same
run, `run_identity`: algorithm, env, network, population, noise table,
observation spec), `flags.txt`, signals, the final export and `summary.json`.
Ctrl-C / SIGTERM abandon the generation under way (its evaluation stops within
one graph call of the evaluator, at most its `steps_per_call` env steps); the
run goes back to the checkpoint of the last finished generation, exports its
elite and ends normally.

`profile_generation=N` records a TensorBoard profiler trace of generation N,
its checkpoint included, under <logdir>/profile; every generation's step is
marked in a trace as "generation" with its number.
"""

import dataclasses
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import tensorflow as tf

from tfrl import resume
from tfrl import run_loop
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import single_network
from tfrl.neuroevolution import timing

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
  identity.update({
      "network": layout.describe(),
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
  """A GA / ES / random-search object (`step`, `state`, `restore`, `elite_params`,
  `generation`, `frames`, `elite_score`, `evaluator`) as a `run_loop.Algorithm`.

  `history` collects each generation's metrics; `close` (e.g. the evaluator's)
  runs when the run ends.
  """

  def __init__(self, search, config: RunConfig, observation_spec: tf.TensorSpec,
               print_fn: Callable[[str], None] = print,
               close: Optional[Callable[[], None]] = None):
    self.search = search
    self.config = config
    self.observation_spec = observation_spec
    self.name = search.name
    self.console = run_loop.Console(search.name, print_fn)
    self.history: List[Dict[str, float]] = []
    self._close = close
    self._breakdown: Optional[timing.Breakdown] = None
    self.profile_dir: Optional[str] = None  # while the profiler records

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

  def step(self) -> str:
    self._breakdown = breakdown = timing.Breakdown()
    number = self.search.generation + 1
    if number == self.config.profile_generation:
      self.profile_dir = os.path.join(self.config.logdir, "profile")
      tf.profiler.experimental.start(self.profile_dir)
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
          f"{checkpoint.Store(self.config.logdir).saved_generation()} (resume with "
          f"--resume, with or without Ray)") from e
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
    self._stop_profiler()
    metrics = self.history[-1]
    metrics["time"] = self._breakdown.seconds()
    evaluation_parts = metrics.get("evaluation", {})
    timing.write_scalars(metrics["time"], evaluation_parts, metrics["generation"])
    return f"{line} | {timing.format_line(metrics['time'], evaluation_parts)}"

  def _stop_profiler(self) -> None:
    if self.profile_dir is not None:
      tf.profiler.experimental.stop()
      self.console.say(f"profiler trace of generation {self.config.profile_generation} "
                       f"written under {self.profile_dir}")
      self.profile_dir = None

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
    self._stop_profiler()  # a generation that did not finish
    if self._close is not None:
      self._close()


def options(config: RunConfig, flags_text: Optional[str] = None,
            on_start: Optional[Callable[[], None]] = None) -> run_loop.RunOptions:
  """A checkpoint every generation; an export every `export_every` and at the end."""
  return run_loop.RunOptions(
      logdir=config.logdir, resume=config.resume, checkpoint_every=run_loop.Every(steps=1),
      export=config.export, export_every=run_loop.Every(steps=config.export_every),
      flags_text=flags_text, on_start=on_start)


def run(algorithm, config: RunConfig, observation_spec: tf.TensorSpec,
        print_fn: Callable[[str], None] = print,
        on_start: Optional[Callable[[], None]] = None) -> List[Dict[str, float]]:
  """Runs generations; returns the list of per-generation metrics.

  `on_start` is called once the checkpoint is restored (or there is none),
  before the first generation: what it writes survives only accepted runs.
  """
  generations = Generations(algorithm, config, observation_spec, print_fn)
  run_loop.run(lambda: generations, checkpoint.Store(config.logdir),
               options(config, on_start=on_start))
  return generations.history


def run_built(build: Callable[[], Generations], config: RunConfig,
              flags_text: Optional[str] = None) -> Dict[str, Any]:
  """A run whose algorithm `build` makes once the logdir is locked and its
  checkpoint accepted (before Ray workers start); the summary."""
  return run_loop.run(build, checkpoint.Store(config.logdir), options(config, flags_text))
