"""Pong, tfrl's main command against Stable-Baselines3 and Sample Factory, on one machine.

  python benchmarks/race_pong.py --modes=throughput --rounds=3 --seconds=180 \\
      --output=benchmarks/results/race_pong_<machine>.json
  python benchmarks/race_pong.py --modes=score --score_minutes=60 \\
      --output=benchmarks/results/race_pong_score_<machine>.json

Each library runs as its users run it, from its own virtualenv outside this
repository (benchmarks/README.md says how they were installed):

- tfrl: `python -m tfrl.ga3c --preset=ga3c_pong` (TFRL_COMMAND),
  from tfrl's venv;
- sb3_ppo, sb3_a2c: `python -m rl_zoo3.train --algo ppo|a2c --env
  PongNoFrameskip-v4` with rl-zoo3's own Atari hyperparameters (its
  hyperparams/ppo.yml and a2c.yml), from --sb3_venv, with `--env-kwargs
  repeat_action_probability:<p>` where p is the tfrl preset's (sticky actions:
  both sides play the same protocol);
- sf_appo: Sample Factory's Atari example, `python -m
  sf_examples.atari.train_atari --algo=APPO --env=atari_pong`, from --sf_venv.

Every run is a fresh process in a fresh directory, stopped by Ctrl-C after its
budget (nothing is left running). Frames are emulator frames, read from each
library's own TensorBoard log:
- tfrl: the step of its summaries is emulator frames (env steps x frame skip 4);
- Stable-Baselines3: the step is `num_timesteps`, agent steps summed over the
  envs; AtariWrapper repeats each action 4 frames (MaxAndSkipEnv), so x 4;
- Sample Factory: the step is env frames x `env_frameskip` when
  `summaries_use_frameskip` (its Atari default, read from the run's
  config.json), so x 1.

--modes=throughput: frames/s side by side in interleaved rounds (every row once
per round, then again), each run --warmup + --seconds long; the rate is the
growth of the frame count between the first and last log point after the
warm-up. Each row keeps its best round, its median, and its median ratio to
tfrl's run of the same round. Log cadences: tfrl every --tfrl_stats_every s,
SB3 PPO every rollout (1,024 agent steps), SB3 A2C every 100 updates (8,000
agent steps), Sample Factory every few seconds; a run with fewer than 2 points
in its window has no rate and says so (lengthen --seconds).

--modes=score: tfrl's main command and SB3 PPO (--score_rows), one seed each,
--score_minutes each, one after the other; score = the undiscounted full-game
return, rolling mean of the last --window episodes:
- tfrl: its `episode/rolling_score` summary (--score_window is passed as
  --window); its episodes are whole games unless the run has --episodic_life
  (read from its flags.txt, recorded, and warned about: then they are lives);
- SB3: its Monitor CSVs (`<log>/<algo>/PongNoFrameskip-v4_1/<env>.monitor.csv`,
  columns r, l, t after a `#{"t_start": ...}` line). rl-zoo3 wraps Monitor
  around the raw env, inside AtariWrapper, so a row is a whole game (AtariWrapper's
  life-loss episodes and reward clipping sit outside it; Pong has no lives
  anyway), r is the unclipped return and l counts emulator frames.
Writes JSON with provenance (the peers' commands and versions too) and a
chart of score against minutes.
"""

import json
import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import charts  # pylint: disable=g-import-not-at-top
from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tfrl's main command (README): the race runs whatever the preset holds now.
TFRL_COMMAND = ("-m", "tfrl.ga3c", "--preset=ga3c_pong")
GYM_ID = "PongNoFrameskip-v4"
PRESET_FILE = os.path.join(ROOT, "flags", "ga3c_pong.flags")
FRAME_SKIP = 4
ROWS = ("tfrl", "sb3_ppo", "sb3_a2c", "sf_appo")
SB3_PACKAGES = ("stable_baselines3", "rl_zoo3", "sb3_contrib", "torch", "gymnasium",
                "ale-py", "numpy", "opencv-python")
