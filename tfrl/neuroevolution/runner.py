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
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional

import tensorflow as tf

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


def format_line(algorithm_name: str, m: Dict[str, float]) -> str:
  line = (f"[{algorithm_name}] gen {m['generation']:4d} | best {m['best']:9.2f} | "
          f"mean {m['mean']:9.2f} | elite {m['elite']:9.2f} | "
          f"frames {m['frames']:11d} | {m['frames_per_second']:9.0f} frames/s | "
          f"{m['generation_seconds']:6.2f} s")
  if m.get("nan_returns"):
    line += f" | {m['nan_returns']} NaN returns (ranked last)"
  return line


def export_elite(algorithm, export_dir: str, observation_spec: tf.TensorSpec) -> str:
  """Slices the elite out of the population into a plain network and exports it."""
  from tfrl import export as export_lib  # the GA3C engineer's policy format.
  policy = population_net.SingleNetwork(algorithm.layout, algorithm.elite_params())
  return export_lib.export_policy(policy, observation_spec, export_dir)


def _saved_generation(logdir: str) -> int:
  return checkpoint.load(logdir)[0]["generation"] if checkpoint.exists(logdir) else 0


def run(algorithm, config: RunConfig, observation_spec: tf.TensorSpec,
        print_fn: Callable[[str], None] = print) -> List[Dict[str, float]]:
  """Runs generations; returns the list of per-generation metrics."""
  os.makedirs(config.logdir, exist_ok=True)
  if config.resume and checkpoint.exists(config.logdir):
    state, arrays = checkpoint.load(config.logdir)
    algorithm.restore(state, arrays)
    print_fn(f"[{algorithm.name}] resumed from {config.logdir} at generation "
             f"{algorithm.generation} ({algorithm.frames} frames)")
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
          algorithm.restore(*checkpoint.load(config.logdir))
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
      state, arrays = algorithm.state()
      checkpoint.save(config.logdir, state, arrays)
      if (config.export and config.export_every > 0 and
          metrics["generation"] % config.export_every == 0):
        export_elite(algorithm, export_dir, observation_spec)
      if config.target_score is not None and metrics["elite"] >= config.target_score:
        break
  if stop.is_set():
    print_fn(f"[{algorithm.name}] stopped by a signal; the checkpoint in {config.logdir} "
             f"holds generation {algorithm.generation} (resume with --resume)")
  if config.export and algorithm.generation > 0:
    export_elite(algorithm, export_dir, observation_spec)
    print_fn(f"[{algorithm.name}] elite ({algorithm.elite_score:.2f}) exported to "
             f"{export_dir}")
  writer.close()
  return history
