"""TD3 presets over seeds at their full budget: eval return, compression, curves.

  python benchmarks/td3_study.py --presets=td3_halfcheetah,td3_halfcheetah_pruning,\\
td3_halfcheetah_gst_fixed_b64_dst_inputs_c80 --seeds=0,1,2 --parallel=2 \\
      --workdir=/tmp/tfrl_td3_study --output=benchmarks/results/td3_study_halfcheetah.json

Each preset and seed is one run as a user starts it (`python -m tfrl.td3
--preset=P --seed=S --logdir=<workdir>/P_sS --checkpoint_every=C`), up to
`--parallel` at once, each with `--tf_threads` TensorFlow threads
(TF_NUM_INTRAOP_THREADS, TF_NUM_INTEROP_THREADS; default 1): two such runs on
2 cores make more env steps per second between them than one run with both
cores (docs/td3.md). A run's returns against env steps do not depend on
the machine's load; its minutes do (recorded, a figure only from a quiet
machine).

The JSON lists every sitting (each invocation that ran something): its
commit, command, CPU and date, and per run it started the env steps it found
and left (`from_step`, `to_step`); a run whose logdir is gone although an
earlier sitting had taken it on (a new machine) starts afresh, and the study
says so (`lost_steps`) and keeps the JSON's earlier record of it, curve
included (`lost_runs`): so write the JSON where it outlives the machine
(benchmarks/results, committed) even when the workdir cannot. A run whose
logdir already holds a finished `summary.json` (an earlier sitting's) is
read, not run again, and one the JSON records as finished is carried over
as recorded when its logdir is gone (a sitting given a subset of the
presets or seeds keeps the others' finished runs: the JSON only grows);
every run is
started with `--resume`, so one stopped with Ctrl-C goes on from its
checkpoint (and a fresh one starts afresh). So a study longer than one
sitting is the same command again; Ctrl-C (SIGTERM alike) stops the runs
with their checkpoints, writes the sitting and the JSON, and exits with 130
(143). The JSON is written as the sitting starts and as each run ends, its
sitting marked `open`; a study killed outright (SIGKILL, the machine gone)
leaves it so, and the next sitting marks it `killed`, its runs at the
checkpoints they kept (`to_step`: their latest checkpoint, a run that wrote no
summary being read from its checkpoints' names). `--collect`
writes the JSON and charts of the runs finished so far without starting any.
`--earlier=<study JSON>` (repeatable) carries over, alike, the finished runs
of other study JSONs whose logdirs are gone (another machine, a cleared
workdir): they are kept as that JSON recorded them, with its machine, and not
run again.

Per run the JSON keeps its `summary.json` figures (eval return: the mean of
the preset's 10 deterministic episodes after the last step on an env seeded
apart from training; the last 10 training episodes' mean; average and final
compression; stored parameters; compressed policy bytes), its eval curve, its
flags and minutes; per preset, the mean and spread over seeds, the eval
return as a percentage of the first preset's (the dense baseline) and the
average compression in points over every other preset. A chart (tfrl.plot:
mean and min-max band over seeds, one line per preset) of eval return
against env steps is drawn from the curves the JSON records, and beside it
(`<chart>_tradeoff.png`, benchmarks/charts.py) eval return against average
compression, one point per finished run.
"""

import glob
import json
import os
import signal
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top
from tfrl import presets  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL_TAG = "eval/return"
# summary.json's figures kept per run and summed up per preset.
FIGURES = ("eval_return", "train_return_last10", "average_compression_ratio",
           "final_compression_ratio", "stored_params", "policy_compressed_bytes",
           "policy_bytes")

_PRESETS = flags.DEFINE_list("presets", None, "TD3 presets (flags/td3_*.flags); the first "
                             "is the baseline the others' eval return is compared with.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds, one run per preset each.")
_SET = flags.DEFINE_multi_string("set", [], "Extra flags for every run, without the leading "
                                 "--, e.g. --set=total_steps=20000 for a short study.")
_PARALLEL = flags.DEFINE_integer("parallel", 2, "Runs at once.")
_TF_THREADS = flags.DEFINE_integer("tf_threads", 1, "TensorFlow threads per run (intra- and "
                                   "inter-op); 0: TensorFlow's default (all cores).")
