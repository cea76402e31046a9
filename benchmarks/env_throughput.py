"""Atari emulator frames per second, side by side in one run.

Pong, 84x84 grayscale, frame skip 4 with max-pool, frame stack 4, random
actions, no sticky actions. Frames are emulator frames (agent steps x 4).

  python benchmarks/env_throughput.py --num_envs=8 --seconds=10 --rounds=3

Rows: the tfrl op env (eager, and a tf.function loop), ale-py's
AtariVectorEnv (its C++ thread pool), envpool (sync and async), a gymnasium
Python loop with AtariPreprocessing, and the raw single-thread ALE loop (act
every frame, grab the screen on the last two frames of a step: the per-core
limit). Prints a table and writes JSON.

envpool is a peer: it runs from its own virtualenv outside this repository
(--envpool_venv; `benchmarks/peers/setup_peers.sh envpool` makes it), each of
its rows a process of benchmarks/peers/envpool_atari.py with this run's game,
emulators and seconds, which reports its frames/s as JSON. Without the venv
its rows say so and the others run.
"""

import json
import os
import platform
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import frame_rate  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

_NUM_ENVS = flags.DEFINE_integer("num_envs", 8, "Emulators per batched env.")
_SECONDS = flags.DEFINE_float("seconds", 8.0, "Measuring time per row.")
_GAME = flags.DEFINE_string("game", "Pong", "Game (ALE name).")
_ROUNDS = flags.DEFINE_integer(
    "rounds", 1, "Rounds over all rows, interleaved; each row keeps its best round "
    "(robust when other processes share the machine).")
_OUTPUT = flags.DEFINE_string("output", "env_throughput.json",
                              "Where to write the JSON results.")
_ENVPOOL_VENV = flags.DEFINE_string("envpool_venv", "/work/peers/envpool",
                                    "Virtualenv with envpool (the envpool rows' peer).")

FRAME_SKIP = 4
ENVPOOL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers",
                              "envpool_atari.py")
ENVPOOL_PACKAGES = ("envpool", "envpool-assets", "gymnasium", "numpy")
# Beyond the measured seconds: envpool's import, the env's start and warm-up step.
ENVPOOL_START_SECONDS = 300


class RowFailed(Exception):
  """A row that gave no rate; the message says why."""


def tfrl_eager(game, n, seconds):
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  env = AtariEnv(game, n)
  env.reset()
  rng = np.random.default_rng(0)

  def step():
    env.step(rng.integers(env.num_actions, size=n, dtype=np.int32))
    return n * FRAME_SKIP
  return frame_rate.timed(step, seconds)


def tfrl_graph(game, n, seconds):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  env = AtariEnv(game, n)
  env.reset()
  steps = 50

  @tf.function
  def run():
    def body(i, total):
      actions = tf.random.uniform([n], 0, env.num_actions, tf.int32)
      _, reward, _, _ = env.step(actions)
      return i + 1, total + reward
    return tf.while_loop(lambda i, _: i < steps, body, (0, tf.zeros([n])))

  def step():
    run()
    return steps * n * FRAME_SKIP
  return frame_rate.timed(step, seconds)


def ale_vector(game, n, seconds):
  from ale_py import AtariVectorEnv  # pylint: disable=import-outside-toplevel
  env = AtariVectorEnv(game.lower(), n, num_threads=os.cpu_count(),
                       reward_clipping=False, use_fire_reset=True)
  env.reset(seed=0)
  rng = np.random.default_rng(0)
  num_actions = env.single_action_space.n

  def step():
    env.step(rng.integers(num_actions, size=n))
    return n * FRAME_SKIP
  rate = frame_rate.timed(step, seconds)
  env.close()
  return rate


def envpool_rate(python, game, n, seconds, asynchronous):
  """envpool's frames/s, from benchmarks/peers/envpool_atari.py run by `python`."""
  with tempfile.TemporaryDirectory(prefix="tfrl_envpool_") as tmp:
    result = os.path.join(tmp, "result.json")
    cmd = [python, ENVPOOL_SCRIPT, f"--game={game}", f"--num_envs={n}",
           f"--seconds={seconds:g}", f"--mode={'async' if asynchronous else 'sync'}",
           f"--frame_skip={FRAME_SKIP}", f"--output={result}"]
    done = runs.run_for(cmd, seconds + ENVPOOL_START_SECONDS, os.path.join(tmp, "out"),
                        env=runs.peer_env())
    try:
      with open(result) as f:
        return float(json.load(f)["frames_per_second"])
    except (OSError, ValueError, KeyError) as e:
      raise RowFailed(f"no rate (exit {done.returncode}, {done.how})\ncommand: "
                      f"{' '.join(cmd)}\noutput tail:\n{done.tail(5)}") from e


