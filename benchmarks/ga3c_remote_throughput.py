"""GA3C's training frames/s with Ray runners next to local agents, interleaved.

    python benchmarks/ga3c_remote_throughput.py --preset=ga3c_pong \
        --runner_agents=8 --rounds=3 --seconds=120 --warmup=60 \
        --output=benchmarks/results/ga3c_remote_throughput_<machine>.json

Each round runs the preset through the CLI (`python -m tfrl.ga3c`) once per
mode of `--modes`, in rotating order: `local` (the preset's agents in the
learner's process), `remote` (`--agents=0 --max_agents=A --ray_address=local
--ray_runners=N --ray_runner_cpus=C`: only Ray actors play, each with A
agents' slots, Ray on 127.0.0.1) and `local_matched` (local with N x A agents:
as many env slots as the remote run, so that a remote lead from more slots
shows). A run's frames/s is the growth of its frame count (the TensorBoard
stats' step) between the first and the last stats point of the window after
the warm-up.

Then one `recovery` run, remote: the first runner (its pid from the run's
"[ray] runner 0 ready: pid N" line) is SIGKILLed `--kill_after` seconds after
the warm-up. Reported: frames/s at each stats point over the trailing
`--recovery_window` seconds, before and after the kill, and the seconds from
the kill to the first point whose trailing window, wholly after the kill, is
back at `--recovered_fraction` of the median before it.

Every run waits for a quiet machine (1-minute load <= 0.5 per core) and
records the load before and after. Prints a table; writes JSON with the
commit, command, CPU model and date.
"""

import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

_PRESET = flags.DEFINE_string("preset", "ga3c_pong", "GA3C preset of every run.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds of local and remote.")
_SECONDS = flags.DEFINE_float("seconds", 120.0, "Measured seconds per run.")
_WARMUP = flags.DEFINE_float("warmup", 60.0, "Seconds of each run before the window.")
_RUNNERS = flags.DEFINE_integer("ray_runners", 2, "Remote runs: Ray runners.")
_RUNNER_CPUS = flags.DEFINE_float("ray_runner_cpus", 1.0, "Remote runs: CPUs per runner.")
_RUNNER_AGENTS = flags.DEFINE_integer(
    "runner_agents", 8, "Remote runs: --max_agents, the agents of each runner (8 x the "
    "preset's 4 env slots: each runner's predictor batches up to 32 states, as the local "
    "run's does).")
_REMOTE_FLAGS = flags.DEFINE_list(
    "remote_flags", [], "More flags for the remote runs only, e.g. --remote_flags=--t_max=16 "
    "(64 slots x 16 steps: the local run's 1,024 samples in flight, so its policy lag).")
_MODES = flags.DEFINE_list("modes", ["local", "remote", "local_matched"],
                           "Runs of each round, from: local, remote, local_matched.")
_KILL_AFTER = flags.DEFINE_float("kill_after", 60.0, "Recovery run: seconds after the "
                                 "warm-up at which runner 0 is SIGKILLed; 0: no recovery run.")
_RECOVERY_WINDOW = flags.DEFINE_float("recovery_window", 15.0, "Recovery run: frames/s "
                                      "at each stats point is over the trailing seconds.")
_RECOVERED = flags.DEFINE_float("recovered_fraction", 0.9, "Recovery run: a window at this "
                                "fraction of the median before the kill counts as recovered.")
_STATS_EVERY = flags.DEFINE_float("stats_every", 5.0, "The runs' --stats_every.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of every run.")
_WORKDIR = flags.DEFINE_string("workdir", "", "Where runs write (default: a new temp dir).")
_OUTPUT = flags.DEFINE_string("output", "ga3c_remote_throughput.json", "JSON path.")
_LOAD_FILE, _MAX_LOAD, _SETTLE = quiet.define_gate_flags()

_READY = re.compile(r"\[ray\] runner 0 ready: pid (\d+)")
# The stats' frame counter: its step is the run's emulator frames.
_FRAMES_TAG = "counters/episodes"


_ALL_MODES = ("local", "remote", "local_matched")


def mode_flags(mode):
  if mode == "local":
    return []
  if mode == "local_matched":
    agents = _RUNNERS.value * _RUNNER_AGENTS.value
    return [f"--agents={agents}", f"--max_agents={agents}"]
  return ["--agents=0", f"--max_agents={_RUNNER_AGENTS.value}", "--ray_address=local",
          f"--ray_runners={_RUNNERS.value}",
          f"--ray_runner_cpus={_RUNNER_CPUS.value:g}"] + list(_REMOTE_FLAGS.value)


def command(mode, rundir):
  return [sys.executable, "-m", "tfrl.ga3c", f"--preset={_PRESET.value}",
          f"--logdir={rundir}", f"--seed={_SEED.value}", f"--stats_every={_STATS_EVERY.value:g}",
          "--checkpoint_every=0"] + mode_flags(mode)


