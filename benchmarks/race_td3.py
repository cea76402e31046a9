"""TD3's env steps per second against SB3's and CleanRL's TD3, interleaved rounds.

    python benchmarks/race_td3.py --rounds=3 --steps=5000 \
        --output=benchmarks/results/race_td3_<machine>.json

Each round runs every row once, each as its own process after a quiet check
(1-minute load at most 0.5 per core), on the same task, network (actor and
critics `--hidden`), batch size and one update per env step, CPU only:

  tfrl       `benchmarks/td3_throughput.py --preset=P --rounds=1` (the preset's
             env on the MuJoCo ops, its `update_every`)
  tfrl_gymnasium  the same on gymnasium's env (`--set=env_implementation=gymnasium`),
             the env SB3 steps: the ratio like for like
  tfrl_xla   the same with `--set=jit_compile=true`
  sb3        Stable-Baselines3's TD3 (`benchmarks/peers/sb3_td3.py` in the SB3
             venv: `TD3("MlpPolicy", ...)`, train_freq 1, gradient_steps 1)
  cleanrl    CleanRL's `cleanrl/td3_continuous_action.py` as its users run it,
             from a checkout of its repository in the CleanRL venv (its
             pins: gymnasium 0.29.1, so the task's v4 version)

Every row plays `--start_steps` random-action steps, `--warmup` steps with
updates, then is timed over `--steps` more; tfrl and SB3 time themselves,
CleanRL's steps/s comes from its TensorBoard log (the wall time of its
`charts/SPS` points, written every 100 steps, from the first at or after
start + warm-up to the last). Prints a table (median and best round, ratio of
medians to each peer); writes JSON with each row's command, versions and
settings, the load before and after each run, commit, CPU model and date.
Peers' venvs: benchmarks/peers/setup_peers.sh sb3 cleanrl.
"""

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
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

ROWS = ("tfrl", "tfrl_gymnasium", "tfrl_xla", "sb3", "cleanrl")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ROWS = flags.DEFINE_list("rows", list(ROWS), f"Rows, of {ROWS}.")
_PRESET = flags.DEFINE_string("preset", "td3_halfcheetah", "tfrl's TD3 preset.")
_ENV = flags.DEFINE_string("env", "HalfCheetah-v5", "The task of tfrl and SB3.")
_CLEANRL_ENV = flags.DEFINE_string("cleanrl_env", "HalfCheetah-v4",
                                   "CleanRL's task (its gymnasium 0.29.1 has no v5).")
_HIDDEN = flags.DEFINE_string("hidden", "256,256", "Actor and critic hidden sizes "
                              "(the peers'; tfrl's come from the preset, checked equal).")
