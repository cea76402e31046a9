"""GA3C's network steps: float32 vs bfloat16, each with and without XLA.

    python benchmarks/ga3c_precision.py --rounds=7 --seconds=2 \
        --output=benchmarks/results/ga3c_precision_<machine>.json

Rows: for each batch size (--batch_sizes, samples), the predictor's forward
pass (uint8 obs [B, 84, 84, 4] -> logits, `Predictor.forward`) and the
trainer's step (A3C loss, gradients, clipping 0.5, RMSProp, the pruning hook:
`Learner.train` on B / t_max segments of t_max + 1 frames, as the trainer
gets them from its queue), on the Pong preset's Atari net (6 actions), in
float32 and bfloat16 (`--precision`), each without and with XLA
(`--jit_compile_predict`, `--jit_compile_train`). Queue ops are not timed.

Interleaved rounds: every round times every row once (`--seconds` of calls;
before the first round each row makes `--warmup_calls` untimed calls, the
first of which traces and, with XLA, compiles), so a slow minute hits all
rows of a round. Each row keeps its best round; the speed-ups are the median
over rounds of float32-without-XLA's time over the row's, in the same round.
Prints a table and writes JSON with the provenance (commit, command, CPU,
date) and every round's times. XLA compiles once per shape: a GA3C run with
varying batch sizes pays that compile for each size it meets (not timed here).
"""

import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl import layers as tl  # pylint: disable=g-import-not-at-top
from tfrl import networks  # pylint: disable=g-import-not-at-top
from tfrl import optimizers  # pylint: disable=g-import-not-at-top
from tfrl import precision  # pylint: disable=g-import-not-at-top
from tfrl.ga3c.learner import Learner, LearnerConfig  # pylint: disable=g-import-not-at-top
from tfrl.ga3c.predictor import Predictor  # pylint: disable=g-import-not-at-top
from tfrl.ga3c.queues import Queues  # pylint: disable=g-import-not-at-top

_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["32", "80", "128", "160"],
                                 "Samples per call (prediction requests / trained samples).")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Interleaved rounds over all rows.")
_SECONDS = flags.DEFINE_float("seconds", 2.0, "Seconds of calls per row and round.")
_T_MAX = flags.DEFINE_integer("t_max", 5, "Frames per training segment (plus one).")
_WARMUP_CALLS = flags.DEFINE_integer(
    "warmup_calls", 3, "Untimed calls per row before the first round (the first traces "
    "and, with XLA, compiles).")
_STEPS = flags.DEFINE_list("steps", ["predict", "train"], "Which steps to time.")
_OUTPUT = flags.DEFINE_string("output", "ga3c_precision.json", "JSON path.")

_OBS = (84, 84, 4)
_ACTIONS = 6
_VARIANTS = (("float32", False), ("float32", True), ("bfloat16", False), ("bfloat16", True))


def _name(dtype: str, jit: bool) -> str:
  return dtype + (" XLA" if jit else "")


def _network(dtype: str):
  tf.random.set_seed(0)   # the same weights in every variant
  net = networks.ActorCritic(_ACTIONS, networks.AtariTorso(compute_dtype=dtype))
  net(tf.zeros((1,) + _OBS, tf.uint8))
  return net


def predict_fn(dtype: str, jit: bool, batch: int):
  """A call of the predictor's forward pass on a fixed batch; returns a
  function that runs one call and waits for its result."""
  net = _network(dtype)
  queues = Queues(obs_shape=_OBS, obs_dtype=tf.uint8, num_agents=1, envs_per_agent=1,
                  t_max=_T_MAX.value, prediction_capacity=1, training_capacity=1)
  counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("predictions", "prediction_batches")}
  predictor = Predictor(net, queues, batch_size=batch, counters=counters, jit_compile=jit)
  obs = tf.constant(np.random.default_rng(batch).integers(0, 256, (batch,) + _OBS, np.uint8))
  forward = predictor.forward if jit else tf.function(predictor.forward)
  return lambda: forward(obs).numpy()