_CHECKPOINT_EVERY = flags.DEFINE_integer("checkpoint_every", 100_000, "Env steps between a "
                                         "run's checkpoints (its replay buffer included).")
_HOURS = flags.DEFINE_float("hours", 4.0, "A run still going after this long is stopped "
                            "(Ctrl-C: checkpoint; the next sitting resumes it).")
_WORKDIR = flags.DEFINE_string("workdir", "/tmp/tfrl_td3_study", "Runs' logdirs.")
_OUTPUT = flags.DEFINE_string("output", "td3_study.json", "JSON path.")
_CHART = flags.DEFINE_string("chart", "", "Chart PNG (default: the JSON path with .png).")
_COLLECT = flags.DEFINE_bool("collect", False, "Start no run: the JSON and chart of the runs "
                             "finished so far (the rest are listed, not completed).")
_EARLIER = flags.DEFINE_multi_string("earlier", [], "Study JSONs of earlier sittings (the "
                                     "flag repeated): their finished runs stand for those "
                                     "whose logdir holds none; the first JSON to hold a run wins.")


def logdir(preset: str, seed: int) -> str:
  return os.path.join(_WORKDIR.value, f"{preset}_s{seed}")


def read_summary(path: str):
  """A run's summary.json, or None when it has none (or a broken one: reported)."""
  try:
    with open(os.path.join(path, "summary.json")) as f:
      return json.load(f)
  except FileNotFoundError:
    return None
  except ValueError as e:
    raise app.UsageError(f"{path}/summary.json is not readable JSON ({e}); move the run "
                         "aside or delete it to run it again.") from e


def read_earlier(paths) -> dict:
  """{(preset, seed): run} of the finished runs the study JSONs at `paths`
  record, each marked with the JSON and the CPU it was first recorded in; the first
  path to hold a run wins."""
  out = {}
  for path in reversed(paths):
    out.update(read_study(path))
  return out


def read_study(path: str) -> dict:
  try:
    with open(path) as f:
      return finished_runs(json.load(f), path)
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise app.UsageError(f"--earlier={path} is not a readable study JSON "
                         f"({type(e).__name__}: {e}).") from e


def finished_runs(record: dict, path: str) -> dict:
  """{(preset, seed): run} of the finished runs a study JSON (read from
  `path`) records, each marked with the JSON and CPU that first recorded it."""
  cpu = record["provenance"]["cpu_model"]
  return {(r["preset"], r["seed"]): dict(r, recorded_in=r.get("recorded_in", path),
                                        cpu_model=r.get("cpu_model", cpu))
          for r in record["runs"] if r["completed"]}


def command(preset: str, seed: int):
  return [sys.executable, "-m", "tfrl.td3", f"--preset={preset}", f"--seed={seed}",
          f"--logdir={logdir(preset, seed)}", f"--checkpoint_every={_CHECKPOINT_EVERY.value}",
          # A run stopped in an earlier sitting goes on; without a checkpoint
          # --resume starts afresh (and says so).
          "--resume", *[f"--{f}" for f in _SET.value]]


def read_output(path: str) -> dict:
  """What an earlier invocation with this --output wrote ({} if nothing)."""
  try:
    with open(path) as f:
      record = json.load(f)
    if not isinstance(record, dict):
      raise ValueError("not a JSON object")
    return record
  except FileNotFoundError:
    return {}
  except ValueError as e:
    raise app.UsageError(f"--output={path} exists but is not a study JSON ({e}); move it "
                         "aside to start a new one.") from e


def lost_runs(previous: dict, lost) -> list:
  """The runs `previous` (the earlier --output) lost before, plus its record of
  each run in `lost` (their logdirs are gone): their curves up to where they
  were stopped stay in the JSON, not only their step counts."""
  kept = list(previous.get("lost_runs", []))
  for run in previous.get("runs", []):
    if (run["preset"], run["seed"]) in lost and run.get("env_steps") and run not in kept:
      kept.append(run)
  return kept