SF_PACKAGES = ("sample-factory", "torch", "gymnasium", "ale-py", "shimmy", "numpy",
               "opencv-python")

_MODES = flags.DEFINE_list("modes", ["throughput"], "throughput and/or score.")
_ROWS = flags.DEFINE_list("rows", list(ROWS), f"Throughput rows, of {ROWS}.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Throughput: interleaved rounds.")
_SECONDS = flags.DEFINE_float("seconds", 180.0, "Throughput: measured seconds per run.")
_WARMUP = flags.DEFINE_float("warmup", 60.0, "Throughput: seconds before the window "
                             "(start-up included).")
_TFRL_STATS_EVERY = flags.DEFINE_float(
    "tfrl_stats_every", 10.0, "Throughput: tfrl's --stats_every (its log cadence; "
    "the preset's 30 s gives few points in a short window). 0: the preset's.")
_SCORE_ROWS = flags.DEFINE_list("score_rows", ["tfrl", "sb3_ppo"], "Score-mode rows.")
_SCORE_MINUTES = flags.DEFINE_float("score_minutes", 60.0, "Score: minutes per run.")
_WINDOW = flags.DEFINE_integer("window", 100, "Score: episodes in the rolling mean.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of every run.")
_SB3_VENV = flags.DEFINE_string("sb3_venv", "/work/peers/sb3",
                                "Virtualenv with stable-baselines3 and rl_zoo3.")
_SF_VENV = flags.DEFINE_string("sf_venv", "/work/peers/sample-factory",
                               "Virtualenv with sample-factory and its Atari extra.")
_SB3_ARGS = flags.DEFINE_string(
    "sb3_extra_args", "--eval-freq -1",
    "Appended to rl_zoo3.train. Default: no periodic evaluation (it pauses training "
    "every 25k steps for 5 games; neither figure here reads it).")
_SF_ARGS = flags.DEFINE_string("sf_extra_args", "--device=cpu",
                               "Appended to train_atari (its default device is a GPU).")
_WORKDIR = flags.DEFINE_string("workdir", "", "Where runs write (default: a new temp dir).")
_OUTPUT = flags.DEFINE_string("output", "race_pong.json", "JSON path.")
_CHART = flags.DEFINE_string("chart", "", "Chart PNG (default: the JSON path with .png).")


def preset_repeat_action_probability():
  """The sticky-action probability tfrl's preset trains with (0 if it sets none)."""
  with open(PRESET_FILE) as f:
    for line in f:
      if line.startswith("--repeat_action_probability="):
        return float(line.split("=", 1)[1])
  return 0.0


def _fmt(value, spec):
  return "-" if value is None else format(value, spec)


def command(row, rundir, seed, throughput):
  """The row's command line and the working directory it runs in."""
  if row == "tfrl":
    cmd = [sys.executable, *TFRL_COMMAND, f"--logdir={rundir}", f"--seed={seed}",
           f"--score_window={_WINDOW.value}"]
    if throughput and _TFRL_STATS_EVERY.value > 0:
      cmd.append(f"--stats_every={_TFRL_STATS_EVERY.value:g}")
    return cmd, ROOT
  if row in ("sb3_ppo", "sb3_a2c"):
    return ([os.path.join(_SB3_VENV.value, "bin", "python"), "-m", "rl_zoo3.train",
             "--algo", row[4:], "--env", GYM_ID, "-f", os.path.join(rundir, "logs"),
             "-tb", os.path.join(rundir, "tb"), "--seed", str(seed),
             "--env-kwargs", f"repeat_action_probability:{preset_repeat_action_probability():g}",
             *_SB3_ARGS.value.split()], rundir)
  if row == "sf_appo":
    return ([os.path.join(_SF_VENV.value, "bin", "python"), "-m",
             "sf_examples.atari.train_atari", "--algo=APPO", "--env=atari_pong",
             "--experiment=race", f"--train_dir={rundir}", f"--seed={seed}",
             *_SF_ARGS.value.split()], rundir)
  raise app.UsageError(f"unknown row {row!r}; rows are {', '.join(ROWS)}")