def _kill_runner_when_due(output, start, due, seen, done):
  """Reads runner 0's pid from the run's output; SIGKILLs it at `start + due`."""
  while not done.is_set() and "pid" not in seen:
    try:
      with open(output, errors="replace") as f:
        match = _READY.search(f.read())
    except OSError:
      match = None
    if match:
      seen["pid"] = int(match.group(1))
    else:
      done.wait(1.0)
  if "pid" not in seen or done.wait(max(0.0, start + due - time.time())):
    return
  try:
    os.kill(seen["pid"], signal.SIGKILL)
    seen["killed_at"] = time.time()
  except OSError as e:
    seen["kill_error"] = str(e)


def run(gate, mode, rundir, seconds, kill_due=None):
  """One CLI run for `seconds` after the quiet check: (Finished, record, kill record)."""
  cmd = command(mode, rundir)
  load = quiet.before_run(f"{mode} run", gate)
  print(f"  {mode}: {' '.join(cmd)}", flush=True)
  output = rundir + ".out"
  seen, done = {}, threading.Event()
  killer = None
  if kill_due is not None:
    killer = threading.Thread(target=_kill_runner_when_due,
                              args=(output, time.time(), kill_due, seen, done), daemon=True)
    killer.start()
  finished = runs.run_for(cmd, seconds, output)
  done.set()
  if killer is not None:
    killer.join(timeout=10)
  load.update(quiet.after_run(gate))
  record = {**load, "command": " ".join(cmd), "stopped": finished.how,
            "returncode": finished.returncode, "output": output}
  return finished, record, seen


def measured_round(gate, mode, rundir):
  finished, record, _ = run(gate, mode, rundir, _WARMUP.value + _SECONDS.value)
  points = runs.scalars(rundir, [_FRAMES_TAG])
  end = min(finished.start + _WARMUP.value + _SECONDS.value, finished.end)
  rate = runs.rate_in_window(points, finished.start + _WARMUP.value, end)
  record.update(frames_per_second=rate["per_second"], log_points=rate["points"],
                window_seconds=rate.get("seconds"), frames_in_window=rate.get("units"))
  if rate["per_second"] is None:
    record["error"] = f"fewer than 2 stats points after the warm-up:\n{finished.tail()}"
  return record


def trailing_rates(points, start, end, width):
  """[(seconds after `start`, frames/s over the trailing `width` s)] at each stats
  point in [start, end] whose trailing window also starts at or after `start`."""
  inside = [p for p in points if start <= p["wall_time"] <= end]
  out = []
  for i, p in enumerate(inside):
    earlier = [q for q in inside[:i] if q["wall_time"] >= p["wall_time"] - width]
    if earlier and p["wall_time"] > earlier[0]["wall_time"]:
      first = earlier[0]
      out.append((round(p["wall_time"] - start, 1),
                  (p["step"] - first["step"]) / (p["wall_time"] - first["wall_time"])))
  return out


def recovery_run(gate, rundir):
  """Remote, runner 0 SIGKILLed after the warm-up; frames/s around the kill."""
  seconds = _WARMUP.value + _KILL_AFTER.value + max(_SECONDS.value, 90.0)
  finished, record, seen = run(gate, "remote", rundir, seconds,
                               kill_due=_WARMUP.value + _KILL_AFTER.value)
  record.update({k: v for k, v in seen.items() if k != "killed_at"})
  if "killed_at" not in seen:
    record["error"] = f"runner 0 was not killed:\n{finished.tail()}"
    return record
  points = runs.scalars(rundir, [_FRAMES_TAG])
  width = _RECOVERY_WINDOW.value
  kill = seen["killed_at"]
  before = trailing_rates(points, finished.start + _WARMUP.value, kill, width)
  after = trailing_rates(points, kill, min(finished.start + seconds, finished.end), width)
  reference = statistics.median(r for _, r in before) if before else None
  recovered = None
  if reference:
    recovered = next((t for t, r in after if r >= _RECOVERED.value * reference), None)
  record.update(killed_after_seconds=round(kill - finished.start, 1),
                rates_before=before, rates_after=after,
                median_frames_per_second_before=reference,
                seconds_to_recover=recovered,
                replacement_logged=_replacement_logged(record["output"]))
  if reference is None:
    record["error"] = "fewer than 2 stats points between the warm-up and the kill"
  return record


def _replacement_logged(output):
  try:
    with open(output, errors="replace") as f:
      return bool(re.search(r"\[ray\] runner 0 lost .*starting runner \d+", f.read()))
  except OSError:
    return False


def _fmt(value, spec):
  return "-" if value is None else format(value, spec)