def last_steps(sittings) -> dict:
  """{(preset, seed): the step the latest sitting that ran it left it at}."""
  out = {}
  for sitting in sittings:
    for run in sitting.get("runs", []):
      out[(run["preset"], run["seed"])] = run.get("to_step") or 0
  return out


def run_steps(key) -> int:
  """The env steps a run's logdir holds, 0 if none: its summary.json's, or
  its latest checkpoint's where a killed run wrote no summary."""
  path = logdir(*key)
  steps = [int((read_summary(path) or {}).get("env_steps") or 0)]
  for index in glob.glob(os.path.join(path, "checkpoints", "ckpt-*.index")):
    name = os.path.basename(index)[len("ckpt-"):-len(".index")]
    steps += [int(name)] if name.isdigit() else []
  return max(steps)


def close_killed(sittings, now) -> None:
  """Ends the sittings an earlier invocation left open: it was killed (SIGKILL,
  a machine switched off) before it could stop its runs, which kept the
  checkpoints their logdirs hold `now` ({(preset, seed): env steps})."""
  for sitting in sittings:
    if sitting.get("state") != "open":
      continue
    sitting["state"] = "killed"
    for run in sitting["runs"]:
      if run.get("how") is None:
        run["how"] = "killed"
        run["to_step"] = max(run["to_step"], now.get((run["preset"], run["seed"]), 0))


_STOP_ASKED = []  # the signals that asked the study to stop


class _Stopped(Exception):
  """Ctrl-C or SIGTERM arrived; the runs were stopped with their checkpoints."""


def _ask_stop(signum, frame):
  """Notes the signal for run_all's loop to act on: an exception raised from
  wherever a signal lands can be lost (one landing in a fork handler is)."""
  del frame
  _STOP_ASKED.append("Ctrl-C" if signum == signal.SIGINT else "SIGTERM")


def run_all(todo, ended, on_end) -> None:
  """Runs `todo` ([(preset, seed)]), `--parallel` at a time, filling `ended`
  ({(preset, seed): how it ended}) and calling `on_end()` as each ends.
  Ctrl-C or SIGTERM stops every run with its checkpoint (recorded in
  `ended`), then goes on up."""
  env = dict(os.environ)
  if _TF_THREADS.value:
    env.update(TF_NUM_INTRAOP_THREADS=str(_TF_THREADS.value),
               TF_NUM_INTEROP_THREADS=str(_TF_THREADS.value))
  waiting, going = list(todo), {}
  try:
    while waiting or going:
      if _STOP_ASKED:
        raise _Stopped(_STOP_ASKED[0])
      while waiting and len(going) < _PARALLEL.value:
        key = waiting.pop(0)
        cmd = command(*key)
        print(f"  start {' '.join(cmd)}", flush=True)
        going[key] = runs.start(cmd, logdir(*key) + ".out", cwd=ROOT, env=env)
      time.sleep(0.5)
      for key, session in list(going.items()):
        overdue = time.time() - session.start > _HOURS.value * 3600
        if session.running() and not overdue:
          continue
        # Popped once ended: an interruption while it stops still reaches it.
        ended[key] = runs.finish(session, stop=overdue)
        del going[key]
        print(f"  {key[0]} seed {key[1]}: {ended[key].how}, exit {ended[key].returncode}",
              flush=True)
        on_end()
  except BaseException:
    for key, session in going.items():
      ended[key] = runs.finish(session, stop=True)
    raise


def eval_curve(path: str):
  """[{step, eval_return}] of the run's evaluations (the last value of a step
  played again after a resume)."""
  by_step = {p["step"]: p["value"] for p in runs.scalars(path, [EVAL_TAG])}
  return [{"step": s, "eval_return": v} for s, v in sorted(by_step.items())]


def run_record(preset: str, seed: int, ended) -> dict:
  path = logdir(preset, seed)
  summary = read_summary(path) or {}
  run = {"preset": preset, "seed": seed, "logdir": path,
         "command": " ".join(command(preset, seed)),
         "completed": bool(summary.get("completed")),
         "minutes": summary["wall_seconds"] / 60 if "wall_seconds" in summary else None,
         "env_steps": summary.get("env_steps"), "curve": eval_curve(path)}
  run.update({k: summary.get(k) for k in FIGURES})
  if ended is not None:
    run["stopped"] = ended.how
    if ended.returncode not in (0, None) or not summary:
      run["error"] = ended.tail()
  try:
    with open(os.path.join(path, "flags.txt")) as f:
      run["flags"] = f.read().split()
  except OSError:
    pass
  return run


