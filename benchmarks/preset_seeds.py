"""A neuroevolution preset over seeds: curves, and the final elite under two protocols.

  python benchmarks/preset_seeds.py --preset=ga_frostbite_small --seeds=0,1,2 \\
      --max_frames=40000000 --output=benchmarks/results/seeds_ga_frostbite_small.json

For each seed, one run of the preset as a user starts it (`python -m
<its entry point> --preset=P --seed=S --max_frames=F --logdir=...`), one
after the other. GA, ES and random search are functions of their seed, so a
run's scores against frames do not depend on the machine or on what else
runs; its wall-clock does (recorded, a figure only from a quiet machine).
Its curve per generation is read from its TensorBoard log (`<algorithm>/best`,
`mean`, `elite`, `frames`; minutes are the generations' `time/wall` summed).
A seed's logdir that holds a checkpoint (a run stopped with Ctrl-C, in an
earlier sitting) is resumed (`--resume`); the run is then marked `resumed`,
and its result is the same as one uninterrupted run's (GA, ES and random
search resume bit for bit).

Then its final elite (the exported `<logdir>/elite`) is played by
tfrl.evaluate, --episodes episodes under each protocol, a 108,000-frame cap
(30 minutes of play) for both:
- noop: up to 30 no-op frames at the start, no sticky actions (the deep GA
  paper's protocol, Such et al. 2017);
- sticky: sticky actions 0.25, no no-ops (ALE v5, Machado et al. 2018).

Writes JSON (provenance, commands, curves, evaluations, mean and spread
over seeds) and a chart by `tfrl.plot` (mean with a min-max band over the
seeds, against frames), drawn from the curves the JSON records. --append
adds seeds to an existing --output of the same preset and budget, each run
with its own sitting's provenance; --redraw only draws its chart again.
"""

import json
import os
import statistics
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top
from tfrl import presets  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGORITHMS = {"tfrl.ga": "ga", "tfrl.es": "es", "tfrl.random_search": "random_search"}
# What a curve holds per generation: `<algorithm>/<key>` in the run's log.
CURVE_KEYS = ("frames", "elite", "best", "mean")
PROTOCOLS = {
    "noop": ["--noop_max=30", "--repeat_action_probability=0", "--max_episode_frames=108000"],
    "sticky": ["--noop_max=0", "--repeat_action_probability=0.25",
               "--max_episode_frames=108000"],
}

_PRESET = flags.DEFINE_string("preset", None, "A GA, ES or random-search preset (flags/).")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds, one run each.")
_PRESET_FLAGS = flags.DEFINE_list(
    "preset_flags", [], "Flags added to the preset's, without the leading -- "
    "(e.g. population=64); recorded, and part of what --append must match.")
_MAX_FRAMES = flags.DEFINE_integer("max_frames", None, "Frames per run (the budget).")
_EPISODES = flags.DEFINE_integer("episodes", 30, "Evaluation episodes per protocol.")
_HOURS = flags.DEFINE_float("hours", 12.0, "A run that takes longer is stopped (Ctrl-C).")
_WORKDIR = flags.DEFINE_string(
    "workdir", os.path.expanduser("~/tfrl_preset_seeds"),
    "Where runs write (kept: a stopped seed resumes from its checkpoint here).")
_OUTPUT = flags.DEFINE_string("output", "preset_seeds.json", "JSON path.")
_CHART = flags.DEFINE_string("chart", "", "Chart PNG (default: the JSON path with .png).")
_APPEND = flags.DEFINE_bool("append", False, "Add the seeds to an existing --output.")
_REDRAW = flags.DEFINE_bool("redraw", False,
                            "Run nothing: draw --output's chart again from its curves.")


