"""GA generations locally and on Ray workers, side by side in one run.

    python benchmarks/distributed_throughput.py --flagfile=flags/ga_frostbite_small.flags

On the preset's population, network and frame cap, one run measures:

  * generation frames/s of the local evaluator, of Ray with 1 worker (all
    the machine's CPUs) and with 2 workers (half each), the same GA from the
    same seed, interleaved over --rounds of --generations_per_round
    generations (each config's generations give identical scores: checked);
  * the Ray path's overhead per generation: the same with episodes capped
    at --overhead_frame_cap frames, so that dispatch weighs most; with one
    worker, the driver's wall time less the time the worker spent in its
    chunks is what dispatch, (de)serialization and waiting cost;
  * bytes sent to and received from the workers per generation (the
    pickled requests and results, plus ES centres read from the object store);
  * start-up apart: Ray itself, and a worker's start with the noise table
    rebuilt from its seed or read from the object store.

On a machine with few cores this measures the Ray path's overhead and its
correctness, not scale-out: the workers share the same CPUs as the local run.
Prints tables and writes JSON with the commit, command, CPU and date.
"""

import dataclasses
import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl import ga  # pylint: disable=g-import-not-at-top
# The GA's flags.
from tfrl.ga import __main__ as ga_entry  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import noise as noise_lib  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import ray_evaluator  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import runner  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import worker  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
_ROUNDS = flags.DEFINE_integer("rounds", 2, "Interleaved rounds of every config.")
_GENERATIONS = flags.DEFINE_integer("generations_per_round", 2,
                                    "GA generations per config and round (from the seed).")
_OVERHEAD_CAP = flags.DEFINE_integer("overhead_frame_cap", 40,
                                     "Episode frame cap of the overhead runs.")
_OVERHEAD_GENERATIONS = flags.DEFINE_integer("overhead_generations", 5,
                                             "Generations of each overhead run.")
_OUTPUT = flags.DEFINE_string("output", "distributed_throughput.json", "JSON results path.")


def run_generations(evaluator, table, layout, generations):
  """(seconds, frames, bytes sent, bytes received, scores, worker seconds) of a GA
  from the seed."""
  algorithm = ga.GeneticAlgorithm(ga_entry.config_from_flags().algorithm, layout, table,
                                  evaluator)
  sent = getattr(evaluator, "bytes_sent", 0)
  received = getattr(evaluator, "bytes_received", 0)
  busy = getattr(evaluator, "worker_seconds", 0.0)
  start, frames, scores = time.perf_counter(), 0, []
  for _ in range(generations):
    m = algorithm.step()
    frames += m["generation_frames"]
    scores.append((m["best"], m["mean"], m["elite"], m["generation_frames"]))
  seconds = time.perf_counter() - start
  return (seconds, frames, getattr(evaluator, "bytes_sent", 0) - sent,
          getattr(evaluator, "bytes_received", 0) - received, scores,
          getattr(evaluator, "worker_seconds", 0.0) - busy)