def frame_points(row, rundir):
  """(wall_time, emulator frames) points of a run, from its own TensorBoard log."""
  if row == "tfrl":
    points, per_step = runs.scalars(rundir, ["counters/episodes"]), 1
  elif row.startswith("sb3_"):
    points, per_step = runs.scalars(os.path.join(rundir, "tb"), ["time/fps"]), FRAME_SKIP
  else:
    points = runs.scalars(os.path.join(rundir, "race", ".summary"), ["perf/_fps"])
    per_step = 1
    try:
      with open(os.path.join(rundir, "race", "config.json")) as f:
        cfg = json.load(f)
      per_step = 1 if cfg.get("summaries_use_frameskip", True) else cfg["env_frameskip"]
    except (OSError, ValueError, KeyError):
      pass
  return points, per_step


def monitor_episodes(rundir):
  """SB3's finished games from its Monitor CSVs: [(end wall time, return, frames)]."""
  episodes = []
  for root, _, files in os.walk(os.path.join(rundir, "logs")):
    for name in files:
      if not name.endswith(".monitor.csv"):
        continue
      with open(os.path.join(root, name)) as f:
        t_start = json.loads(f.readline()[1:])["t_start"]
        f.readline()  # r,l,t
        for line in f:
          parts = line.strip().split(",")
          if len(parts) >= 3:
            episodes.append((t_start + float(parts[2]), float(parts[0]), int(parts[1])))
  return sorted(episodes)


def run_once(row, rundir, seconds, seed, throughput):
  cmd, cwd = command(row, rundir, seed, throughput)
  os.makedirs(rundir, exist_ok=True)
  env = None if row == "tfrl" else runs.peer_env()
  print(f"  {row}: {' '.join(cmd)}", flush=True)
  return runs.run_for(cmd, seconds, os.path.join(rundir + ".out"), cwd=cwd, env=env)


def throughput_round(row, rundir, seed):
  done = run_once(row, rundir, _WARMUP.value + _SECONDS.value, seed, throughput=True)
  points, per_step = frame_points(row, rundir)
  end = done.stop_sent or done.end
  rate = runs.rate_in_window(points, done.start + _WARMUP.value, end, per_step)
  result = {"frames_per_second": rate["per_second"], "log_points": rate["points"],
            "window_seconds": rate.get("seconds"), "frames_in_window": rate.get("units"),
            "frames_per_logged_step": per_step, "stopped": done.how,
            "returncode": done.returncode, "output": done.output}
  if rate["per_second"] is None or not rate.get("units"):
    why = ("no frame counted" if rate["per_second"] is not None
           else "fewer than 2 log points")
    result["frames_per_second"] = None
    result["error"] = f"{why} after the warm-up; output tail:\n{done.tail()}"
  return result


def throughput(workdir, versions):
  per_row = {row: [] for row in _ROWS.value}
  for r in range(_ROUNDS.value):
    print(f"round {r + 1}/{_ROUNDS.value}", flush=True)
    for row in _ROWS.value:
      if versions.get(row, {}).get("missing"):
        continue
      per_row[row].append(throughput_round(row, os.path.join(workdir, f"tp_{row}_r{r}"),
                                           _SEED.value))
  rows = []
  for row, rounds in per_row.items():
    fps = [x["frames_per_second"] for x in rounds]
    ok = [f for f in fps if f is not None]
    ratios = [f / t["frames_per_second"] for f, t in zip(fps, per_row.get("tfrl", []))
              if f is not None and t["frames_per_second"]]
    rows.append({"row": row, "command": " ".join(command(row, "RUNDIR", _SEED.value, True)[0]),
                 "best_frames_per_second": max(ok) if ok else None,
                 "median_frames_per_second": statistics.median(ok) if ok else None,
                 "median_ratio_to_tfrl": statistics.median(ratios) if ratios else None,
                 "rounds": rounds})
  print(f"\nPong training frames/s (emulator frames), {_ROUNDS.value} interleaved rounds, "
        f"{_SECONDS.value:.0f} s after {_WARMUP.value:.0f} s warm-up")
  print(f"{'row':<10}{'best':>10}{'median':>10}{'x tfrl':>8}  rounds")
  for r in rows:
    print(f"{r['row']:<10}{_fmt(r['best_frames_per_second'], '10.0f'):>10}"
          f"{_fmt(r['median_frames_per_second'], '10.0f'):>10}"
          f"{_fmt(r['median_ratio_to_tfrl'], '8.2f'):>8}  "
          + " ".join(_fmt(x["frames_per_second"], ".0f") for x in r["rounds"]))
  return rows


