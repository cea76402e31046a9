"""tfrl's iterative pruning baseline beside an independent one: SB3's TD3, same pruning.

    python benchmarks/td3_pruning_check.py --seed=0 --steps=600000 \
        --tfrl=benchmarks/results/td3_study_halfcheetah_pruning_zen4.json \
        --output=benchmarks/results/td3_pruning_check_halfcheetah.json

Runs `benchmarks/peers/sb3_td3_pruning.py` in the SB3 peer's venv (`--sb3_venv`,
made by `benchmarks/peers/setup_peers.sh sb3`) with the schedule of tfrl's
preset (`--preset`, its config as `python -m tfrl.td3` builds it: target
sparsity, pruning window and frequency, random steps first, sizes), or reads that script's JSON
(`--sb3_json`) when it has run already; reads tfrl's run of the same preset
and seed from a `benchmarks/td3_study.py` JSON (`--tfrl`); prints the two
eval-return curves side by side and writes both with the provenance. The SB3
run checkpoints (in `<output>_sb3.json.d`) and stops cleanly on Ctrl-C: the
same command again goes on from there, in this sitting or the next.
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance as provenance_lib  # pylint: disable=wrong-import-position
import td3_preset  # pylint: disable=wrong-import-position

_HERE = os.path.dirname(os.path.abspath(__file__))

flags.DEFINE_string("preset", "td3_halfcheetah_pruning", "tfrl's pruning preset.")
flags.DEFINE_integer("seed", 0, "Seed of both runs.")
flags.DEFINE_integer("steps", 600_000, "Env steps of the SB3 run.")
flags.DEFINE_string("tfrl", "", "A td3_study.py JSON holding tfrl's run of --preset, --seed.")
flags.DEFINE_string("sb3_venv", "/work/peers/sb3", "The SB3 peer's virtualenv.")
flags.DEFINE_string("sb3_json", "", "The SB3 run's JSON, if it has run (else it runs now).")
flags.DEFINE_integer("every", 50_000, "Steps between the printed rows.")
flags.DEFINE_string("output", "", "JSON to write.")


def sb3_command(settings: dict, output: str, venv: str, seed: int, steps: int) -> list:
  """The peer's command line: tfrl's `settings` (`td3_preset.pruning_settings`), each
  the peer flag of its name, and the run's seed, steps and output."""
  return [os.path.join(venv, "bin", "python"),
          os.path.join(_HERE, "peers", "sb3_td3_pruning.py"),
          *[f"--{key}={value}" for key, value in settings.items()],
          f"--seed={seed}", f"--steps={steps}", f"--output={output}"]


def tfrl_run(path: str, preset: str, seed: int) -> dict:
  with open(path) as f:
    runs = json.load(f)["runs"]
  for run in runs:
    if run["preset"] == preset and run["seed"] == seed:
      return run
  raise app.UsageError(f"--tfrl={path} holds no run of {preset} seed {seed}.")


def at(curve: list, step: int):
  points = [p["eval_return"] for p in curve if p["step"] == step]
  return points[0] if points else None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  fv = flags.FLAGS
  if not fv.output or not fv.tfrl:
    raise app.UsageError("--output and --tfrl are required.")
  settings = td3_preset.pruning_settings(fv.preset)
  sb3_json = fv.sb3_json or os.path.splitext(fv.output)[0] + "_sb3.json"
  command = None
  if not fv.sb3_json:
    command = sb3_command(settings, sb3_json, fv.sb3_venv, fv.seed, fv.steps)
    returncode = subprocess.run(command, check=False).returncode
    if returncode == 130:  # stopped with its checkpoint: the same command goes on
      sys.exit(f"the SB3 run stopped at its checkpoint in {sb3_json}.d; run the same "
               "command again to go on")
    if returncode:
      sys.exit(f"the SB3 run failed (exit {returncode}): {' '.join(command)}")
  with open(sb3_json) as f:
    sb3 = json.load(f)
  ours = tfrl_run(fv.tfrl, fv.preset, fv.seed)
  print(f"{'env steps':>10} | {'tfrl ' + fv.preset:>28} | {'SB3 TD3, same pruning':>22} |"
        f" {'SB3 sparsity':>12}")
  for step in range(fv.every, fv.steps + 1, fv.every):
    theirs = [p for p in sb3["curve"] if p["step"] == step]
    mine = at(ours["curve"], step)
    cells = [f"{mine:,.0f}" if mine is not None else "",
             f"{theirs[0]['eval_return']:,.0f}" if theirs else "",
             f"{theirs[0]['sparsity']:.3f}" if theirs else ""]
    print(f"{step:>10,} | {cells[0]:>28} | {cells[1]:>22} | {cells[2]:>12}")
  result = {"provenance": provenance_lib.provenance(), "preset": fv.preset, "seed": fv.seed,
            "settings": settings, "sb3_command": command, "sb3": sb3,
            "tfrl": {"from": fv.tfrl, "command": ours.get("command"),
                     "cpu_model": ours.get("cpu_model"), "curve": ours["curve"],
                     "eval_return": ours.get("eval_return"),
                     "average_compression_ratio": ours.get("average_compression_ratio")}}
  with open(fv.output, "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  app.run(main)
