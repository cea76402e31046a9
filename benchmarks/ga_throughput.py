"""GA generation frames/s on an Atari game next to the env-only frames/s.

Side by side in one run, on the same `AtariEnv` slots:

  * env-only: all slots stepped with random actions, nothing else, in as
    many slot groups (threads) as the GA runs, dispatched two ways: one
    tf.function call per step, and a graph loop of --loop_steps steps per
    call (as the GA's evaluator plays); the best env-only run is the baseline;
  * GA: whole generations (rebuild weights from seed chains, pipelined
    evaluation with the population network, elite re-evaluation, selection)
    for each network arch, precision setting, inference mode (every layer
    in full at every step, or incremental), slot-group count and
    episodes per evaluation asked for (with several episodes per network the
    episodes of one network run side by side and share each read of its
    kernels; the GA itself is then a different, less noisy, configuration).

Frames are emulator frames (env steps x frame_skip). Episodes are capped at
--episode_frame_cap frames so that a generation is short. The runs are
interleaved over --rounds; each reports its best wall-clock frames/s, its
median frames per process-CPU-second (robust when other processes share the
machine), and the median over rounds of its wall-clock frames/s over that
round's best env-only run (robust when the machine's speed drifts).

    python benchmarks/ga_throughput.py --game=pong --archs=small,large

With --preset=NAME the GA rows are replaced by the preset's own run: its
algorithm (GA, ES or random search), network, population, slots, slot
groups, episode cap and elite re-evaluation, built as its entry point builds
them from its seed (--preset_flags adds flags), one whole generation per
round; the env-only rows step the preset's slots (its game and env
protocol, --num_envs and --slot_groups) and --game, --num_envs,
--slot_groups and the GA-grid flags are ignored:

    python benchmarks/ga_throughput.py --preset=ga_frostbite_small --rounds=3

Prints a table and writes JSON (--output).
"""

import json
import os
import sys
import threading
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import preset_runs  # pylint: disable=g-import-not-at-top
from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl import ga  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import evaluation  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import evaluators  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import genome as genome_lib  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import noise as noise_lib  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import population_net as pn  # pylint: disable=g-import-not-at-top
from tfrl.ops import population as pop_ops  # pylint: disable=g-import-not-at-top

_GAME = flags.DEFINE_string("game", "pong", "Atari game.")
_NUM_ENVS = flags.DEFINE_integer("num_envs", 32, "Env slots.")
_POPULATION = flags.DEFINE_integer("population", 32, "GA population.")
_ARCHS = flags.DEFINE_list("archs", ["small", "large"], "Population network archs.")
_GROUPS = flags.DEFINE_list("slot_groups", ["1", "2"], "Slot-group counts to compare.")
# Precision settings: name -> (NetworkConfig.weight_dtype, .conv_input_dtype).
PRECISIONS = {"float32": ("float32", "float32"), "bfloat16": ("bfloat16", "float32"),
              "bfloat16_conv_inputs": ("bfloat16", "bfloat16")}
_PRECISIONS = flags.DEFINE_list(
    "precisions", ["float32", "bfloat16"],
    f"Precision settings to compare, from {sorted(PRECISIONS)}: float32; bfloat16 "
    "kernels; bfloat16 kernels and convolution inputs (AMX tiles where the CPU has them).")
INFERENCES = ("full", "incremental")
_INFERENCES = flags.DEFINE_list(
    "inference", ["full", "incremental"],
    f"How the GA's networks play, from {INFERENCES}: every layer in full at every "
    "step, or incremental (only what the frames' change since the last step changes).")
_EPISODES = flags.DEFINE_list("episodes_per_eval", ["1"],
                              "Episodes per network and generation to compare.")
_ELITE_CANDIDATES = flags.DEFINE_integer("elite_candidates", 2,
                                         "Top networks re-evaluated each generation.")
_ELITE_EPISODES = flags.DEFINE_integer("elite_episodes", 1,
                                       "Episodes of each elite candidate's re-evaluation.")
_GENERATIONS = flags.DEFINE_integer("rounds", 3,
                                    "Interleaved rounds (one generation per GA cell each).")
_CAP = flags.DEFINE_integer("episode_frame_cap", 1000, "Frame cap per episode.")
_ENV_SECONDS = flags.DEFINE_float("env_seconds", 10.0, "Env-only measuring time per round.")
_LOOP_STEPS = flags.DEFINE_integer("loop_steps", 32, "Env-only steps per graph-loop call.")
_OUTPUT = flags.DEFINE_string("output", "ga_throughput.json", "JSON results path.")
_PRESET = flags.DEFINE_string(
    "preset", "", "A neuroevolution preset on an Atari game: measure its own run "
    "against env-only on its slots (see above).")
_PRESET_FLAGS = flags.DEFINE_list("preset_flags", [],
                                  "Flags appended to the preset's, e.g. population=64.")