def envpool_side():
  """The envpool venv's python (None when missing) and the record of the peer."""
  python = os.path.join(_ENVPOOL_VENV.value, "bin", "python")
  side = {"venv": _ENVPOOL_VENV.value, "script": "benchmarks/peers/envpool_atari.py"}
  if not os.path.exists(python):
    side["missing"] = (f"no {python}: benchmarks/peers/setup_peers.sh envpool makes it "
                       "(--envpool_venv names another)")
    print(f"envpool rows not run: {side['missing']}", flush=True)
    return None, side
  side["versions"] = runs.venv_versions(_ENVPOOL_VENV.value, ENVPOOL_PACKAGES)
  return python, side


def gymnasium_loop(game, seconds):
  import ale_py  # pylint: disable=import-outside-toplevel
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  gym.register_envs(ale_py)
  env = gym.wrappers.FrameStackObservation(gym.wrappers.AtariPreprocessing(
      gym.make(f"{game}NoFrameskip-v4"), frame_skip=FRAME_SKIP, noop_max=30), 4)
  env.reset(seed=0)
  rng = np.random.default_rng(0)

  def step():
    _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
    if terminated or truncated:
      env.reset()
    return FRAME_SKIP
  return frame_rate.timed(step, seconds)


def raw_ale(game, seconds):
  import ale_py  # pylint: disable=import-outside-toplevel
  from ale_py import roms  # pylint: disable=import-outside-toplevel
  ale = ale_py.ALEInterface()
  ale.setLoggerMode(ale_py.LoggerMode.Error)
  ale.setFloat("repeat_action_probability", 0.0)
  ale.loadROM(roms.get_rom_path(game.lower()))
  actions = ale.getMinimalActionSet()
  rng = np.random.default_rng(0)
  screen = np.zeros((210, 160), np.uint8)

  def step():
    action = actions[int(rng.integers(len(actions)))]
    for f in range(FRAME_SKIP):
      ale.act(action)
      if f >= FRAME_SKIP - 2:
        ale.getScreenGrayscale(screen)
    if ale.game_over():
      ale.reset_game()
    return FRAME_SKIP
  return frame_rate.timed(step, seconds)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  game, n, seconds = _GAME.value, _NUM_ENVS.value, _SECONDS.value
  if _ROUNDS.value < 1:
    raise app.UsageError(f"--rounds must be >= 1, got {_ROUNDS.value}")
  record = provenance.provenance()
  cores = os.cpu_count()
  python, envpool = envpool_side()
  rows = [
      ("raw ALE loop, 1 thread", 1, lambda: raw_ale(game, seconds)),
      ("tfrl op env, eager", n, lambda: tfrl_eager(game, n, seconds)),
      ("tfrl op env, tf.function", n, lambda: tfrl_graph(game, n, seconds)),
      ("ale-py AtariVectorEnv", n, lambda: ale_vector(game, n, seconds)),
      ("envpool sync", n, lambda: envpool_rate(python, game, n, seconds, False)),
      ("envpool async", n, lambda: envpool_rate(python, game, n, seconds, True)),
      ("gymnasium loop + AtariPreprocessing", 1, lambda: gymnasium_loop(game, seconds)),
  ]
  not_run = {} if python else {"envpool sync": "no envpool venv",
                                "envpool async": "no envpool venv"}
  results = [dict(name=name, num_envs=envs, frames_per_second=None, rounds=[],
                  error=not_run.get(name)) for name, envs, _ in rows]
  for round_index in range(_ROUNDS.value):
    for result, (name, _, run) in zip(results, rows):
      if name in not_run:
        continue
      try:
        rate = run()
      except RowFailed as e:
        result["error"] = str(e)
        print(f"  round {round_index}: {name}: {e}", flush=True)
        continue
      result["rounds"].append(rate)
      result["frames_per_second"] = max(result["rounds"])
      print(f"  round {round_index}: {name}: {rate:.0f}", flush=True)

  by_name = {r["name"]: r["frames_per_second"] for r in results}
  raw = by_name["raw ALE loop, 1 thread"]
  envpool_async = by_name["envpool async"]
  print(f"\n{game}, 84x84 gray, frame skip 4, stack 4, random actions; "
        f"{cores} cores ({platform.processor() or platform.machine()})")
  print(f"{'method':40s} {'envs':>5s} {'frames/s':>10s} {'/ envpool async':>16s} "
        f"{'/ (cores x raw)':>16s}")
  for r in results:
    rate = r["frames_per_second"]
    if rate is None:
      print(f"{r['name']:40s} {r['num_envs']:5d} {r['error'].splitlines()[0]}")
      continue
    vs_envpool = f"{rate / envpool_async:.2f}x" if envpool_async else "-"
    print(f"{r['name']:40s} {r['num_envs']:5d} {rate:10.0f} {vs_envpool:>16s} "
          f"{rate / (cores * raw):15.0%}")
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(dict(provenance=record, game=game, cores=cores, machine=platform.machine(),
                   processor=platform.processor(), seconds_per_row=seconds,
                   rounds=_ROUNDS.value, envpool=envpool,
                   results=results), f, indent=2)
  print(f"\nwrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
