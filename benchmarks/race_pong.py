"""Pong, tfrl's main command against Stable-Baselines3 and Sample Factory, on one machine.

  python benchmarks/race_pong.py --modes=throughput --rounds=3 --seconds=180 \\
      --output=benchmarks/results/race_pong_<machine>.json
  python benchmarks/race_pong.py --modes=score --score_rows=tfrl,sb3_ppo \\
      --score_seeds=0 --score_minutes=60 --output=benchmarks/results/race_pong_score_<machine>.json
  python benchmarks/race_pong.py --modes=score --score_rows=tfrl,sb3_ppo --score_seeds=1 \\
      --append --output=benchmarks/results/race_pong_score_<machine>.json   # a later sitting
  python benchmarks/race_pong.py --dry_run --output=/tmp/plan.json   # the record, nothing run

Each library runs as its users run it, from its own virtualenv outside this
repository (benchmarks/peers/setup_peers.sh makes them); the rows, their
commands, networks and settings are in benchmarks/peers/pong_rows.py: tfrl's
main command (GA3C's CNN), SB3 PPO and A2C through rl-zoo3 (NatureCNN, and
again with GA3C's CNN: the networks matched), Sample Factory APPO sized for 2
cores from its docs. Every row but Sample Factory (whose example has no
setting for it) plays the tfrl preset's sticky actions.

A quiet machine: before every run the 1-minute load average must fall to
--max_load_per_core x cores within --settle_seconds (benchmarks/peers/quiet.py);
otherwise the race prints one line saying so, leaves what it has in
<workdir>/partial.json, reports nothing and exits 3. Each run records the load
average before and after it.

Every run is a fresh process in a fresh directory. tfrl and SB3 are stopped by
Ctrl-C after their budget (both exit 0); Sample Factory stops itself at its own
--train_for_seconds (benchmarks/peers/sf_atari.py) and exits 0. Frames are
emulator frames, read from each library's own TensorBoard log:
- tfrl: the step of its summaries is emulator frames (env steps x frame skip 4);
- Stable-Baselines3: the step is `num_timesteps`, agent steps summed over the
  envs; AtariWrapper repeats each action 4 frames (MaxAndSkipEnv), so x 4;
- Sample Factory: the step is env steps, x `env_frameskip` (4) since the run
  has --summaries_use_frameskip=False (read from the run's config.json).

--modes=throughput: frames/s side by side in interleaved rounds (every row once
per round, then again), each run --warmup + --seconds long; the rate is the
growth of the frame count between the first and last log point in the window
[start + warmup, start + warmup + seconds]. Each row keeps its best round, its
median, and its median ratio to tfrl's run of the same round. A run with fewer
than 2 log points in its window has no rate and says so (lengthen --seconds).

--modes=score: --score_rows x --score_seeds, --score_minutes each, one after
the other; score = the rolling mean of the last --window whole games
(benchmarks/peers/pong_score.py says how each library's games are read);
--append adds (row, seed) runs to an earlier --output of the same minutes and
window, each run with its sitting's provenance. Writes JSON (each side's
command, versions, network, settings; each run's load) and a chart.
"""

import json
import os
import shlex
import statistics
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import pong_rows  # pylint: disable=g-import-not-at-top
from benchmarks.peers import pong_score  # pylint: disable=g-import-not-at-top
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from benchmarks.peers import race_cli  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

ROWS = tuple(pong_rows.ROWS)

_MODES = flags.DEFINE_list("modes", ["throughput"], "throughput and/or score.")
_ROWS = flags.DEFINE_list("rows", list(ROWS), f"Throughput rows, of {ROWS}.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Throughput: interleaved rounds.")
_SECONDS = flags.DEFINE_float("seconds", 180.0, "Throughput: measured seconds per run.")
_WARMUP = flags.DEFINE_float("warmup", 60.0, "Throughput: seconds before the window "
                             "(start-up included).")
_TFRL_STATS_EVERY = flags.DEFINE_float(
    "tfrl_stats_every", 10.0, "Throughput: tfrl's --stats_every (its log cadence; "
    "the preset's 30 s gives few points in a short window). 0: the preset's.")
_SCORE_ROWS = flags.DEFINE_list("score_rows", ["tfrl", "sb3_ppo"],
                                f"Score-mode rows, of {pong_rows.SCORE_ROWS}.")
