"""GA3C end-to-end training frames/s next to env-only frames/s, in one run.

  python benchmarks/ga3c_throughput.py [--game=PongNoFrameskip-v4]
      [--seconds=60] [--warmup=15] [--output=ga3c_throughput.json]

env-only: the same number of emulators (agents x envs_per_agent) stepped with
uniformly random actions, all slots per call, 100 steps per tf.function call
(no network). Training: the full GA3C machinery (agents, prediction queue,
predictor, training queue, trainer with RMSProp) with the Pong preset's
layout; frames counted after a warm-up. Frames are emulator frames (env
steps x frame skip). Prints a table and writes JSON.
"""

import json
import os
import platform
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl import run_loop  # pylint: disable=g-import-not-at-top
from tfrl.envs import AtariEnv, EnvProtocol  # pylint: disable=g-import-not-at-top
from tfrl.ga3c import GA3CConfig, LearnerConfig, build  # pylint: disable=g-import-not-at-top

_GAME = flags.DEFINE_string("game", "PongNoFrameskip-v4", "Atari game.")
_SECONDS = flags.DEFINE_float("seconds", 60.0, "Measured seconds per mode.")
_WARMUP = flags.DEFINE_float("warmup", 15.0, "Warm-up seconds (not counted).")
_AGENTS = flags.DEFINE_integer("agents", 8, "GA3C agents.")
_ENVS_PER_AGENT = flags.DEFINE_integer("envs_per_agent", 4, "Slots per agent.")
_PRECISION = flags.DEFINE_enum(
    "precision", "float32", ["auto", "float32", "bfloat16"],
    "GA3C's --precision for the training run (float32: as before --precision existed).")
_OUTPUT = flags.DEFINE_string("output", "ga3c_throughput.json", "JSON path.")


def env_only_fps(game, num_envs, seconds, warmup):
  env = AtariEnv(game, num_envs, seed=1)
  env.reset()
  steps_per_call = 100

  @tf.function(input_signature=[])
  def run():
    def body(i):
      actions = tf.random.uniform([num_envs], 0, env.num_actions, tf.int32)
      env.step(actions)
      return i + 1
    return tf.while_loop(lambda i: i < steps_per_call, body, [0])

  end_warmup = time.time() + warmup
  while time.time() < end_warmup:
    run()
  start, calls = time.time(), 0
  while time.time() - start < seconds:
    run()
    calls += 1
  elapsed = time.time() - start
  env.close()
  return calls * steps_per_call * num_envs * env.frame_skip / elapsed


def training_fps(game, agents, envs_per_agent, seconds, warmup, precision):
  logdir = tempfile.mkdtemp(prefix="ga3c_throughput_")
  config = GA3CConfig(
      protocol=EnvProtocol(game=game, repeat_action_probability=0.0), agents=agents,
      max_agents=agents,
      envs_per_agent=envs_per_agent, prediction_batch_size=32,
      training_min_batch_size=80, training_max_batch_size=320,
      learning_rate=7e-4, rmsprop_epsilon=1e-5,
      learner=LearnerConfig(loss_reduction="mean", grad_clip_norm=0.5), logdir=logdir,
      checkpoint_every=0, stats_every=10, max_seconds=warmup + seconds, precision=precision)
  job = build(config)
  marks, made = {}, {}

  def measure(system):
    time.sleep(warmup)
    marks["start"] = (time.time(), system.counter_values())
    time.sleep(seconds)
    marks["end"] = (time.time(), system.counter_values())

  def watch(system):
    """Measures the run's system from a thread of its own."""
    meter = threading.Thread(target=measure, args=(system,), daemon=True)
    meter.start()
    made.update(system=system, meter=meter)

  run_loop.run(job.then(watch))
  system = made["system"]
  made["meter"].join(5)
  (t0, c0), (t1, c1) = marks["start"], marks.get("end", (time.time(),
                                                          system.counter_values()))
  dt = t1 - t0
  fs = system.frames_per_step
  return {
      "frames_per_second": (c1["env_steps"] - c0["env_steps"]) * fs / dt,
      "predictions_per_second": (c1["predictions"] - c0["predictions"]) / dt,
      "trainings_per_second": (c1["train_steps"] - c0["train_steps"]) / dt,
      "samples_trained_per_second": (c1["train_samples"]
                                     - c0["train_samples"]) / dt,
  }


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  record = provenance.provenance()
  slots = _AGENTS.value * _ENVS_PER_AGENT.value
  env_fps = env_only_fps(_GAME.value, slots, _SECONDS.value, _WARMUP.value)
  train = training_fps(_GAME.value, _AGENTS.value, _ENVS_PER_AGENT.value,
                       _SECONDS.value, _WARMUP.value, _PRECISION.value)
  ratio = train["frames_per_second"] / env_fps
  result = {
      "provenance": record, "game": _GAME.value, "emulators": slots, "agents": _AGENTS.value,
      "envs_per_agent": _ENVS_PER_AGENT.value, "precision": _PRECISION.value,
      "env_only_frames_per_second": env_fps,
      "training": train, "training_over_env_only": ratio,
      "seconds": _SECONDS.value, "warmup": _WARMUP.value,
      "cpus": os.cpu_count(), "load_average": os.getloadavg(),
      "tensorflow": tf.__version__, "machine": platform.platform(),
  }
  print(f"\nGA3C throughput on {_GAME.value}, {slots} emulators, "
        f"{os.cpu_count()} CPUs (load avg {os.getloadavg()[0]:.1f})")
  print(f"{'mode':<28}{'frames/s':>12}")
  print(f"{'env only (random actions)':<28}{env_fps:>12.0f}")
  print(f"{'GA3C training end-to-end':<28}{train['frames_per_second']:>12.0f}")
  print(f"{'training / env-only':<28}{ratio:>12.1%}")
  print(f"(PPS {train['predictions_per_second']:.0f}, TPS "
        f"{train['trainings_per_second']:.1f}, trained samples/s "
        f"{train['samples_trained_per_second']:.0f})")
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=1)
  print(f"JSON: {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
