"""The generation loop shared by GA, ES and random search.

    for each generation (until `generations` or `max_frames`):
      metrics = algorithm.step()          # evaluate, select / update
      print one console line; write TensorBoard scalars
      checkpoint the algorithm state      # resumable with resume=True
    export the elite as a SavedModel policy (tfrl.export format)

Ctrl-C / SIGTERM abandon the generation under way (its evaluation stops
within one graph call of the evaluator, at most its `steps_per_call` env
steps); the checkpoint of the last finished generation stays, the elite is
exported, and `run` returns normally.

The checkpoint already in `logdir` (see `open_checkpoint`): a fresh run
refuses to write over it; `resume=True` restores it after checking that it
is a checkpoint of the same run (`run_identity`: algorithm, env, network,
population, noise table, observation spec), or says that there is none and
starts afresh. A checkpoint that cannot be written (a full disk) ends the run
with `cli.RunFailed`, the previous one intact.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from tfrl import cli
from tfrl import resume
from tfrl import stopping
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import population_net

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


def open_checkpoint(config: RunConfig) -> Optional[Tuple[dict, Dict[str, np.ndarray]]]:
  """The checkpoint a run of `config` starts from; None: it starts afresh.

  Raises ValueError for a fresh run into a logdir that holds a checkpoint,
  and `resume.CorruptCheckpoint` for one that cannot be read.
  """
  if not checkpoint.exists(config.logdir):
    return None
  if not config.resume:
    resume.refuse_fresh_run(config.logdir, f"a checkpoint ({checkpoint.STATE_FILE})")
  return checkpoint.load(config.logdir)


def _restore(algorithm, state: dict, arrays, logdir: str) -> None:
  try:
    algorithm.restore(state, arrays)
  except (KeyError, TypeError, IndexError, AttributeError) as e:
    raise resume.CorruptCheckpoint(os.path.join(logdir, checkpoint.STATE_FILE),
                                   f"a malformed or missing entry ({e!r})") from e


def export_elite(algorithm, export_dir: str, observation_spec: tf.TensorSpec,
                 env_protocol=None) -> str:
  """Slices the elite out of the population into a plain network and exports it."""
  from tfrl import export as export_lib  # the GA3C engineer's policy format.
  policy = population_net.SingleNetwork(algorithm.layout, algorithm.elite_params())
  return export_lib.export_policy(policy, observation_spec, export_dir, env_protocol)


def _saved_generation(logdir: str) -> int:
  try:
    return checkpoint.load(logdir)[0]["generation"] if checkpoint.exists(logdir) else 0
  except ValueError:
    return 0


def _save(algorithm, logdir: str, identity: Dict[str, Any]) -> None:
  state, arrays = algorithm.state()
  state = dict(state, run=identity)
  try:
    checkpoint.save(logdir, state, arrays)
  except OSError as e:
    raise cli.RunFailed(
        f"cannot write the checkpoint of generation {algorithm.generation} in {logdir}: "
        f"{e.strerror or e}; the checkpoint there still holds generation "
        f"{_saved_generation(logdir)} (resume with --resume)") from e


def _export(algorithm, export_dir: str, observation_spec: tf.TensorSpec, writer,
            env_protocol=None) -> None:
  try:
    export_elite(algorithm, export_dir, observation_spec, env_protocol)
  except (OSError, tf.errors.OpError) as e:
    writer.close()
    raise cli.RunFailed(f"cannot export the elite to {export_dir}: {resume.first_line(e)}; "
                        f"the checkpoint holds generation {algorithm.generation}") from e


def run(algorithm, config: RunConfig, observation_spec: tf.TensorSpec,
        print_fn: Callable[[str], None] = print,
        on_start: Optional[Callable[[], None]] = None) -> List[Dict[str, float]]:
  """Runs generations; returns the list of per-generation metrics.

  `on_start` is called once the checkpoint is restored (or there is none),
  before the first generation: what it writes survives only accepted runs.
  """
  os.makedirs(config.logdir, exist_ok=True)
  identity = run_identity(algorithm, observation_spec, config.identity)
  saved = open_checkpoint(config)
  if saved is not None:
    state, arrays = saved
    resume.check_same_run(state.get("run"), identity, config.logdir)
    _restore(algorithm, state, arrays, config.logdir)
    print_fn(f"[{algorithm.name}] resumed from {config.logdir} at generation "
             f"{algorithm.generation} ({algorithm.frames} frames)")
  elif config.resume:
    print_fn(f"[{algorithm.name}] {resume.nothing_to_resume(config.logdir)}")
  if on_start is not None:
    on_start()
  writer = tf.summary.create_file_writer(config.logdir)
  history = []
  export_dir = os.path.join(config.logdir, "elite")
  with stopping.on_signals(algorithm.evaluator.stop) as stop:
    while not stop.is_set() and algorithm.generation < config.generations and (
        config.max_frames <= 0 or algorithm.frames < config.max_frames):
      try:
        metrics = algorithm.step()
      except evaluation.Stopped:
        # The step may have changed the state half-way (ES updates theta
        # before it scores the centre): go back to the saved generation.
        if checkpoint.exists(config.logdir):
          _restore(algorithm, *checkpoint.load(config.logdir), config.logdir)
        break
      except evaluators.WorkersLost as e:
        writer.close()
        raise evaluators.WorkersLost(
            f"{e}; the checkpoint in {config.logdir} holds generation "
            f"{_saved_generation(config.logdir)} (resume with --resume, with or "
            f"without Ray)") from e
      history.append(metrics)
      print_fn(format_line(algorithm.name, metrics))
      with writer.as_default(step=metrics["generation"]):
        for key in SCALARS:
          tf.summary.scalar(f"{algorithm.name}/{key}", metrics[key])
        tf.summary.scalar(f"{algorithm.name}/nan_returns", metrics.get("nan_returns", 0))
      writer.flush()
      try:
        _save(algorithm, config.logdir, identity)
      except cli.RunFailed:
        writer.close()
        raise
      if (config.export and config.export_every > 0 and
          metrics["generation"] % config.export_every == 0):
        _export(algorithm, export_dir, observation_spec, writer, config.env_protocol)
      if config.target_score is not None and metrics["elite"] >= config.target_score:
        break
  if stop.is_set():
    print_fn(f"[{algorithm.name}] stopped by a signal; the checkpoint in {config.logdir} "
             f"holds generation {algorithm.generation} (resume with --resume)")
  if config.export and algorithm.generation > 0:
    with stopping.final_save(config.logdir):
      _export(algorithm, export_dir, observation_spec, writer, config.env_protocol)
    print_fn(f"[{algorithm.name}] elite ({algorithm.elite_score:.2f}) exported to "
             f"{export_dir}")
  writer.close()
  return history