def train_fn(dtype: str, jit: bool, batch: int):
  """A call of the trainer's learner step on a fixed batch of ceil(batch /
  t_max) segments (the Pong preset's loss settings)."""
  net = _network(dtype)
  learner = Learner(net, optimizers.RMSProp(7e-4, decay=0.99, epsilon=1e-5),
                    LearnerConfig(loss_reduction="mean", grad_clip_norm=0.5),
                    after_update=tl.after_update, jit_compile=jit)
  t = _T_MAX.value
  segments = -(-batch // t)
  rng = np.random.default_rng(batch)
  data = {"obs": rng.integers(0, 256, (segments, t + 1) + _OBS, np.uint8),
          "action": rng.integers(0, _ACTIONS, (segments, t)).astype(np.int32),
          "reward": rng.choice([-1.0, 0.0, 1.0], (segments, t)).astype(np.float32),
          "done": rng.uniform(size=(segments, t)) < 0.01}
  data = {k: tf.constant(v) for k, v in data.items()}
  step = tf.function(learner.train)
  return lambda: step(data)["loss"].numpy()


def calls_per_second(fn, seconds: float) -> float:
  calls, start = 0, time.perf_counter()
  while True:
    fn()
    calls += 1
    elapsed = time.perf_counter() - start
    if elapsed >= seconds:
      return calls / elapsed


def build_rows(batch_sizes, steps, warmup_calls):
  """{(step, batch, dtype, jit): one-call function}, each called `warmup_calls`
  times (at least once: traced, compiled)."""
  makers = {"predict": predict_fn, "train": train_fn}
  rows = {}
  for step in steps:
    for batch in batch_sizes:
      for dtype, jit in _VARIANTS:
        fn = makers[step](dtype, jit, batch)
        for _ in range(max(1, warmup_calls)):
          fn()
        rows[step, batch, dtype, jit] = fn
  return rows


def run_rounds(rows, rounds: int, seconds: float):
  """Milliseconds per call of every row, one entry per round."""
  times = {key: [] for key in rows}
  for r in range(rounds):
    for key, fn in rows.items():
      times[key].append(1e3 / calls_per_second(fn, seconds))
    print(f"round {r + 1}/{rounds} done", flush=True)
  return times


def summarize(times, batch_sizes, steps):
  """Per (step, batch): each variant's best round and median per-round
  speed-up over float32 without XLA."""
  table = []
  for step in steps:
    for batch in batch_sizes:
      base = times[step, batch, "float32", False]
      row = {"step": step, "batch": batch}
      for dtype, jit in _VARIANTS:
        ms = times[step, batch, dtype, jit]
        row[_name(dtype, jit)] = {
            "best_ms": min(ms), "ms_per_round": ms,
            "speedup_vs_float32": statistics.median(b / m for b, m in zip(base, ms))}
      table.append(row)
  return table


def print_table(table):
  names = [_name(d, j) for d, j in _VARIANTS]
  print(f"\n{'step':<8}{'batch':>6}" + "".join(f"{n + ' ms':>16}" for n in names)
        + "".join(f"{'x ' + n:>16}" for n in names[1:]))
  for row in table:
    cells = "".join(f"{row[n]['best_ms']:>16.2f}" for n in names)
    ratios = "".join(f"{row[n]['speedup_vs_float32']:>15.2f}x" for n in names[1:])
    print(f"{row['step']:<8}{row['batch']:>6}{cells}{ratios}")
  print("(ms: best round per call; x: median over rounds of float32-without-XLA's time "
        "over the row's, same round)")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  batch_sizes = [int(b) for b in _BATCH_SIZES.value]
  steps = list(_STEPS.value)
  if not batch_sizes or min(batch_sizes) < 1 or not set(steps) <= {"predict", "train"}:
    raise app.UsageError("--batch_sizes must be positive ints, --steps predict and/or train.")
  tf.get_logger().setLevel("ERROR")   # one tf.function per row: retracing is by design
  record = provenance.provenance()
  auto = precision.resolve("auto")
  print(f"--precision=auto here: {auto.name} ({auto.reason}); TF {tf.__version__}, "
        f"{os.cpu_count()} CPUs")
  rows = build_rows(batch_sizes, steps, _WARMUP_CALLS.value)
  times = run_rounds(rows, _ROUNDS.value, _SECONDS.value)
  table = summarize(times, batch_sizes, steps)
  print_table(table)
  result = {"provenance": record, "auto_precision": auto.name, "auto_reason": auto.reason,
            "cpu_bf16_flags": sorted(set(precision.BF16_CPU_FLAGS) & precision.cpu_flags()),
            "network": "GA3C Atari net (conv 8x8x16/4, conv 4x4x32/2 SAME, dense 256), "
                       f"{_ACTIONS} actions, uint8 obs {list(_OBS)}",
            "t_max": _T_MAX.value, "rounds": _ROUNDS.value, "seconds": _SECONDS.value,
            "warmup_calls": _WARMUP_CALLS.value,
            "load_average": os.getloadavg(), "rows": table}
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=1)
  print(f"JSON: {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