def run_seed(entry, algorithm, workdir, seed):
  """One run of the preset and its curve."""
  logdir = os.path.join(workdir, f"{_PRESET.value}_s{seed}")
  cmd = [sys.executable, "-m", entry, f"--preset={_PRESET.value}", f"--seed={seed}",
         f"--max_frames={_MAX_FRAMES.value}", *[f"--{f}" for f in _PRESET_FLAGS.value],
         f"--logdir={logdir}"]
  # A run stopped in an earlier sitting (Ctrl-C keeps its checkpoint) goes on.
  resumed = os.path.exists(os.path.join(logdir, "checkpoint.json"))
  if resumed:
    cmd.append("--resume")
  print(f"  seed {seed}: {' '.join(cmd)}", flush=True)
  done = runs.run_for(cmd, _HOURS.value * 3600, logdir + ".out", cwd=ROOT)
  tags = [f"{algorithm}/{k}" for k in CURVE_KEYS] + ["time/wall"]
  by_step = {}
  for p in runs.scalars(logdir, tags):
    point = by_step.setdefault(p["step"], {"generation": p["step"]})
    # A generation played again after a resume keeps its last value.
    point[p["tag"].split("/")[1]] = p["value"]
  curve, seconds = [], 0.0
  for _, g in sorted(by_step.items()):
    # Minutes: the generations' own wall time summed, so that a pause between
    # a stopped run and its resume (a later sitting) is not counted.
    seconds += g.pop("wall", 0.0)
    curve.append(dict(g, frames=int(g.get("frames", 0)), minutes=seconds / 60))
  run = {"seed": seed, "logdir": logdir, "command": " ".join(cmd), "stopped": done.how,
         "returncode": done.returncode, "resumed": resumed, "curve": curve,
         "minutes": curve[-1]["minutes"] if curve else None,
         "frames": curve[-1]["frames"] if curve else 0}
  if done.returncode not in (0, None) or not curve:
    run["error"] = done.tail()
  return run


def evaluate(logdir, seed, protocol):
  """The exported elite over --episodes episodes under `protocol`."""
  policy = os.path.join(logdir, "elite")
  report = os.path.join(logdir, f"eval_{protocol}.json")
  cmd = [sys.executable, "-m", "tfrl.evaluate", f"--policy={policy}",
         f"--episodes={_EPISODES.value}", f"--seed={seed}", f"--output={report}",
         *PROTOCOLS[protocol]]
  if not os.path.isdir(policy):
    return {"error": f"no exported policy in {policy}", "command": " ".join(cmd)}
  done = runs.run_for(cmd, 3 * 3600, report + ".out", cwd=ROOT)
  try:
    with open(report) as f:
      scores = json.load(f)["scores"]
  except (OSError, ValueError, KeyError):
    return {"error": done.tail(), "command": " ".join(cmd)}
  return {"mean": statistics.fmean(scores), "std": statistics.pstdev(scores),
          "scores": scores, "command": " ".join(cmd)}


def summary(record):
  """Mean and spread over seeds: final elite per protocol, in-run elite at the end."""
  seeds = record["runs"]
  out = {"final_elite_" + p: runs.spread([r["eval"][p].get("mean") for r in seeds])
         for p in PROTOCOLS}
  out["in_run_elite_last"] = runs.spread([r["curve"][-1].get("elite") if r["curve"] else None
                                          for r in seeds])
  out["frames"] = runs.spread([r["frames"] for r in seeds])
  return out


def curve_csv(record, run, path):
  """Writes `run`'s recorded curve as tfrl.plot's CSV of scalars (the
  generation, its minutes as seconds, and `<algorithm>/frames`, `elite`, ...)."""
  algorithm = ALGORITHMS[record["entry_point"]]
  with open(path, "w") as f:
    f.write("step,seconds," + ",".join(f"{algorithm}/{k}" for k in CURVE_KEYS) + "\n")
    for p in run["curve"]:
      f.write(f"{p['generation']},{p['minutes'] * 60!r},"
              + ",".join(repr(p[k]) if k in p else "" for k in CURVE_KEYS) + "\n")