def env_only(env, step, groups, seconds, steps_per_call=1):
  """(wall frames/s, frames per process-CPU-second) of random-action stepping.

  The slots are cut into `groups` groups, each stepped by its own thread (as
  the GA's slot groups are), so that env-only gets the same overlap.
  `step(slots)` plays `steps_per_call` steps of the slots.
  """
  env.reset()
  slots = [tf.constant(g, tf.int32)
           for g in np.array_split(np.arange(env.num_envs), groups)]
  for g in slots:
    step(g)
  steps = [0] * groups
  start, cpu = time.perf_counter(), time.process_time()

  def run(i):
    while time.perf_counter() - start < seconds:
      step(slots[i])[0].numpy()
      steps[i] += int(slots[i].shape[0]) * steps_per_call

  threads = [threading.Thread(target=run, args=(i,)) for i in range(groups)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  frames = sum(steps) * env.frame_skip
  return (frames / (time.perf_counter() - start),
          frames / max(time.process_time() - cpu, 1e-9))


def make_ga(env, arch, groups, precision, episodes, inference):
  weight_dtype, conv_input_dtype = PRECISIONS[precision]
  layout = pn.ParamLayout(pn.NetworkConfig(arch=arch, weight_dtype=weight_dtype,
                                           conv_input_dtype=conv_input_dtype),
                          env.observation_shape, env.num_actions)
  table = noise_lib.NoiseTable(0, max(1 << 22, 4 * layout.dim))
  net = pn.PopulationNetwork(layout, _POPULATION.value)
  pipelined = evaluation.PipelinedEvaluator(env, net, num_groups=groups,
                                            episode_frame_cap=_CAP.value,
                                            incremental=inference == "incremental")
  config = ga.GAConfig(population=_POPULATION.value, truncation=10,
                       mutation_power=0.002, elite_candidates=_ELITE_CANDIDATES.value,
                       elite_episodes=_ELITE_EPISODES.value,
                       episodes_per_eval=episodes)
  # The parent cache the entry points size (NeuroevolutionConfig.cache_size).
  builder = genome_lib.ParamBuilder(
      table, layout.init_scale, cache_size=config.truncation + config.elite_candidates + 2)
  # Not closed: it would close the env all the cells share.
  evaluator = evaluators.LocalEvaluator(pipelined, builder)
  algo = ga.GeneticAlgorithm(config, layout, table, evaluator)
  # Warm-up (tracing) on two networks; the measured rounds are whole generations.
  net.load(np.zeros((2, layout.dim), np.float32))
  pipelined.evaluate(2, 1)
  return algo


def ga_generation(algo):
  """(wall frames/s, eval-only frames/s, frames per CPU-second) of one generation."""
  cpu = time.process_time()
  m = algo.step()
  cpu = time.process_time() - cpu
  # The frames played in the generation's time (with the GA's overlapped elite
  # calls, the next population's, not the generation's own).
  frames = m.get("played_frames", m["generation_frames"])
  return (frames / m["generation_seconds"], frames / m["eval_seconds"],
          frames / max(cpu, 1e-9))


def preset_cells(preset, extra):
  """(env-only env, {name: algorithm}, setup) of a preset: its env protocol and
  slots for env-only (with auto-reset), its own algorithm for the other row."""
  from tfrl.envs.make import make_env  # pylint: disable=import-outside-toplevel
  kind, config = preset_runs.config(preset, extra)
  if not config.env.is_atari:
    raise app.UsageError(f"--preset={preset} plays {config.env.env}, not an Atari game: "
                         "use benchmarks/mujoco_throughput.py.")
  if config.uses_ray:
    raise app.UsageError("--preset measures the local evaluator: drop --ray_address.")
  setup, algorithm = preset_runs.build(config)
  spec = setup.spec
  env = make_env(config.env, spec.num_envs, spec.env_seed)
  print(f"preset={preset} ({kind}) {setup.evaluator.describe()} | "
        f"{setup.layout.describe()} | cpus={os.cpu_count()}", flush=True)
  algorithm.step()  # warm-up generation: tracing, the first population's weights
  return env, {f"{kind}, preset {preset}": algorithm}, setup


def check_flags():
  unknown = sorted(set(_PRECISIONS.value) - set(PRECISIONS))
  if unknown:
    raise app.UsageError(f"--precisions: unknown {unknown}; allowed: {sorted(PRECISIONS)}")
  unknown = sorted(set(_INFERENCES.value) - set(INFERENCES))
  if unknown:
    raise app.UsageError(f"--inference: unknown {unknown}; allowed: {list(INFERENCES)}")
  if "incremental" in _INFERENCES.value and "bfloat16_conv_inputs" in _PRECISIONS.value:
    raise app.UsageError("--inference=incremental needs float32 convolution inputs: "
                         "drop bfloat16_conv_inputs from --precisions.")


def env_only_steps(env):
  """(one step per call, a graph loop of --loop_steps steps per call) of random actions."""
  @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
  def random_step(slots):
    actions = tf.random.uniform(tf.shape(slots), 0, env.num_actions, tf.int32)
    return env.step(actions, slots)

  loop_steps = _LOOP_STEPS.value

  @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
  def random_loop(slots):
    def body(i, obs):
      del obs
      return i + 1, random_step(slots)[0]
    return tf.while_loop(lambda i, obs: i < loop_steps, body,
                         (tf.constant(0), env.observe(slots)), parallel_iterations=1)[1:]

  return random_step, random_loop


def ga_grid_cells():
  """{(arch, groups, precision, episodes, inference): GA} on the GA's own slots."""
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  # The GA's slots as the entry points make them: no auto-reset (each episode
  # starts with its own seeded reset, the only reset it spends).
  ga_env = AtariEnv(_GAME.value, _NUM_ENVS.value, seed=0, auto_reset=False)
  return {(arch, int(g), dt, int(e), inf): make_ga(ga_env, arch, int(g), dt, int(e), inf)
          for arch in _ARCHS.value for dt in _PRECISIONS.value for e in _EPISODES.value
          for inf in _INFERENCES.value for g in _GROUPS.value}


def measure(env, env_cells, cells):
  """{cell: [(wall frames/s, frames per CPU-second, eval-only frames/s) per round]};
  interleaved rounds, so that load from other processes hits every run alike."""
  results = {key: [] for key in env_cells}
  results.update({key: [] for key in cells})
  for rnd in range(_GENERATIONS.value):
    for key, (g, fn, n) in env_cells.items():
      results[key].append(env_only(env, fn, g, _ENV_SECONDS.value, n) + (None,))
    for key, algo in cells.items():
      wall, evalonly, per_cpu = ga_generation(algo)
      results[key].append((wall, per_cpu, evalonly))
    print(f"round {rnd + 1}: " + ", ".join(
        f"{k if isinstance(k, str) else f'{k[0]}/{k[2]}/{k[4]}/g{k[1]}/e{k[3]}'} {v[-1][0]:.0f}"
        for k, v in results.items()), flush=True)
  return results


def report(results, env_cells):
  """The table (printed) and its rows: the best wall-clock round and the median
  CPU efficiency, against env-only's best configuration."""
  base_wall = max(r[0] for key in env_cells for r in results[key])
  base_cpu = max(float(np.median([r[1] for r in results[key]])) for key in env_cells)
  # Also each round against that round's best env-only run, whose median is
  # robust to the machine's speed drifting between rounds (a shared VM's does).
  round_base = [max(results[key][i][0] for key in env_cells)
                for i in range(_GENERATIONS.value)]
  header = (f"{'run':<52} | {'best frames/s':>13} | {'frames/CPU-s':>12} | "
            f"{'wall vs env':>11} | {'CPU-eff. vs env':>15} | {'median round ratio':>18}")
  print(header)
  print("-" * len(header))
  rows = []
  for key, runs in results.items():
    wall = max(r[0] for r in runs)
    per_cpu = float(np.median([r[1] for r in runs]))
    name = (key if isinstance(key, str) else
            f"GA {key[0]} {key[2]} {key[4]} g={key[1]} eps={key[3]}")
    round_ratio = float(np.median([r[0] / b for r, b in zip(runs, round_base)]))
    rows.append({"run": name, "best_frames_per_s": wall, "frames_per_cpu_second": per_cpu,
                 "wall_ratio_to_env_only": wall / base_wall,
                 "cpu_efficiency_ratio_to_env_only": per_cpu / base_cpu,
                 "median_round_wall_ratio": round_ratio,
                 "rounds": [list(r) for r in runs]})
    print(f"{name:<52} | {wall:>13.0f} | {per_cpu:>12.0f} | {wall / base_wall:>11.2f} | "
          f"{per_cpu / base_cpu:>15.2f} | {round_ratio:>18.2f}")
  return rows


def main(argv):
  del argv
  check_flags()
  record = provenance.provenance()
  pop_ops.load_library()
  preset_setup = None
  if _PRESET.value:
    env, cells, preset_setup = preset_cells(_PRESET.value, _PRESET_FLAGS.value)
    groups = [str(preset_setup.spec.slot_groups)]
  else:
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    env = AtariEnv(_GAME.value, _NUM_ENVS.value, seed=0)
    groups = _GROUPS.value
    print(f"game={_GAME.value} slots={_NUM_ENVS.value} population={_POPULATION.value} "
          f"frame_skip={env.frame_skip} cap={_CAP.value} cpus={os.cpu_count()}", flush=True)
  random_step, random_loop = env_only_steps(env)
  if not _PRESET.value:
    cells = ga_grid_cells()
  env_cells = {f"env-only groups={g}{name}": (int(g), fn, n) for g in groups
               for name, fn, n in (("", random_step, 1),
                                   (" loop", random_loop, _LOOP_STEPS.value))}
  rows = report(measure(env, env_cells, cells), env_cells)
  shape = ({"preset": _PRESET.value, "preset_flags": _PRESET_FLAGS.value,
            "evaluator": preset_setup.evaluator.describe()} if preset_setup else
           {"game": _GAME.value, "num_envs": _NUM_ENVS.value, "population": _POPULATION.value,
            "episode_frame_cap": _CAP.value})
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, **shape, "cpus": os.cpu_count(),
               "round_fields": ["wall frames/s", "frames per CPU-second",
                                "eval-only frames/s (GA)"],
               "results": rows}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")
  if preset_setup is not None:
    preset_setup.evaluator.close()
  env.close()


if __name__ == "__main__":
  app.run(main)
