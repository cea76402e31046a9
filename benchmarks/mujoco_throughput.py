"""MuJoCo env steps per second: the env-only bound next to tfrl's evaluator, in one run.

  python benchmarks/mujoco_throughput.py --preset=es_humanoid --seconds=60 --rounds=3 \\
      --output=benchmarks/results/mujoco_throughput_<machine>.json

Rows, each measured once per round (interleaved rounds), random play:

  * `mj_step`: the bare physics of the preset env's model (gymnasium's
    model file), one thread, `mujoco.mj_step(model, data, nstep=frame_skip)`
    with uniformly random controls and a reset when the model's state goes
    non-finite: the physics' own rate, per env step (frame_skip mj_steps).
  * `gymnasium, 1 process`: gymnasium's env (`gym.make(id)`, its wrappers)
    for a batch of --num_envs envs stepped in turn with uniformly random
    actions, reset when an episode ends: one core.
  * `gymnasium, 1 process x 2 threads`: the same batch split over two threads
    of one process (mj_step releases the GIL; gymnasium's Python does not).
  * `gymnasium, N processes` (N = --env_processes, default: the cores): the
    batch split over one process per core. **The env-only bound**: what the
    machine's cores give the env alone.
  * `MuJoCo ops, 1 process`: tfrl's MujocoEnv (the same episodes stepped by
    the MuJoCo ops, C++ on TF's thread pool) for the batch, random actions,
    auto-reset, one graph call per batch step: the env-only rate of what the
    evaluator steps by default.
  * `tfrl <algorithm>, local`: whole generations of the preset's algorithm
    (its population network, head, observation normalization, slots and
    slot groups, elite or centre evaluation included) from its seed; env steps
    from its frame counter. On the MuJoCo ops, and again on gymnasium's envs
    (--env_implementation=gymnasium, the code before the ops): same results,
    other speed.
  * `tfrl <algorithm>, ray N workers` (with --ray_workers=N): the same on a
    local Ray instance on 127.0.0.1, one worker per core, --num_envs / N
    slots each.

Each row keeps its best round; the table gives each tfrl row's median over
rounds of its steps/s over the same round's bound (the figure to quote), and
the JSON holds every round. The target for the Humanoid presets is 0.8.
Random networks make Humanoid's episodes short (it falls within ~40 steps),
so resets weigh more than in a trained run; the env-only rows reset as often.
"""

import json
import multiprocessing
import os
import statistics
import sys
import threading
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import preset_runs  # pylint: disable=g-import-not-at-top
from benchmarks import provenance  # pylint: disable=g-import-not-at-top

_PRESET = flags.DEFINE_string("preset", "es_humanoid", "A neuroevolution preset (flags/).")
_SECONDS = flags.DEFINE_float("seconds", 30.0, "Measuring time per row and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds over all rows.")
_NUM_ENVS = flags.DEFINE_integer("num_envs", 0, "Envs of the env-only rows (0: the preset's).")
_ENV_PROCESSES = flags.DEFINE_integer("env_processes", 0,
                                      "Processes of the env-only bound (0: one per core).")
_RAY_WORKERS = flags.DEFINE_integer("ray_workers", 0,
                                    "Also run the algorithm on this many Ray workers (0: no).")
_OVERRIDES = flags.DEFINE_list("preset_flags", [],
                               "Flags appended to the preset's, e.g. population=16.")
_OUTPUT = flags.DEFINE_string("output", "mujoco_throughput.json", "JSON path.")


def _timed(step, seconds: float) -> float:
  """Calls step() (returns env steps done) for about `seconds`; steps/s."""
  step()  # warm up
  done, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    done += step()
  return done / (time.perf_counter() - start)


