"""Frames (and minutes) to a score for GA3C presets over seeds, with their curves.

    python benchmarks/ga3c_learners.py --preset=ga3c_pong --seeds=0,1,2 \
        --max_frames=15000000 --output=benchmarks/results/ga3c_learners_pong_zen5.json

Runs `python -m tfrl.ga3c --preset=P --seed=S` for each seed, one after the
other, in `--workdir/<preset>_s<seed>` (resumed if that folder holds a
checkpoint), stopping each at `--max_frames`, at `--stop_score` or after
`--minutes` of wall clock (Ctrl-C: its final checkpoint and policy); a linear
learning-rate schedule keeps the preset's horizon (`--lr_decay_frames=` the
preset's `--max_frames`), so stopping early does not speed its decay.
`--preset=none` runs GA3C's own defaults with `--extra` only: the bare
`python -m tfrl.ga3c --game=PongNoFrameskip-v4`. Then reads
each run's rolling score (over the preset's score window) from its TensorBoard
events and records the frames and seconds at which it first reached
`--target`, its last score, the policy lag the learner logged, and the
exported policy's score over `--eval_episodes` episodes under each evaluation
protocol (the preset's own, and without sticky actions). Frames to a score are
the learner's, whatever the machine's load; minutes need a quiet machine
(the JSON records the load average before and after each run).

Writes `--output` (provenance, one record per seed, the median over seeds)
and a chart beside it: score against frames, mean and spread over seeds, with
the anchors' frame counts marked. `--append` adds seeds to an existing JSON.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance as provenance_lib  # pylint: disable=wrong-import-position
from tfrl import presets  # pylint: disable=wrong-import-position

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("preset", "ga3c_pong", "GA3C preset to run; 'none' runs `python -m "
                    "tfrl.ga3c` with GA3C's defaults and --extra only (e.g. "
                    "--extra=--game=PongNoFrameskip-v4, the bare command).")
flags.DEFINE_list("seeds", ["0"], "Seeds, run one after the other.")
flags.DEFINE_integer("max_frames", 15_000_000, "Frames per run.")
flags.DEFINE_float("target", 18.0, "The score whose first crossing is recorded.")
flags.DEFINE_float("stop_score", None, "Stop a run once its rolling score reaches this.")
flags.DEFINE_string("workdir", "/tmp/tfrl_ga3c_learners", "Where the runs' logdirs go.")
flags.DEFINE_string("output", "", "JSON to write (and a .png chart beside it).")
flags.DEFINE_integer("eval_episodes", 30, "Episodes of each exported policy's evaluation "
                     "(0: none).")
flags.DEFINE_list("extra", [], "More flags for every run, e.g. --extra=--loss=vtrace.")
flags.DEFINE_float("minutes", None, "Stop each run (Ctrl-C: final checkpoint and policy) "
                   "after this many minutes of wall clock, if it has not stopped before.")
flags.DEFINE_bool("append", False, "Add seeds to an existing --output.")
flags.DEFINE_bool("run", True, "Run (or resume) each seed; --norun only reads the runs "
                  "already in --workdir (e.g. stopped early).")

# Published frame counts to 18 on Pong (docs/ga3c.md, "Anchors").
ANCHORS = {"RLlib APPO (about 10M)": 10e6, "RLlib IMPALA (18.9M)": 18.9e6}


BARE = "none"  # --preset=none: GA3C's own defaults


def _load_average() -> List[float]:
  return list(os.getloadavg())


def preset_max_frames(preset: str) -> int:
  """The preset's own --max_frames (its last), 0 if it sets none."""
  values = [line.split("=", 1)[1] for line in presets.flag_lines(preset)
            if line.startswith("--max_frames=")]
  return int(values[-1]) if values else 0


def run_command(preset: str, seed: int, logdir: str, resume: bool) -> List[str]:
  """One seed's training command: stops at --max_frames (or --stop_score) with the
  preset's learning-rate horizon; --extra comes last, so it can change either."""
  horizon = preset_max_frames(preset) if preset != BARE else 0
  command = [sys.executable, "-m", "tfrl.ga3c",
             *([f"--preset={preset}"] if preset != BARE else []), f"--seed={seed}",
             f"--max_frames={flags.FLAGS.max_frames}", f"--logdir={logdir}",
             *([f"--lr_decay_frames={horizon}"] if horizon else []),
             *(["--resume"] if resume else []), *flags.FLAGS.extra]
  if flags.FLAGS.stop_score is not None:
    command.append(f"--target_score={flags.FLAGS.stop_score}")
  return command


def _run(preset: str, seed: int, logdir: str) -> Dict:
  resume = os.path.exists(os.path.join(logdir, "checkpoints", "checkpoint"))
  command = run_command(preset, seed, logdir, resume)
  before = _load_average()
  process = subprocess.Popen(command, cwd=_ROOT)  # pylint: disable=consider-using-with
  interrupted = False
  try:
    process.wait(timeout=None if flags.FLAGS.minutes is None else flags.FLAGS.minutes * 60)
  except subprocess.TimeoutExpired:
    interrupted = True
    process.send_signal(signal.SIGINT)  # the run writes its final checkpoint and policy
    try:
      process.wait(timeout=300)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
  return {"command": " ".join(command[1:]), "resumed": resume,
          "returncode": process.returncode, "stopped_by_minutes": interrupted,
          "load_before": before, "load_after": _load_average()}