def summarize(record) -> dict:
  """Per preset: each figure's spread over its completed runs; eval as % of the
  first preset's; average compression in points over each other preset."""
  out = {}
  for preset in record["presets"]:
    done = [r for r in record["runs"] if r["preset"] == preset and r["completed"]]
    out[preset] = {k: runs.spread([r[k] for r in done]) for k in FIGURES}
    out[preset]["seeds"] = sorted(r["seed"] for r in done)
  base = out[record["presets"][0]]["eval_return"]
  for preset, s in out.items():
    if s["eval_return"] and base:
      s["eval_pct_of_baseline"] = 100 * s["eval_return"]["mean"] / base["mean"]
    mine = s["average_compression_ratio"]
    s["compression_points_over"] = {
        other: 100 * (mine["mean"] - o["average_compression_ratio"]["mean"])
        for other, o in out.items()
        if other != preset and mine and o["average_compression_ratio"]}
  return out


def chart(record, path: str) -> list:
  """tfrl.plot of every completed run's eval curve (CSV in the workdir), one
  label per preset; the runs drawn."""
  drawn = [r for r in record["runs"] if r["completed"] and r["curve"]]
  cmd = [sys.executable, "-m", "tfrl.plot", f"--out={path}", "--x=frames", "--band=minmax",
         f"--tag={EVAL_TAG}", "--ylabel=eval return (10 episodes)"]
  for r in drawn:
    csv_path = logdir(r["preset"], r["seed"]) + "_eval.csv"
    with open(csv_path, "w") as f:
      f.write(f"step,seconds,{EVAL_TAG}\n")
      f.writelines(f"{p['step']},0,{p['eval_return']!r}\n" for p in r["curve"])
    cmd += [f"--logdir={csv_path}", f"--label={r['preset']}"]
  if not drawn:
    return []
  done = runs.run_for(cmd, 600, os.path.join(_WORKDIR.value, "chart.out"), cwd=ROOT)
  return [[r["preset"], r["seed"]] for r in drawn] if done.returncode == 0 else []