def chart(record, path):
  """tfrl.plot's mean and min-max band over every seed's curve as the JSON
  records it (a CSV each in --workdir: a seed whose run folder is gone, from
  an earlier sitting on another machine, is drawn too), against frames;
  returns the seeds drawn."""
  drawn = [r for r in record["runs"] if r["curve"]]
  cmd = [sys.executable, "-m", "tfrl.plot", f"--out={path}", "--x=frames", "--band=minmax"]
  for r in drawn:
    csv_path = os.path.join(_WORKDIR.value, f"{record['preset']}_s{r['seed']}_curve.csv")
    curve_csv(record, r, csv_path)
    cmd += [f"--logdir={csv_path}", f"--label={record['preset']}"]
  done = runs.run_for(cmd, 600, os.path.join(_WORKDIR.value, f"{record['preset']}_chart.out"),
                      cwd=ROOT)
  return [r["seed"] for r in drawn] if done.returncode == 0 and drawn else []


def earlier_record():
  """The --output that --append adds to, checked against this sitting's budget."""
  earlier = provenance.earlier_record(_OUTPUT.value, {
      "preset": _PRESET.value, "preset_flags": _PRESET_FLAGS.value,
      "max_frames": _MAX_FRAMES.value, "episodes": _EPISODES.value})
  again = sorted({r["seed"] for r in earlier["runs"]} & {int(s) for s in _SEEDS.value})
  if again:
    raise app.UsageError(f"--append: {_OUTPUT.value} already has seeds {again}")
  return earlier


def redraw():
  if not os.path.isfile(_OUTPUT.value):
    raise app.UsageError(f"--redraw: no --output={_OUTPUT.value} to draw.")
  with open(_OUTPUT.value) as f:
    record = json.load(f)
  os.makedirs(_WORKDIR.value, exist_ok=True)
  path = _CHART.value or os.path.splitext(_OUTPUT.value)[0] + ".png"
  record["chart_seeds"] = chart(record, path)
  with open(_OUTPUT.value, "w") as f:
    json.dump(record, f, indent=1)
  print(f"chart: {path} (seeds {record['chart_seeds']})")


def main(argv):
  del argv
  if _REDRAW.value:
    return redraw()
  if not _PRESET.value or not _MAX_FRAMES.value or _MAX_FRAMES.value < 1 or not _SEEDS.value:
    raise app.UsageError("--preset, --max_frames >= 1 and --seeds are needed.")
  entry = presets.entry_point(_PRESET.value)
  algorithm = ALGORITHMS.get(entry)
  if algorithm is None:
    raise app.UsageError(f"--preset={_PRESET.value} is not a GA, ES or random-search preset.")
  record = earlier_record() if _APPEND.value else None
  sitting = provenance.provenance()
  if record is None:
    record = {"provenance": sitting, "preset": _PRESET.value,
              "preset_flags": _PRESET_FLAGS.value, "entry_point": entry,
              "max_frames": _MAX_FRAMES.value, "episodes": _EPISODES.value,
              "protocols": PROTOCOLS, "runs": []}
  else:
    provenance.add_sitting(record, sitting)
  os.makedirs(_WORKDIR.value, exist_ok=True)
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  path = _CHART.value or os.path.splitext(_OUTPUT.value)[0] + ".png"
  for seed in (int(s) for s in _SEEDS.value):
    run = run_seed(entry, algorithm, _WORKDIR.value, seed)
    run["eval"] = {p: evaluate(run["logdir"], seed, p) for p in PROTOCOLS}
    run["provenance"] = sitting
    record["runs"].append(run)
    print(f"  seed {seed}: {run['frames']:,} frames in {run['minutes'] or 0:.1f} min; "
          + "; ".join(f"{p} {e.get('mean', float('nan')):.1f}" for p, e in run["eval"].items()),
          flush=True)
    record["summary"] = summary(record)
    record["chart_seeds"] = chart(record, path)
    with open(_OUTPUT.value, "w") as f:  # after each seed: a stopped sitting keeps its runs
      json.dump(record, f, indent=1)
  print(json.dumps(record["summary"], indent=1))
  print(f"JSON: {_OUTPUT.value}  chart: {path} (seeds {record['chart_seeds']})")


if __name__ == "__main__":
  app.run(main)