def tfrl_curve(rundir, start):
  scores = runs.scalars(rundir, ["episode/rolling_score"])
  episodes = {p["step"]: p["value"] for p in runs.scalars(rundir, ["counters/episodes"])}
  return [{"minutes": (p["wall_time"] - start) / 60, "frames": p["step"],
           "episodes": int(episodes.get(p["step"], 0)), "score": p["value"]} for p in scores]


def tfrl_episodic_life(rundir):
  """Whether the tfrl run ended episodes at lost lives (its flags.txt): then its
  rolling score is over lives, not whole games, and is not the race's score."""
  try:
    with open(os.path.join(rundir, "flags.txt")) as f:
      return any(line.strip() == "--episodic_life" for line in f)
  except OSError:
    return None


def sb3_curve(rundir, start):
  episodes = monitor_episodes(rundir)
  points, per_step = frame_points("sb3_ppo", rundir)
  rolling = runs.rolling_mean([e[1] for e in episodes], _WINDOW.value)
  frames_at = np.cumsum([e[2] for e in episodes]) if episodes else []
  if points:  # frames at each game's end, from the training log's step counter
    times = [p["wall_time"] for p in points]
    steps = [p["step"] * per_step for p in points]
    frames_at = np.interp([e[0] for e in episodes], times, steps)
  return [{"minutes": (e[0] - start) / 60, "frames": int(frames), "episodes": i + 1,
           "score": s, "game_return": e[1]}
          for i, (e, s, frames) in enumerate(zip(episodes, rolling, frames_at))]


def summarize_curve(curve, minutes):
  inside = [c for c in curve if c["minutes"] <= minutes]
  full = [c for c in inside if c["episodes"] >= _WINDOW.value]
  reached = next((c for c in full if c["score"] >= 18), None)
  last = inside[-1] if inside else None
  return {"score_at_end": last and last["score"], "episodes_at_end": last and last["episodes"],
          "frames_at_end": last and last["frames"],
          "minutes_to_18": reached and reached["minutes"],
          "frames_to_18": reached and reached["frames"]}


def score_race(workdir, versions):
  results = []
  for row in _SCORE_ROWS.value:
    if versions.get(row, {}).get("missing"):
      continue
    rundir = os.path.join(workdir, f"score_{row}")
    done = run_once(row, rundir, _SCORE_MINUTES.value * 60, _SEED.value, throughput=False)
    curve = (tfrl_curve if row == "tfrl" else sb3_curve)(rundir, done.start)
    if row == "tfrl" and tfrl_episodic_life(rundir):
      print("WARNING: tfrl ran with --episodic_life: its scores are per life, not per game")
    results.append({"row": row, "seed": _SEED.value,
                    "episodic_life": tfrl_episodic_life(rundir) if row == "tfrl" else False,
                    "command": " ".join(command(row, rundir, _SEED.value, False)[0]),
                    "stopped": done.how, "returncode": done.returncode,
                    "output": done.output, **summarize_curve(curve, _SCORE_MINUTES.value),
                    "curve": curve})
  print(f"\nPong score (rolling mean of {_WINDOW.value} full games) after "
        f"{_SCORE_MINUTES.value:g} min, seed {_SEED.value}")
  print(f"{'row':<10}{'score':>8}{'games':>8}{'frames':>12}{'min to 18':>11}")
  for r in results:
    print(f"{r['row']:<10}{_fmt(r['score_at_end'], '8.2f'):>8}"
          f"{_fmt(r['episodes_at_end'], 'd'):>8}{_fmt(r['frames_at_end'], 'd'):>12}"
          f"{_fmt(r['minutes_to_18'], '11.1f'):>11}")
  return results