_SCORE_SEEDS = flags.DEFINE_list("score_seeds", ["0"], "Score: one run per row and seed.")
_SCORE_MINUTES = flags.DEFINE_float("score_minutes", 60.0, "Score: minutes per run.")
_WINDOW = flags.DEFINE_integer("window", 100, "Score: games in the rolling mean.")
_SEED = flags.DEFINE_integer("seed", 0, "Throughput: the seed of every run.")
_SB3_VENV = flags.DEFINE_string("sb3_venv", "/work/peers/sb3",
                                "Virtualenv with stable-baselines3 and rl_zoo3.")
_SF_VENV = flags.DEFINE_string("sf_venv", "/work/peers/sf",
                               "Virtualenv with sample-factory and Pong's ROM.")
_SB3_ARGS = flags.DEFINE_string(
    "sb3_extra_args", "--eval-freq -1",
    "Appended to rl_zoo3.train. Default: no periodic evaluation (it pauses training "
    "every 25k steps for 5 games; neither figure here reads it).")
_SF_ARGS = flags.DEFINE_string("sf_extra_args", "", "Appended to Sample Factory's arguments "
                               "(after pong_rows.SF_2CORE_ARGS, so they win).")
_GATE = quiet.define_gate_flags()
_OUT = race_cli.define_output_flags(
    "race_pong", "commands, versions, networks, settings, load",
    "Score: add the runs to an existing --output.")


def venvs():
  return {"sb3": _SB3_VENV.value, "sf": _SF_VENV.value}


def command(row, rundir, seed, seconds, throughput):
  """The row's command line, working directory and extra environment variables."""
  tfrl_extra = [f"--score_window={_WINDOW.value}"]
  if throughput and _TFRL_STATS_EVERY.value > 0:
    tfrl_extra.append(f"--stats_every={_TFRL_STATS_EVERY.value:g}")
  extra = {"sb3": shlex.split(_SB3_ARGS.value), "sf": shlex.split(_SF_ARGS.value)}
  return pong_rows.command(row, venvs(), rundir, seed, seconds, extra, tfrl_extra)


def frame_points(row, rundir):
  """(wall_time, emulator frames) points of a run, from its own TensorBoard log."""
  if row == "tfrl":
    return runs.scalars(rundir, ["counters/episodes"]), 1
  if row.startswith("sb3_"):
    return runs.scalars(os.path.join(rundir, "tb"), ["time/fps"]), pong_rows.FRAME_SKIP
  points = runs.scalars(os.path.join(rundir, "race", ".summary"), ["perf/_fps"])
  cfg = peer_config(row, rundir) or {}
  per_step = 1 if cfg.get("summaries_use_frameskip", True) else cfg.get("env_frameskip")
  return points, per_step or pong_rows.FRAME_SKIP


def peer_config(row, rundir):
  """The settings the peer itself saved for the run (SB3: config.yml text; SF: config.json)."""
  if row.startswith("sb3_"):
    for root, _, files in os.walk(os.path.join(rundir, "logs")):
      if "config.yml" in files:
        with open(os.path.join(root, "config.yml")) as f:
          return f.read()
  elif row == "sf_appo":
    try:
      with open(os.path.join(rundir, "race", "config.json")) as f:
        return json.load(f)
    except (OSError, ValueError):
      pass
  return None


def run_once(gate, row, rundir, seconds, seed, throughput):
  """One run after the quiet check; (Finished, its load and peer-config record)."""
  cmd, cwd, extra_env = command(row, rundir, seed, seconds, throughput)
  load = quiet.before_run(f"{row} seed {seed}", gate)
  os.makedirs(rundir, exist_ok=True)
  env = None if row == "tfrl" else runs.peer_env(extra_env)
  print(f"  {row}: {' '.join(cmd)}", flush=True)
  # Sample Factory ends itself at `seconds`; the margin lets its stop path finish.
  budget = seconds + 120 if row == "sf_appo" else seconds
  done = runs.run_for(cmd, budget, rundir + ".out", cwd=cwd, env=env)
  load.update(quiet.after_run(gate))
  return done, {**load, "command": " ".join(cmd), "peer_config": peer_config(row, rundir)}


def throughput_round(gate, row, rundir, seed):
  budget = _WARMUP.value + _SECONDS.value
  done, record = run_once(gate, row, rundir, budget, seed, throughput=True)
  points, per_step = frame_points(row, rundir)
  window_end = min(done.start + budget, done.end)
  rate = runs.rate_in_window(points, done.start + _WARMUP.value, window_end, per_step)
  result = {"frames_per_second": rate["per_second"], "log_points": rate["points"],
            "window_seconds": rate.get("seconds"), "frames_in_window": rate.get("units"),
            "frames_per_logged_step": per_step, "stopped": done.how,
            "returncode": done.returncode, "output": done.output, **record}
  if rate["per_second"] is None or not rate.get("units"):
    why = ("no frame counted" if rate["per_second"] is not None
           else "fewer than 2 log points")
    result["frames_per_second"] = None
    result["error"] = f"{why} after the warm-up; output tail:\n{done.tail()}"
  return result