def _round_ratios(runs_a, runs_b):
  """Each round's frames/s of a over b, and their median."""
  pairs = [(a["frames_per_second"], b["frames_per_second"]) for a, b in zip(runs_a, runs_b)]
  ratios = [a / b for a, b in pairs if a and b]
  return ratios, (statistics.median(ratios) if ratios else None)


def summarize(rounds):
  rows = {}
  for mode, runs_of_mode in rounds.items():
    fps = [r["frames_per_second"] for r in runs_of_mode if r["frames_per_second"]]
    rows[mode] = {"median_frames_per_second": statistics.median(fps) if fps else None,
                  "best_frames_per_second": max(fps) if fps else None}
  for mode, base in (("remote", "local"), ("local_matched", "local"),
                     ("remote", "local_matched")):
    if mode in rounds and base in rounds:
      ratios, median = _round_ratios(rounds[mode], rounds[base])
      rows[mode][f"round_ratios_to_{base}"] = ratios
      rows[mode][f"median_ratio_to_{base}"] = median
  return rows


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    gate = quiet.Gate(_LOAD_FILE.value, _MAX_LOAD.value, _SETTLE.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  if _ROUNDS.value < 1 or _SECONDS.value <= 0 or _WARMUP.value < 0 or _KILL_AFTER.value < 0:
    raise app.UsageError("--rounds must be >= 1, --seconds > 0, --warmup and --kill_after "
                         ">= 0")
  modes = list(dict.fromkeys(_MODES.value))
  if not modes or any(m not in _ALL_MODES for m in modes) or "local" not in modes:
    raise app.UsageError(f"--modes must name some of {', '.join(_ALL_MODES)}, local among "
                         f"them (the reference); got {','.join(_MODES.value) or 'nothing'}")
  workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="tfrl_ga3c_remote_")
  record = {"provenance": provenance.provenance(), "preset": _PRESET.value,
            "settings": {"rounds": _ROUNDS.value, "seconds": _SECONDS.value,
                         "warmup": _WARMUP.value, "ray_runners": _RUNNERS.value,
                         "ray_runner_cpus": _RUNNER_CPUS.value,
                         "runner_agents": _RUNNER_AGENTS.value,
                         "remote_flags": list(_REMOTE_FLAGS.value), "seed": _SEED.value,
                         "stats_every": _STATS_EVERY.value, "kill_after": _KILL_AFTER.value,
                         "recovery_window": _RECOVERY_WINDOW.value,
                         "recovered_fraction": _RECOVERED.value},
            "modes": {m: " ".join(mode_flags(m)) for m in modes},
            "quiet_gate": gate.settings(), "workdir": workdir}
  rounds = {m: [] for m in modes}
  record["rounds"] = rounds
  try:
    for r in range(_ROUNDS.value):
      print(f"round {r + 1}/{_ROUNDS.value}", flush=True)
      for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
        rounds[mode].append(measured_round(gate, mode, os.path.join(workdir, f"{mode}_r{r}")))
    if _KILL_AFTER.value > 0:
      record["recovery"] = recovery_run(gate, os.path.join(workdir, "recovery"))
  except quiet.TooBusy as e:
    runs.write_json(record, os.path.join(workdir, "partial.json"))
    print(str(e), file=sys.stderr, flush=True)
    sys.exit(3)
  record["summary"] = summarize(rounds)
  runs.write_json(record, _OUTPUT.value)
  s = record["summary"]
  print(f"\nGA3C {_PRESET.value} training frames/s, {_ROUNDS.value} interleaved rounds, "
        f"{_SECONDS.value:.0f} s after {_WARMUP.value:.0f} s warm-up")
  print(f"{'mode':<14}{'median':>9}{'best':>9}{'x local':>9}  rounds")
  for mode in modes:
    ratio = s[mode].get("median_ratio_to_local") if mode != "local" else 1.0
    print(f"{mode:<14}{_fmt(s[mode]['median_frames_per_second'], '.0f'):>9}"
          f"{_fmt(s[mode]['best_frames_per_second'], '.0f'):>9}{_fmt(ratio, '.2f'):>9}  "
          + " ".join(_fmt(x["frames_per_second"], ".0f") for x in rounds[mode]))
  if "median_ratio_to_local_matched" in s.get("remote", {}):
    print(f"remote x local_matched: {_fmt(s['remote']['median_ratio_to_local_matched'], '.2f')}")
  if "recovery" in record:
    rec = record["recovery"]
    print(f"recovery: runner 0 killed at {_fmt(rec.get('killed_after_seconds'), '.0f')} s; "
          f"median before {_fmt(rec.get('median_frames_per_second_before'), '.0f')} frames/s; "
          f"back to {_RECOVERED.value:g}x after "
          f"{_fmt(rec.get('seconds_to_recover'), '.0f')} s")
  print(f"JSON: {_OUTPUT.value}  (runs in {workdir})")


if __name__ == "__main__":
  app.run(main)