_BATCH = flags.DEFINE_integer("batch_size", 256, "Batch size (checked against the preset).")
_START = flags.DEFINE_integer("start_steps", 1000, "Random-action steps before updates.")
_WARMUP = flags.DEFINE_integer("warmup", 1000, "Untimed steps with updates after them.")
_STEPS = flags.DEFINE_integer("steps", 5000, "Timed env steps per row and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
_SEED = flags.DEFINE_integer("seed", 1, "Seed of every run.")
_SB3_VENV = flags.DEFINE_string("sb3_venv", "/work/peers/sb3", "SB3's virtualenv.")
_CLEANRL_VENV = flags.DEFINE_string("cleanrl_venv", "/work/peers/cleanrl",
                                    "CleanRL's virtualenv; its checkout is <venv>/src.")
_BUDGET = flags.DEFINE_float("budget", 1800.0, "Seconds a run may take before it is stopped.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Write the record of what would run, "
                             "without running it.")
_WORKDIR = flags.DEFINE_string("workdir", "", "Where runs write (default: a new temp dir).")
_OUTPUT = flags.DEFINE_string("output", "race_td3.json", "JSON path.")
_LOAD_FILE, _MAX_LOAD, _SETTLE = quiet.define_gate_flags()
REFUSED_EXIT = 3


def command(row, rundir):
  """(argv, working directory, extra environment) of one run of `row`."""
  start, warmup, steps = _START.value, _WARMUP.value, _STEPS.value
  if row.startswith("tfrl"):
    argv = [sys.executable, os.path.join(_ROOT, "benchmarks", "td3_throughput.py"),
            f"--preset={_PRESET.value}", f"--start_steps={start}", f"--warmup={warmup}",
            f"--steps={steps}", "--rounds=1", f"--set=seed={_SEED.value}",
            f"--output={os.path.join(rundir, 'timing.json')}"]
    argv += {"tfrl_xla": ["--set=jit_compile=true"],
             "tfrl_gymnasium": ["--set=env_implementation=gymnasium"]}.get(row, [])
    return argv, _ROOT, None
  if row == "sb3":
    return ([os.path.join(_SB3_VENV.value, "bin", "python"),
             os.path.join(_ROOT, "benchmarks", "peers", "sb3_td3.py"), f"--env={_ENV.value}",
             f"--hidden={_HIDDEN.value}", f"--batch_size={_BATCH.value}",
             f"--learning_starts={start}", f"--warmup={warmup}", f"--steps={steps}",
             f"--seed={_SEED.value}", f"--output={os.path.join(rundir, 'timing.json')}"],
            rundir, {})
  src = os.path.join(_CLEANRL_VENV.value, "src")
  return ([os.path.join(_CLEANRL_VENV.value, "bin", "python"),
           os.path.join(src, "cleanrl", "td3_continuous_action.py"),
           "--env-id", _CLEANRL_ENV.value, "--total-timesteps", str(start + warmup + steps),
           "--learning-starts", str(start), "--batch-size", str(_BATCH.value),
           "--seed", str(_SEED.value), "--no-cuda"],
          rundir, {"PYTHONPATH": src, "CUDA_VISIBLE_DEVICES": ""})


def steps_per_second(row, rundir, finished):
  """(steps/s, how it was read) of a finished run."""
  if row != "cleanrl":
    try:
      with open(os.path.join(rundir, "timing.json")) as f:
        timing = json.load(f)
    except (OSError, ValueError) as e:
      return None, f"no timing.json ({e})"
    if row.startswith("tfrl"):
      return timing["rows"][-1]["median_steps_per_second"], "td3_throughput.py"
    return timing["steps_per_second"], "sb3_td3.py"
  points = [p for p in runs.scalars(os.path.join(rundir, "runs"), ["charts/SPS"])
            if p["step"] >= _START.value + _WARMUP.value]
  rate = runs.rate_in_window(points, finished.start, finished.end)
  return rate["per_second"], f"charts/SPS points {rate['points']}, {rate.get('units')} steps"


def run_round(gate, row, rundir):
  argv, cwd, extra_env = command(row, rundir)
  load = quiet.before_run(f"{row} run", gate)
  os.makedirs(rundir, exist_ok=True)
  print(f"  {row}: {' '.join(argv)}", flush=True)
  env = None if extra_env is None else runs.peer_env(extra_env)
  finished = runs.run_for(argv, _BUDGET.value, rundir + ".out", cwd=cwd, env=env)
  load.update(quiet.after_run(gate))
  rate, how = steps_per_second(row, rundir, finished)
  record = {**load, "steps_per_second": rate, "read_from": how, "stopped": finished.how,
            "returncode": finished.returncode, "output": finished.output}
  if rate is None or finished.returncode != 0:
    record["error"] = f"no steps/s or exit {finished.returncode}:\n{finished.tail()}"
  print(f"    {row}: {'-' if rate is None else f'{rate:.1f}'} steps/s", flush=True)
  return record


def sides(rows):
  """What each row runs: command template, versions, network and settings."""
  venvs = {"sb3": (_SB3_VENV.value, ("stable-baselines3", "gymnasium", "mujoco", "torch",
                                     "numpy")),
           "cleanrl": (_CLEANRL_VENV.value, ("gymnasium", "mujoco", "torch", "numpy", "tyro"))}
  out = {}
  for row in rows:
    argv, _, extra_env = command(row, "<rundir>")
    side = {"command": " ".join(argv), "environment": extra_env or {},
            "hidden": [int(h) for h in _HIDDEN.value.split(",")], "batch_size": _BATCH.value,
            "env": _CLEANRL_ENV.value if row == "cleanrl" else _ENV.value,
            "updates_per_env_step": 1, "device": "cpu"}
    if row in venvs:
      venv, packages = venvs[row]
      side["versions"] = runs.venv_versions(venv, packages)
      side["missing"] = not os.path.exists(argv[0])
    if row == "cleanrl":
      side["checkout"] = provenance.checkout_commit(os.path.join(_CLEANRL_VENV.value, "src"))
    out[row] = side
  return out


def check_preset():
  """tfrl's preset must train the network and batch the peers are given."""
  config = td3_preset.td3_config(_PRESET.value, [])
  hidden = [int(h) for h in _HIDDEN.value.split(",")]
  if list(config.hidden_sizes) != hidden or config.batch_size != _BATCH.value:
    raise app.UsageError(f"--preset={_PRESET.value} trains hidden {list(config.hidden_sizes)}, "
                         f"batch {config.batch_size}; the peers would get --hidden="
                         f"{_HIDDEN.value} --batch_size={_BATCH.value}")
  return td3_preset.settings(config)


def summarize(rounds):
  medians = {row: statistics.median(r) if (r := [x["steps_per_second"] for x in recs
                                                if x["steps_per_second"]]) else None
             for row, recs in rounds.items()}
  table = []
  for row, recs in rounds.items():
    rates = [x["steps_per_second"] for x in recs if x["steps_per_second"]]
    entry = {"row": row, "median_steps_per_second": medians[row],
             "best_steps_per_second": max(rates) if rates else None,
             "hours_to_1m_steps_at_median": 1e6 / medians[row] / 3600 if medians[row] else None}
    for peer in ("sb3", "cleanrl"):
      if row.startswith("tfrl") and medians.get(peer) and medians[row]:
        entry[f"ratio_to_{peer}"] = medians[row] / medians[peer]
    table.append(entry)
  return table


def _fmt(value, spec):
  return "-" if value is None else format(value, spec)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  unknown = sorted(set(_ROWS.value) - set(ROWS))
  if unknown or _ROUNDS.value < 1 or _STEPS.value < 200 or _START.value < 1:
    raise app.UsageError(f"--rows must be of {', '.join(ROWS)} (got {', '.join(unknown)}); "
                         f"--rounds >= 1, --steps >= 200, --start_steps >= 1")
  try:
    gate = quiet.Gate(_LOAD_FILE.value, _MAX_LOAD.value, _SETTLE.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="tfrl_race_td3_")
  record = {"provenance": provenance.provenance(), "preset": _PRESET.value,
            "tfrl_settings": check_preset(), "sides": sides(_ROWS.value),
            "settings": {"start_steps": _START.value, "warmup": _WARMUP.value,
                         "steps": _STEPS.value, "rounds": _ROUNDS.value, "seed": _SEED.value},
            "quiet_gate": gate.settings(), "workdir": workdir, "started": time.time()}
  missing = [row for row, side in record["sides"].items() if side.get("missing")]
  if _DRY_RUN.value:
    record["dry_run"] = True
    runs.write_json(record, _OUTPUT.value)
    print(f"dry run, nothing ran; JSON: {_OUTPUT.value}")
    return
  if missing:
    raise app.UsageError(f"no venv for {', '.join(missing)}: run benchmarks/peers/"
                         f"setup_peers.sh {' '.join(missing)} or drop them from --rows")
  rounds = {row: [] for row in _ROWS.value}
  record["rounds"] = rounds
  try:
    for r in range(_ROUNDS.value):
      print(f"round {r + 1}/{_ROUNDS.value}", flush=True)
      for row in _ROWS.value:
        rounds[row].append(run_round(gate, row, os.path.join(workdir, f"{row}_r{r}")))
  except quiet.TooBusy as e:
    runs.write_json(record, os.path.join(workdir, "partial.json"))
    print(str(e), file=sys.stderr, flush=True)
    sys.exit(REFUSED_EXIT)
  record["table"] = summarize(rounds)
  runs.write_json(record, _OUTPUT.value)
  print(f"\nTD3 env steps/s (one update per step), {_ROUNDS.value} interleaved rounds of "
        f"{_STEPS.value} steps after {_START.value} + {_WARMUP.value}")
  print(f"{'row':<10}{'median':>9}{'best':>9}{'x sb3':>8}{'x cleanrl':>11}  rounds")
  for t in record["table"]:
    print(f"{t['row']:<10}{_fmt(t['median_steps_per_second'], '.1f'):>9}"
          f"{_fmt(t['best_steps_per_second'], '.1f'):>9}"
          f"{_fmt(t.get('ratio_to_sb3'), '.2f'):>8}{_fmt(t.get('ratio_to_cleanrl'), '.2f'):>11}  "
          + " ".join(_fmt(x["steps_per_second"], ".0f") for x in rounds[t["row"]]))
  print(f"JSON: {_OUTPUT.value}  (runs in {workdir})")


if __name__ == "__main__":
  app.run(main)