def throughput(gate, workdir, sides, partial):
  per_row = {row: [] for row in _ROWS.value if not sides[row].get("missing")}
  partial["throughput_rounds"] = per_row
  for r in range(_ROUNDS.value):
    print(f"round {r + 1}/{_ROUNDS.value}", flush=True)
    for row, rounds in per_row.items():
      rounds.append(throughput_round(gate, row, os.path.join(workdir, f"tp_{row}_r{r}"),
                                     _SEED.value))
  rows = []
  for row, rounds in per_row.items():
    fps = [x["frames_per_second"] for x in rounds]
    ok = [f for f in fps if f is not None]
    ratios = [f / t["frames_per_second"] for f, t in zip(fps, per_row.get("tfrl", []))
              if f is not None and t["frames_per_second"]]
    rows.append({"row": row, "best_frames_per_second": max(ok) if ok else None,
                 "median_frames_per_second": statistics.median(ok) if ok else None,
                 "median_ratio_to_tfrl": statistics.median(ratios) if ratios else None,
                 "rounds": rounds})
  print(f"\nPong training frames/s (emulator frames), {_ROUNDS.value} interleaved rounds, "
        f"{_SECONDS.value:.0f} s after {_WARMUP.value:.0f} s warm-up")
  print(f"{'row':<18}{'M mul-add':>10}{'best':>9}{'median':>9}{'x tfrl':>8}  rounds")
  for r in rows:
    mads = sides[r["row"]]["network"]["multiply_adds_per_forward"] / 1e6
    print(f"{r['row']:<18}{mads:>10.2f}{race_cli.fmt(r['best_frames_per_second'], '9.0f'):>9}"
          f"{race_cli.fmt(r['median_frames_per_second'], '9.0f'):>9}"
          f"{race_cli.fmt(r['median_ratio_to_tfrl'], '8.2f'):>8}  "
          + " ".join(race_cli.fmt(x["frames_per_second"], ".0f") for x in r["rounds"]))
  return rows


def score_run(gate, workdir, row, seed):
  rundir = os.path.join(workdir, f"score_{row}_s{seed}")
  seconds = _SCORE_MINUTES.value * 60
  done, record = run_once(gate, row, rundir, seconds, seed, throughput=False)
  if row == "tfrl":
    curve = pong_score.tfrl_curve(rundir, done.start, _WINDOW.value)
    episodic_life = pong_score.tfrl_episodic_life(rundir)
    if episodic_life:
      print("WARNING: tfrl ran with --episodic_life: its scores are per life, not per game")
  else:
    curve = pong_score.sb3_curve(rundir, done.start, _WINDOW.value, frame_points(row, rundir))
    episodic_life = False
  return {"row": row, "seed": seed, "episodic_life": episodic_life, "stopped": done.how,
          "returncode": done.returncode, "output": done.output, **record,
          **pong_score.summarize_curve(curve, _SCORE_MINUTES.value, _WINDOW.value),
          "curve": curve}


def score_race(gate, workdir, sides, partial, sitting):
  results = partial.setdefault("score", [])
  for seed in (int(s) for s in _SCORE_SEEDS.value):
    for row in _SCORE_ROWS.value:
      if not sides[row].get("missing"):
        results.append({**score_run(gate, workdir, row, seed), "provenance": sitting})
  print(f"\nPong score (rolling mean of {_WINDOW.value} full games) after "
        f"{_SCORE_MINUTES.value:g} min")
  print(f"{'row':<18}{'seed':>5}{'score':>8}{'games':>8}{'frames':>12}{'min to 18':>11}")
  for r in results:
    print(f"{r['row']:<18}{r['seed']:>5}{race_cli.fmt(r['score_at_end'], '8.2f'):>8}"
          f"{race_cli.fmt(r['episodes_at_end'], 'd'):>8}{race_cli.fmt(r['frames_at_end'], 'd'):>12}"
          f"{race_cli.fmt(r['minutes_to_18'], '11.1f'):>11}")
  return results


