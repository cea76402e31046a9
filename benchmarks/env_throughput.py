"""Atari emulator frames per second, side by side in one run.

Pong, 84x84 grayscale, frame skip 4 with max-pool, frame stack 4, random
actions, no sticky actions. Frames are emulator frames (agent steps x 4).

  python benchmarks/env_throughput.py --num_envs=8 --seconds=10 --rounds=3

Rows: the tfrl op env (eager, and a tf.function loop), ale-py's
AtariVectorEnv (its C++ thread pool), envpool (sync and async, if it is
installed: `pip install '.[bench]'`), a gymnasium Python loop with
AtariPreprocessing, and the raw single-thread ALE loop (act every frame, grab
the screen on the last two frames of a step: the per-core limit). Prints a
table and writes JSON.
"""

import json
import os
import platform
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top

_NUM_ENVS = flags.DEFINE_integer("num_envs", 8, "Emulators per batched env.")
_SECONDS = flags.DEFINE_float("seconds", 8.0, "Measuring time per row.")
_GAME = flags.DEFINE_string("game", "Pong", "Game (ALE name).")
_ROUNDS = flags.DEFINE_integer(
    "rounds", 1, "Rounds over all rows, interleaved; each row keeps its best round "
    "(robust when other processes share the machine).")
_OUTPUT = flags.DEFINE_string("output", "env_throughput.json",
                              "Where to write the JSON results.")

FRAME_SKIP = 4


def timed(step_fn, seconds):
  """Runs step_fn (returns frames done) for about `seconds`; frames/s."""
  step_fn()  # Warm up (tracing, thread start).
  frames, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    frames += step_fn()
  return frames / (time.perf_counter() - start)


def tfrl_eager(game, n, seconds):
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  env = AtariEnv(game, n)
  env.reset()
  rng = np.random.default_rng(0)

  def step():
    env.step(rng.integers(env.num_actions, size=n, dtype=np.int32))
    return n * FRAME_SKIP
  return timed(step, seconds)


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
  return timed(step, seconds)


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
  rate = timed(step, seconds)
  env.close()
  return rate


def envpool_rate(game, n, seconds, asynchronous):
  import envpool  # pylint: disable=import-outside-toplevel
  batch = max(1, n // 2) if asynchronous else n
  env = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=n, batch_size=batch,
                     num_threads=os.cpu_count(), repeat_action_probability=0.0,
                     noop_max=30, episodic_life=False, reward_clip=False,
                     img_height=84, img_width=84, stack_num=4, frame_skip=FRAME_SKIP)
  num_actions = env.action_space.n
  rng = np.random.default_rng(0)
  if asynchronous:
    env.async_reset()

    def step():
      *_, info = env.recv()
      ids = info["env_id"]
      env.send(rng.integers(num_actions, size=len(ids)), ids)
      return len(ids) * FRAME_SKIP
  else:
    env.reset()

    def step():
      env.step(rng.integers(num_actions, size=n))
      return n * FRAME_SKIP
  rate = timed(step, seconds)
  env.close()
  return rate


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
  return timed(step, seconds)


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
  return timed(step, seconds)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  game, n, seconds = _GAME.value, _NUM_ENVS.value, _SECONDS.value
  record = provenance.provenance()
  cores = os.cpu_count()
  rows = [
      ("raw ALE loop, 1 thread", 1, lambda: raw_ale(game, seconds)),
      ("tfrl op env, eager", n, lambda: tfrl_eager(game, n, seconds)),
      ("tfrl op env, tf.function", n, lambda: tfrl_graph(game, n, seconds)),
      ("ale-py AtariVectorEnv", n, lambda: ale_vector(game, n, seconds)),
      ("envpool sync", n, lambda: envpool_rate(game, n, seconds, False)),
      ("envpool async", n, lambda: envpool_rate(game, n, seconds, True)),
      ("gymnasium loop + AtariPreprocessing", 1, lambda: gymnasium_loop(game, seconds)),
  ]
  if _ROUNDS.value < 1:
    raise app.UsageError(f"--rounds must be >= 1, got {_ROUNDS.value}")
  results = [dict(name=name, num_envs=envs, frames_per_second=None, rounds=[], error=None)
             for name, envs, _ in rows]
  for round_index in range(_ROUNDS.value):
    for result, (name, _, run) in zip(results, rows):
      try:
        rate = run()
      except ImportError as e:  # envpool is optional.
        result["error"] = f"not installed ({e.name})"
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
      print(f"{r['name']:40s} {r['num_envs']:5d} {r['error']:>10s}")
      continue
    vs_envpool = f"{rate / envpool_async:.2f}x" if envpool_async else "-"
    print(f"{r['name']:40s} {r['num_envs']:5d} {rate:10.0f} {vs_envpool:>16s} "
          f"{rate / (cores * raw):15.0%}")
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(dict(provenance=record, game=game, cores=cores, machine=platform.machine(),
                   processor=platform.processor(), seconds_per_row=seconds,
                   rounds=_ROUNDS.value,
                   results=results), f, indent=2)
  print(f"\nwrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