def make_evaluators(spec, table, cpus, noise="seed"):
  """{name: evaluator}: local, Ray with 1 worker, Ray with 2 workers."""
  made = {"local": worker.build_local(spec, table)}
  for workers in (1, 2):
    per_worker = dataclasses.replace(spec, num_envs=max(1, spec.num_envs // workers),
                                     slot_groups=min(spec.slot_groups,
                                                     max(1, spec.num_envs // workers)))
    config = ray_evaluator.RayConfig(address="auto", workers=workers,
                                     worker_cpus=cpus / workers, noise=noise)
    made[f"ray {workers} worker{'s' if workers > 1 else ''}"] = (
        ray_evaluator.RayEvaluator(per_worker, config, table))
  return made


def start_ray(cpus, table):
  """Starts a local Ray; the seconds it took."""
  os.environ[ray_evaluator.LOOPBACK_ENV] = "0"
  import ray  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  # Ray's CPUs are a count for placement: the 1-worker and 2-worker configs
  # are kept alive side by side (one plays at a time), each sized to the machine.
  ray.init(address="local", num_cpus=2 * cpus, include_dashboard=False, log_to_driver=False,
           object_store_memory=max(512 << 20, 3 * table.noise.nbytes))
  return time.perf_counter() - start


def worker_startup(spec, table, cpus):
  """{noise source: a worker's start, seconds in the worker and wall seconds}."""
  startup = {}
  for noise in ("seed", "object_store"):
    start = time.perf_counter()
    probe = ray_evaluator.RayEvaluator(
        dataclasses.replace(spec, num_envs=2, slot_groups=1),
        ray_evaluator.RayConfig(address="auto", workers=1, worker_cpus=cpus, noise=noise),
        table)
    startup[noise] = {"worker_seconds": probe.startup_seconds[0],
                      "wall_seconds": time.perf_counter() - start}
    probe.close()
  return startup


def measure_rounds(spec, table, layout, cpus):
  """{evaluator name: [run_generations(...) per round]}, the rounds interleaved."""
  evaluators = make_evaluators(spec, table, cpus)
  runs = {name: [] for name in evaluators}
  for r in range(_ROUNDS.value):
    for name, evaluator in evaluators.items():
      runs[name].append(run_generations(evaluator, table, layout, _GENERATIONS.value))
      seconds, frames = runs[name][-1][:2]
      print(f"round {r + 1} {name:<14} {frames / seconds:9.0f} frames/s", flush=True)
  for evaluator in evaluators.values():
    evaluator.close()
  return runs


def measure_overhead(spec, table, layout, cpus):
  """({name: seconds per short-episode generation}, {name: of which outside the
  workers' chunks})."""
  short = dataclasses.replace(
      spec, env=dataclasses.replace(spec.env, max_episode_frames=_OVERHEAD_CAP.value))
  overhead, dispatch = {}, {}
  for name, evaluator in make_evaluators(short, table, cpus).items():
    run_generations(evaluator, table, layout, 1)  # traced, weights cached
    seconds, _, _, _, _, busy = run_generations(
        evaluator, table, layout, _OVERHEAD_GENERATIONS.value)
    overhead[name] = seconds / _OVERHEAD_GENERATIONS.value
    dispatch[name] = (seconds - busy) / _OVERHEAD_GENERATIONS.value
    evaluator.close()
  return overhead, dispatch


def result_rows(runs, overhead, dispatch):
  """The table's rows (printed) and their JSON."""
  rows = []
  print(f"\n{'run':<16} | {'best frames/s':>13} | {'ratio to local (median)':>23} | "
        f"{'bytes sent/gen':>14} | {'bytes recv/gen':>14} | {'short-episode gen s':>19}")
  for name, results in runs.items():
    best = max(frames / seconds for seconds, frames, *_ in results)
    ratios = [(frames / seconds) / (lf / ls) for (seconds, frames, *_), (ls, lf, *_)
              in zip(results, runs["local"])]
    gens = _GENERATIONS.value
    sent = float(np.mean([r[2] for r in results])) / gens
    received = float(np.mean([r[3] for r in results])) / gens
    rows.append({"run": name, "best_frames_per_s": best,
                 "median_round_ratio_to_local": float(np.median(ratios)),
                 "round_frames_per_s": [frames / seconds for seconds, frames, *_ in results],
                 "bytes_sent_per_generation": sent,
                 "bytes_received_per_generation": received,
                 "short_episode_generation_seconds": overhead[name],
                 "driver_seconds_outside_worker_chunks_per_generation":
                     dispatch[name] if name != "local" else None})
    print(f"{name:<16} | {best:>13.0f} | {np.median(ratios):>23.2f} | {sent:>14.0f} | "
          f"{received:>14.0f} | {overhead[name]:>19.3f}")
  return rows


def main(argv):
  del argv
  fv = FLAGS
  cpus = os.cpu_count()
  record = provenance.provenance()
  spec, _ = runner.worker_spec(ga_entry.config_from_flags(), fv.population)
  layout = spec.layout()
  table = noise_lib.NoiseTable(fv.seed, fv.noise_table_size)
  print(f"{layout.describe()} | population {fv.population} | {spec.num_envs} slots | "
        f"cap {spec.episode_frame_cap} | {record['cpu_model']}, {cpus} cores", flush=True)
  ray_init_seconds = start_ray(cpus, table)
  startup = worker_startup(spec, table, cpus)
  runs = measure_rounds(spec, table, layout, cpus)
  identical = all(run[4] == runs["local"][0][4] for name in runs for run in runs[name])
  overhead, dispatch = measure_overhead(spec, table, layout, cpus)
  import ray  # pylint: disable=import-outside-toplevel
  ray.shutdown()

  rows = result_rows(runs, overhead, dispatch)
  one = dispatch["ray 1 worker"]
  print(f"\nshort episodes, 1 worker: {one:.3f} s of each {overhead['ray 1 worker']:.3f} s "
        f"generation outside the worker's chunks (dispatch, pickling, waiting)")
  print(f"identical scores in every config and round: {identical}")
  print(f"Ray start {ray_init_seconds:.1f} s; a worker's start: "
        + "; ".join(f"noise from {k} {v['worker_seconds']:.2f} s in the worker, "
                    f"{v['wall_seconds']:.2f} s wall" for k, v in startup.items()))
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, "population": fv.population, "num_envs": spec.num_envs,
               "episode_frame_cap": spec.episode_frame_cap, "arch": layout.describe(),
               "generations_per_round": _GENERATIONS.value, "rounds": _ROUNDS.value,
               "overhead_frame_cap": _OVERHEAD_CAP.value, "identical_scores": identical,
               "ray_init_seconds": ray_init_seconds, "worker_startup": startup,
               "results": rows}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