def score_chart(record, path):
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
  for r in record["score"]:
    curve = r["curve"]
    ax.plot([c["minutes"] for c in curve], [c["score"] for c in curve],
            color=charts.OURS if r["row"] == "tfrl" else charts.PEER,
            label=f"{r['row']} (seed {r['seed']})")
  ax.axhline(18, color="#cccccc", lw=0.8, ls="--")
  ax.set_xlabel("minutes (wall clock, from process start)")
  ax.set_ylabel(f"rolling mean of {_WINDOW.value} full games")
  ax.set_title(f"Pong score against wall clock\n{charts.machine(record)}",
               fontsize=10)
  ax.legend()
  fig.tight_layout()
  fig.savefig(path)
  plt.close(fig)


def peer_versions():
  out = {}
  for row in set(_ROWS.value) | set(_SCORE_ROWS.value):
    venv = {"sb3_ppo": _SB3_VENV, "sb3_a2c": _SB3_VENV, "sf_appo": _SF_VENV}.get(row)
    if venv is None:
      continue
    python = os.path.join(venv.value, "bin", "python")
    if not os.path.exists(python):
      out[row] = {"venv": venv.value, "missing": f"{python} not found: row skipped"}
      print(f"{row}: {out[row]['missing']}")
      continue
    packages = SF_PACKAGES if row == "sf_appo" else SB3_PACKAGES
    out[row] = {"venv": venv.value, "versions": runs.venv_versions(venv.value, packages)}
  return out


def main(argv):
  del argv
  modes = set(_MODES.value)
  if not modes or modes - {"throughput", "score"}:
    raise app.UsageError(f"--modes takes throughput and/or score, got {_MODES.value}")
  unknown = set(_ROWS.value) - set(ROWS)
  if unknown or set(_SCORE_ROWS.value) - {"tfrl", "sb3_ppo"}:
    raise app.UsageError(f"--rows are of {', '.join(ROWS)} and --score_rows of tfrl, "
                         f"sb3_ppo; got {_ROWS.value} and {_SCORE_ROWS.value}")
  workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="tfrl_race_pong_")
  record = {"provenance": provenance.provenance(), "tfrl_command": " ".join(TFRL_COMMAND),
            "workdir": workdir, "peers": peer_versions(), "frame_skip": FRAME_SKIP,
            "repeat_action_probability": {
                "tfrl": preset_repeat_action_probability(),
                "sb3": preset_repeat_action_probability(),
                "sf_appo": "its Atari example's default (not changed)"},
            "load_average_start": os.getloadavg(), "started": time.time()}
  if "throughput" in modes:
    record["throughput"] = throughput(workdir, record["peers"])
    record["throughput_settings"] = {"seconds": _SECONDS.value, "warmup": _WARMUP.value,
                                     "rounds": _ROUNDS.value,
                                     "tfrl_stats_every": _TFRL_STATS_EVERY.value}
  if "score" in modes:
    record["score"] = score_race(workdir, record["peers"])
    record["score_settings"] = {"minutes": _SCORE_MINUTES.value, "window": _WINDOW.value,
                                "seed": _SEED.value}
  record["load_average_end"] = os.getloadavg()
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(record, f, indent=1)
  print(f"JSON: {_OUTPUT.value}  (runs in {workdir})")
  if "score" in modes and record["score"]:
    chart = _CHART.value or os.path.splitext(_OUTPUT.value)[0] + ".png"
    score_chart(record, chart)
    print(f"chart: {chart}")


if __name__ == "__main__":
  app.run(main)