def mj_step_rate(env_id: str, seconds: float) -> dict:
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  import mujoco  # pylint: disable=import-outside-toplevel
  env = gym.make(env_id).unwrapped
  model, frame_skip = env.model, env.frame_skip
  data = mujoco.MjData(model)
  rng = np.random.default_rng(0)
  low, high = model.actuator_ctrlrange.T

  def step():
    data.ctrl[:] = rng.uniform(low, high)
    mujoco.mj_step(model, data, nstep=frame_skip)
    if not np.all(np.isfinite(data.qacc)):
      mujoco.mj_resetData(model, data)
    return 1
  rate = _timed(step, seconds)
  return {"env_steps_per_second": rate, "mj_steps_per_second": rate * frame_skip,
          "frame_skip": frame_skip}


def _gym_loop(env_id: str, num_envs: int, seconds: float, seed: int) -> float:
  """Steps/s of `num_envs` gymnasium envs stepped in turn (random actions)."""
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  envs = [gym.make(env_id) for _ in range(num_envs)]
  for i, env in enumerate(envs):
    env.reset(seed=seed + i)
  rng = np.random.default_rng(seed)
  space = envs[0].action_space

  def step():
    actions = rng.uniform(space.low, space.high, (num_envs,) + space.shape)
    for env, action in zip(envs, actions.astype(np.float32)):
      _, _, terminated, truncated, _ = env.step(action)
      if terminated or truncated:
        env.reset()
    return num_envs
  rate = _timed(step, seconds)
  for env in envs:
    env.close()
  return rate


def _gym_process(env_id, num_envs, seconds, seed, queue):
  queue.put(_gym_loop(env_id, num_envs, seconds, seed))


def gym_processes(env_id: str, num_envs: int, processes: int, seconds: float) -> float:
  """The batch split over `processes` processes stepping at once; total steps/s."""
  ctx = multiprocessing.get_context("spawn")
  queue = ctx.Queue()
  sizes = [len(part) for part in np.array_split(np.arange(num_envs), processes)]
  procs = [ctx.Process(target=_gym_process, args=(env_id, n, seconds, 1000 * i, queue))
           for i, n in enumerate(sizes)]
  for p in procs:
    p.start()
  rates = [queue.get() for _ in procs]
  for p in procs:
    p.join()
  return float(sum(rates))


def gym_threads(env_id: str, num_envs: int, threads: int, seconds: float) -> float:
  rates = []
  sizes = [len(part) for part in np.array_split(np.arange(num_envs), threads)]
  workers = [threading.Thread(target=lambda n=n, i=i: rates.append(
      _gym_loop(env_id, n, seconds, 1000 * i))) for i, n in enumerate(sizes)]
  for t in workers:
    t.start()
  for t in workers:
    t.join()
  return float(sum(rates))