def _first_crossing(curve, target: float) -> Dict[str, Optional[float]]:
  for frames, seconds, value in zip(curve.frames, curve.seconds, curve.values):
    if value >= target:
      return {"frames": float(frames), "seconds": float(seconds)}
  return {"frames": None, "seconds": None}


def _last_scalar(logdir: str, tag: str) -> Optional[float]:
  from tfrl import plot  # pylint: disable=import-outside-toplevel
  series = plot.read_scalars(logdir).series
  return float(series[tag][2][-1]) if tag in series and len(series[tag][2]) else None


def _evaluate(logdir: str, sticky: Optional[float]) -> Dict:
  report = os.path.join(logdir, f"eval_sticky_{sticky if sticky is not None else 'own'}.json")
  command = [sys.executable, "-m", "tfrl.evaluate",
             f"--policy={os.path.join(logdir, 'saved_model')}",
             f"--episodes={flags.FLAGS.eval_episodes}", f"--output={report}"]
  if sticky is not None:
    command.append(f"--repeat_action_probability={sticky}")
  subprocess.run(command, cwd=_ROOT, check=True, capture_output=True)
  with open(report) as f:
    data = json.load(f)
  return {key: data[key] for key in ("mean", "std", "episodes") if key in data}


def seed_record(preset: str, seed: int) -> Dict:
  """Runs one seed (or resumes it) and reads what it reached."""
  from tfrl import plot  # pylint: disable=import-outside-toplevel
  logdir = os.path.join(flags.FLAGS.workdir, f"{preset}_s{seed}")
  record = {"seed": seed, "logdir": logdir}
  if flags.FLAGS.run:
    record.update(_run(preset, seed, logdir))
  curve = plot.load_curve(logdir, plot.GA3C_SCORE)
  record["to_target"] = _first_crossing(curve, flags.FLAGS.target)
  record["frames"] = float(curve.frames[-1])
  record["last_score"] = float(curve.values[-1])
  record["lag_mean"] = _last_scalar(logdir, "loss/lag_mean")
  if flags.FLAGS.eval_episodes > 0:
    record["evaluation"] = {"own_protocol": _evaluate(logdir, None),
                            "no_sticky": _evaluate(logdir, 0.0)}
  step = max(1, len(curve.frames) // 400)  # a few hundred points per seed
  record["curve"] = {"frames": curve.frames[::step].tolist(),
                     "seconds": curve.seconds[::step].tolist(),
                     "rolling_score": curve.values[::step].tolist()}
  return record


def summary(records: List[Dict]) -> Dict:
  """Median frames and minutes to the target over the seeds (None if one missed it)."""
  frames = [r["to_target"]["frames"] for r in records]
  seconds = [r["to_target"]["seconds"] for r in records]
  reached = [f for f in frames if f is not None]
  return {"seeds": len(records), "reached": len(reached),
          "median_frames_to_target": statistics.median(frames) if len(reached) == len(frames)
                                     else None,
          "median_minutes_to_target": statistics.median(seconds) / 60
                                      if len(reached) == len(frames) else None,
          "last_scores": [r["last_score"] for r in records]}


def chart(records: List[Dict], path: str, title: str) -> None:
  """Score against frames: each seed thin, the mean over seeds thick, anchors marked."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  fig = Figure(figsize=(6.4, 4.0), dpi=100, layout="constrained")
  ax = fig.subplots()
  curves = [(np.asarray(r["curve"]["frames"]), np.asarray(r["curve"]["rolling_score"]))
            for r in records]
  for (x, y), r in zip(curves, records):
    ax.plot(x, y, linewidth=0.8, alpha=0.5, label=f"seed {r['seed']}")
  top = min(x[-1] for x, _ in curves)
  grid = np.linspace(max(x[0] for x, _ in curves), top, 200)
  ys = np.stack([np.interp(grid, x, y) for x, y in curves])
  ax.plot(grid, ys.mean(0), color="black", linewidth=1.8, label=f"mean of {len(curves)}")
  ax.fill_between(grid, ys.min(0), ys.max(0), color="gray", alpha=0.2, linewidth=0)
  for i, (name, frames) in enumerate(ANCHORS.items()):
    ax.axvline(frames, color=f"C{i + 5}", linestyle="--", linewidth=1, label=name)
  ax.axhline(flags.FLAGS.target, color="gray", linestyle=":", linewidth=1)
  ax.set_xlabel("frames")
  ax.set_ylabel("rolling score (100 episodes)")
  ax.set_title(title, fontsize="medium")
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize="x-small", loc="lower right")
  fig.savefig(path)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  fv = flags.FLAGS
  if not fv.output:
    raise app.UsageError("--output is required (the JSON to write).")
  data = {"records": []}
  if fv.append and os.path.exists(fv.output):
    with open(fv.output) as f:
      data = json.load(f)
  data.setdefault("sittings", []).append(provenance_lib.provenance())
  data.update(preset=fv.preset, target=fv.target, max_frames=fv.max_frames, extra=fv.extra)
  for seed in (int(s) for s in fv.seeds):
    data["records"] = [r for r in data["records"] if r["seed"] != seed]
    data["records"].append(seed_record(fv.preset, seed))
    data["summary"] = summary(data["records"])
    with open(fv.output, "w") as f:
      json.dump(data, f, indent=1)
  chart(data["records"], os.path.splitext(fv.output)[0] + ".png",
        f"{fv.preset} {' '.join(fv.extra)}".strip())
  print(json.dumps(data["summary"], indent=1))


if __name__ == "__main__":
  app.run(main)