def main(argv):
  del argv
  # Ctrl-C stops the runs with their checkpoints, also for a study started in
  # the background (which starts a process with SIGINT ignored).
  signal.signal(signal.SIGINT, _ask_stop)
  signal.signal(signal.SIGTERM, _ask_stop)  # as a machine's shutdown sends it
  if not _PRESETS.value or not _SEEDS.value or _PARALLEL.value < 1 or _TF_THREADS.value < 0:
    raise app.UsageError("--presets (TD3 presets), --seeds, --parallel >= 1 and "
                         "--tf_threads >= 0 are needed.")
  known = presets.names("tfrl.td3")
  bad = [p for p in _PRESETS.value if p not in known]
  if bad:
    raise app.UsageError(f"--presets: {', '.join(bad)} not TD3 presets; they are: "
                         f"{', '.join(known)}.")
  try:
    seeds = [int(s) for s in _SEEDS.value]
  except ValueError as e:
    raise app.UsageError(f"--seeds must be integers: {e}") from None
  os.makedirs(_WORKDIR.value, exist_ok=True)
  keys = [(p, s) for s in seeds for p in _PRESETS.value]
  here = {k for k in keys if (read_summary(logdir(*k)) or {}).get("completed")}
  previous = read_output(_OUTPUT.value)
  # The finished runs this study's own JSON records outlive a workdir that did
  # not (another machine) as those of --earlier do; --earlier's win.
  try:
    own = finished_runs(previous, _OUTPUT.value) if previous else {}
  except (KeyError, TypeError) as e:
    raise app.UsageError(f"--output={_OUTPUT.value} exists but is not a study JSON "
                         f"({type(e).__name__}: {e}); move it aside to start a new one.") from e
  earlier = {k: r for k, r in {**own, **read_earlier(_EARLIER.value)}.items()
             if k in keys and k not in here}
  todo = [k for k in keys if k not in here and k not in earlier]
  if earlier:
    print(f"{len(earlier)} runs carried over from earlier JSONs (--earlier, --output) whose "
          "logdirs are not here", flush=True)
  print(f"{len(keys) - len(todo)} runs finished earlier; "
        f"{len(todo)} {'not finished (--collect)' if _COLLECT.value else 'to run'}", flush=True)
  sittings = list(previous.get("sittings", []))
  before = {k: run_steps(k) for k in todo}
  reached = last_steps(sittings)
  lost = {k for k in todo if before[k] == 0 and reached.get(k, 0) > 0}
  for key in sorted(lost):
    print(f"  {key[0]} seed {key[1]}: an earlier sitting took it to step {reached[key]:,}, "
          "but its logdir is gone (another machine?); it starts afresh", flush=True)
  if not _COLLECT.value:  # (--collect may run beside a study still going)
    close_killed(sittings, before)
  ended, stopped_by = {}, None

  def write(state):
    """The JSON with this sitting as it stands: written when it starts and as
    each run ends, so that a study killed outright still leaves its record."""
    now = list(sittings)
    if not _COLLECT.value:
      now.append(dict(provenance.provenance(), state=state, runs=[
          {"preset": k[0], "seed": k[1], "from_step": before[k], "to_step": run_steps(k),
           "how": ended[k].how if k in ended else None,
           **({"lost_steps": reached[k]} if k in lost else {})}
          for k in todo]))
    # A sitting given fewer presets or seeds than the JSON holds keeps the
    # others' finished runs as recorded: the JSON only grows.
    kept = [r for k, r in own.items() if k not in keys]
    record = {"provenance": provenance.provenance(), "sittings": now,
              "presets": list(dict.fromkeys([*_PRESETS.value, *(r["preset"] for r in kept)])),
              "seeds": list(dict.fromkeys([*seeds, *(r["seed"] for r in kept)])),
              "set": _SET.value, "parallel": _PARALLEL.value,
              "tf_threads": _TF_THREADS.value, "collect_only": _COLLECT.value,
              "earlier": _EARLIER.value,
              "runs": [earlier.get((p, s)) or run_record(p, s, ended.get((p, s)))
                       for p, s in keys] + kept,
              "lost_runs": lost_runs(previous, lost)}
    record["summary"] = summarize(record)
    runs.write_json(record, _OUTPUT.value)
    return record

  if not _COLLECT.value:
    try:
      write("open")
      run_all(todo, ended, lambda: write("open"))
    except _Stopped as stop:
      stopped_by = str(stop)  # the sitting and the JSON are still written below
  record = write(f"stopped by {stopped_by}" if stopped_by else "ended")
  path = _CHART.value or os.path.splitext(_OUTPUT.value)[0] + ".png"
  record["chart_runs"] = chart(record, path)
  runs.write_json(record, _OUTPUT.value)
  tradeoff = os.path.splitext(path)[0] + "_tradeoff.png"
  if record["chart_runs"]:
    runs.run_for([sys.executable, "benchmarks/charts.py", "tradeoff", _OUTPUT.value, tradeoff],
                 600, os.path.join(_WORKDIR.value, "chart.out"), cwd=ROOT)
  for preset, s in record["summary"].items():
    e, c = s["eval_return"], s["average_compression_ratio"]
    print(f"{preset}: seeds {s['seeds']}; eval "
          + (f"{e['mean']:,.0f} ({e['min']:,.0f}-{e['max']:,.0f})" if e else "-")
          + (f"; avg compression {100 * c['mean']:.1f}%" if c else ""))
  print(f"JSON: {_OUTPUT.value}  charts: {path}, {tradeoff}")
  if stopped_by:
    print(f"Stopped by {stopped_by}: the runs kept their checkpoints; the same command goes "
          "on from them.", flush=True)
    sys.exit(130 if stopped_by == "Ctrl-C" else 143)


if __name__ == "__main__":
  app.run(main)