def ops_env_rate(env_id: str, num_envs: int, seconds: float) -> float:
  """Steps/s of tfrl's MujocoEnv for the batch (random actions, auto-reset)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tfrl.envs.mujoco_env import MujocoEnv  # pylint: disable=import-outside-toplevel
  env = MujocoEnv(env_id, num_envs, seed=0)
  env.reset()
  low, high = env.action_space.low, env.action_space.high
  steps_per_call = 20

  @tf.function
  def play():
    for _ in tf.range(steps_per_call):
      env.step(tf.random.uniform((num_envs,) + env.action_shape, low, high, seed=None))
    return tf.constant(0)

  def step():
    play()
    return num_envs * steps_per_call
  rate = _timed(step, seconds)
  env.close()
  return rate


def tfrl_rate(preset: str, extra, seconds: float, ray_workers: int = 0) -> dict:
  """Env steps/s of whole generations of the preset's algorithm, from its seed."""
  import dataclasses  # pylint: disable=import-outside-toplevel
  kind, config = preset_runs.config(preset, extra)
  if ray_workers:
    ray = dataclasses.replace(config.ray, address="local", workers=ray_workers,
                              worker_envs=max(1, config.evaluator.num_envs // ray_workers),
                              worker_slot_groups=1)
    config = dataclasses.replace(config, ray=ray)
  setup, algorithm = preset_runs.build(config)
  describe = setup.evaluator.describe()  # while its workers are alive
  try:
    algorithm.step()  # warm up: tracing, the first population's weights
    steps, start = 0, time.perf_counter()
    generations = 0
    while time.perf_counter() - start < seconds:
      steps += algorithm.step()["generation_frames"] // config.env.frames_per_step
      generations += 1
    elapsed = time.perf_counter() - start
  finally:
    setup.evaluator.close()
  return {"env_steps_per_second": steps / elapsed, "generations": generations,
          "describe": describe, "network": setup.layout.describe()}


def _rows(config, env_id, num_envs, processes, seconds):
  rows = [
      ("mj_step, 1 thread", "physics", lambda: mj_step_rate(env_id, seconds)),
      ("gymnasium, 1 process", "env",
       lambda: {"env_steps_per_second": _gym_loop(env_id, num_envs, seconds, 0)}),
      ("gymnasium, 1 process x 2 threads", "env",
       lambda: {"env_steps_per_second": gym_threads(env_id, num_envs, 2, seconds)}),
      (f"gymnasium, {processes} processes (bound)", "bound",
       lambda: {"env_steps_per_second": gym_processes(env_id, num_envs, processes,
                                                      seconds)}),
      ("MuJoCo ops, 1 process", "env",
       lambda: {"env_steps_per_second": ops_env_rate(env_id, num_envs, seconds)}),
      (f"tfrl {config}, local", "tfrl",
       lambda: tfrl_rate(_PRESET.value, _OVERRIDES.value, seconds)),
      (f"tfrl {config}, local, gymnasium envs", "tfrl",
       lambda: tfrl_rate(_PRESET.value, _OVERRIDES.value + ["env_implementation=gymnasium"],
                         seconds)),
  ]
  if _RAY_WORKERS.value:
    rows.append((f"tfrl {config}, ray {_RAY_WORKERS.value} workers", "tfrl",
                 lambda: tfrl_rate(_PRESET.value, _OVERRIDES.value, seconds,
                                   _RAY_WORKERS.value)))
  return rows


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _ROUNDS.value < 1 or _SECONDS.value <= 0:
    raise app.UsageError("--rounds must be >= 1 and --seconds > 0.")
  kind, config = preset_runs.config(_PRESET.value, _OVERRIDES.value)
  env_id = config.env.env
  if not env_id:
    raise app.UsageError(f"--preset={_PRESET.value} plays an Atari game, not MuJoCo.")
  num_envs = _NUM_ENVS.value or config.evaluator.num_envs
  processes = _ENV_PROCESSES.value or os.cpu_count() or 1
  record = provenance.provenance()
  rows = _rows(kind, env_id, num_envs, processes, _SECONDS.value)
  results = [{"name": name, "kind": what, "rounds": []} for name, what, _ in rows]
  for round_index in range(_ROUNDS.value):
    for result, (name, _, run) in zip(results, rows):
      out = run()
      result["rounds"].append(out)
      print(f"  round {round_index}: {name}: {out['env_steps_per_second']:.0f} steps/s",
            flush=True)
  bound = next(r for r in results if r["kind"] == "bound")
  for r in results:
    rates = [o["env_steps_per_second"] for o in r["rounds"]]
    r["env_steps_per_second"] = max(rates)
    ratios = [rate / b["env_steps_per_second"] for rate, b in zip(rates, bound["rounds"])]
    r["round_ratios_to_bound"] = ratios
    r["median_round_ratio_to_bound"] = statistics.median(ratios)
  print(f"\n{env_id}, preset {_PRESET.value} ({num_envs} envs in the env-only rows), "
        f"{os.cpu_count()} cores, {record['cpu_model']}")
  print(f"{'row':44s} {'steps/s (best)':>15s} {'/ bound (median of rounds)':>28s}")
  for r in results:
    print(f"{r['name']:44s} {r['env_steps_per_second']:15.0f} "
          f"{r['median_round_ratio_to_bound']:28.2f}")
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, "preset": _PRESET.value, "env": env_id,
               "preset_flags": _OVERRIDES.value, "num_envs": num_envs,
               "env_processes": processes, "seconds_per_row": _SECONDS.value,
               "rounds": _ROUNDS.value, "results": results}, f, indent=1)
  print(f"\nwrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