def side_records(rows, sticky):
  """Per row: venv, versions, network and multiply-adds, settings and its command."""
  out = {}
  for row in rows:
    spec = pong_rows.ROWS[row]
    side = spec.record(sticky)
    side["command"] = " ".join(command(row, "RUNDIR", 0, _WARMUP.value + _SECONDS.value,
                                       "throughput" in _MODES.value)[0])
    if spec.venv is None:
      side["versions"] = "tfrl: the provenance's commit, python and tensorflow"
    else:
      venv = venvs()[spec.venv]
      packages = pong_rows.SF_PACKAGES if spec.venv == "sf" else pong_rows.SB3_PACKAGES
      side["venv"] = venv
      if os.path.exists(os.path.join(venv, "bin", "python")):
        side["versions"] = runs.venv_versions(venv, packages)
      else:
        side["missing"] = f"{venv}/bin/python not found: row skipped"
        print(f"{row}: {side['missing']}")
    out[row] = side
  return out


def check_flags():
  modes = set(_MODES.value)
  if not modes or modes - {"throughput", "score"}:
    raise app.UsageError(f"--modes takes throughput and/or score, got {_MODES.value}")
  if set(_ROWS.value) - set(ROWS) or set(_SCORE_ROWS.value) - set(pong_rows.SCORE_ROWS):
    raise app.UsageError(f"--rows are of {', '.join(ROWS)} and --score_rows of "
                         f"{', '.join(pong_rows.SCORE_ROWS)}; got {_ROWS.value} and "
                         f"{_SCORE_ROWS.value}")
  if _OUT.append.value and modes != {"score"}:
    raise app.UsageError("--append adds score runs: use it with --modes=score alone")
  return race_cli.gate(_GATE)


def new_record(gate, workdir):
  modes = set(_MODES.value)
  rows = ((set(_ROWS.value) if "throughput" in modes else set())
          | (set(_SCORE_ROWS.value) if "score" in modes else set()))
  sticky = pong_rows.preset_repeat_action_probability()
  record = {"provenance": provenance.provenance(), "modes": sorted(modes),
            "tfrl_command": " ".join(pong_rows.TFRL_COMMAND), "workdir": workdir,
            "frame_skip": pong_rows.FRAME_SKIP, "preset_repeat_action_probability": sticky,
            "sides": side_records([r for r in ROWS if r in rows], sticky),
            "quiet_gate": gate.settings(), "load_average_start": list(quiet.read_load(gate.path)),
            "started": time.time()}
  if "throughput" in modes:
    record["throughput_settings"] = {"seconds": _SECONDS.value, "warmup": _WARMUP.value,
                                     "rounds": _ROUNDS.value, "seed": _SEED.value,
                                     "tfrl_stats_every": _TFRL_STATS_EVERY.value}
  if "score" in modes:
    record.update(score_minutes=_SCORE_MINUTES.value, window=_WINDOW.value)
  return record


def appended_to(record):
  earlier = provenance.earlier_record(
      _OUT.output.value, {"score_minutes": _SCORE_MINUTES.value, "window": _WINDOW.value})
  done = {(r["row"], r["seed"]) for r in earlier.get("score", [])}
  again = sorted(f"{row} seed {s}" for row in _SCORE_ROWS.value
                 for s in (int(x) for x in _SCORE_SEEDS.value) if (row, s) in done)
  if again:
    raise app.UsageError(f"--append: {_OUT.output.value} already has {', '.join(again)}")
  provenance.add_sitting(earlier, record["provenance"])
  for row, side in record["sides"].items():
    earlier.setdefault("sides", {}).setdefault(row, side)
  return earlier


def race(gate, record, workdir):
  """The runs (a refused one leaves what was done in <workdir>/partial.json)."""
  with race_cli.running(gate, record, workdir):
    if "throughput" in record["modes"]:
      record["throughput"] = throughput(gate, workdir, record["sides"], record)
      del record["throughput_rounds"]
    if "score" in record["modes"]:
      score_race(gate, workdir, record["sides"], record, record["provenance"])


def main(argv):
  started = race_cli.start(argv, _OUT, check_flags, new_record)
  if started is None:
    return
  gate, record, workdir = started
  earlier = appended_to(record) if _OUT.append.value else None
  race(gate, record, workdir)
  if earlier is not None:
    earlier["score"].extend(record["score"])
    record = earlier
  if "score" in record["modes"]:
    record["score_over_seeds"] = pong_score.over_seeds(record["score"])
  runs.write_json(record, _OUT.output.value)
  print(f"JSON: {_OUT.output.value}  (runs in {workdir})")
  if record.get("score"):
    chart = _OUT.chart_path()
    pong_score.chart(record, chart, _WINDOW.value)
    print(f"chart: {chart}")


if __name__ == "__main__":
  app.run(main)
