"""TD3 env steps per second at one update per env step, from a preset.

  python benchmarks/td3_throughput.py --preset=td3_halfcheetah --steps=5000 --rounds=3 \\
      --output=benchmarks/results/td3_throughput_<machine>.json

What a user of the preset gets while it trains: each row builds the preset's
TD3 run as `python -m tfrl.td3 --preset=...` would (its env on the
implementation `make_env` picks, networks, layer plan, batch size and
`update_every`), plays `--start_steps` random-action steps and `--warmup`
more steps with updates (both graph traces happen there), then times
`--steps` env steps per round, each with its training phase: `update_every`
env steps then `update_every` updates, i.e. one update per env step, the
ratio of the presets, SB3's and CleanRL's TD3. Evaluation, logging,
checkpoints and summaries are off (the run's `step()` without the skeleton).

Rows: `tfrl` (the preset plus `--set` flags), with `--jit_row` the same
with `--jit_compile` (XLA), with `--bfloat16_row` the same with
`--precision=bfloat16`, and one row per `--compare` preset (same `--set`). Rounds are interleaved: each round times every
row once, so a slow minute hits all rows. The table gives each row's median
and best round; the JSON holds every round, the settings a peer must match
(env, hidden sizes, batch size, update_every) and `provenance`. Peers (SB3,
CleanRL) are timed by the race scripts from their own venvs; quote the ratio
of medians measured in one sitting, on an otherwise idle machine.
"""

import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks import td3_preset  # pylint: disable=g-import-not-at-top

_PRESET = flags.DEFINE_string("preset", "td3_halfcheetah", "A TD3 preset (flags/td3_*.flags).")
_SET = flags.DEFINE_multi_string("set", [], "Extra TD3 flags for every row, without the "
                                 "leading --, e.g. --set=replay_size=200000.")
_START = flags.DEFINE_integer("start_steps", 1000, "Random-action steps before the updates "
                              "(replaces the preset's: the timed steps all train).")
_WARMUP = flags.DEFINE_integer("warmup", 1000, "Untimed steps with updates after start_steps.")
_STEPS = flags.DEFINE_integer("steps", 5000, "Timed env steps per row and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds over all rows.")
_JIT_ROW = flags.DEFINE_bool("jit_row", False, "Add a row with --jit_compile (XLA).")
_BF16_ROW = flags.DEFINE_bool("bfloat16_row", False, "Add a row with --precision=bfloat16 "
                              "(matmuls in bfloat16; pays only where the CPU has AVX-512 "
                              "BF16 or AMX).")
_COMPARE = flags.DEFINE_list("compare", [], "More TD3 presets, a row each with the same "
                             "--set, named by the preset (e.g. the pruning and GST presets "
                             "of --preset's env: what their layers cost per training step).")
_OUTPUT = flags.DEFINE_string("output", "td3_throughput.json", "JSON of the results.")


class Row:
  """One TD3 run of the preset, stepped span by span (the skeleton's loop
  without evaluation, checkpoints and summaries)."""

  def __init__(self, name: str, config, logdir: str):
    from tfrl.td3 import loop  # pylint: disable=import-outside-toplevel
    self.name = name
    self.config = dataclasses.replace(
        config, total_steps=10**9, eval_every=0, log_every=10**9, checkpoint_every=10**9,
        run=dataclasses.replace(config.run, logdir=logdir, export=False))
    self.run = loop.TD3Run(self.config)
    self.run.begin()
    self.rounds = []

  def play(self, steps: int) -> float:
    """Plays `steps` more env steps (with their training phases); the seconds taken."""
    target = self.run.count() + steps
    started = time.perf_counter()
    while self.run.count() < target:
      self.run.step()
    return time.perf_counter() - started


def measure(rows, steps: int, rounds: int) -> None:
  for r in range(rounds):
    for row in rows:
      seconds = row.play(steps)
      row.rounds.append({"round": r, "steps": steps, "seconds": seconds,
                         "steps_per_second": steps / seconds})
      print(f"round {r}: {row.name:<8} {steps / seconds:8.1f} steps/s", flush=True)


def report(rows) -> list:
  out = []
  width = max(8, *(len(row.name) for row in rows))
  print(f"\n{'row':<{width}} {'median steps/s':>15} {'best':>8} {'1M steps at median':>20}")
  for row in rows:
    rates = [r["steps_per_second"] for r in row.rounds]
    median = statistics.median(rates)
    out.append({"row": row.name, "jit_compile": row.config.jit_compile,
                "precision": row.run.learner.precision.name,
                "median_steps_per_second": median, "best_steps_per_second": max(rates),
                "hours_to_1m_steps_at_median": 1e6 / median / 3600, "rounds": row.rounds})
    print(f"{row.name:<{width}} {median:15.1f} {max(rates):8.1f} "
          f"{1e6 / median / 3600:18.2f} h")
  return out


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  extra = list(_SET.value) + [f"start_steps={_START.value}"]
  config = td3_preset.td3_config(_PRESET.value, extra)
  variants = [("tfrl", config)]
  if _JIT_ROW.value:
    variants.append(("tfrl_xla", dataclasses.replace(config, jit_compile=True)))
  if _BF16_ROW.value:
    variants.append(("tfrl_bf16", dataclasses.replace(config, precision="bfloat16")))
  variants += [(p, td3_preset.td3_config(p, extra)) for p in _COMPARE.value]
  with tempfile.TemporaryDirectory() as root:
    rows = [Row(name, c, os.path.join(root, name)) for name, c in variants]
    try:
      for row in rows:  # random steps, then the warm-up with updates (traces)
        row.play(_START.value + _WARMUP.value)
      measure(rows, _STEPS.value, _ROUNDS.value)
    finally:
      for row in rows:
        row.run.close()
  result = {"benchmark": "td3_throughput", "preset": _PRESET.value, "set": list(_SET.value),
            "compare": list(_COMPARE.value),
            "start_steps": _START.value, "warmup": _WARMUP.value,
            "settings": td3_preset.settings(config), "rows": report(rows),
            "provenance": provenance.provenance()}
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
