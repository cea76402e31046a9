"""HalfCheetah-v5: tfrl's ES against EvoTorch's PGPE, same CPUs, same wall clock.

  python benchmarks/race_mujoco.py --minutes=30 --seeds=0,1,2 \\
      --output=benchmarks/results/race_mujoco_<machine>.json

For each seed, one run of each library, --minutes of wall clock each (counted
from the process's start, start-up included), one after the other:

- tfrl: `python -m tfrl.es --preset=es_halfcheetah` (--tfrl_command;
  the race appends --env, --seed and --logdir), from tfrl's venv. Its score per
  generation comes from its TensorBoard log: `es/mean` (the population's mean
  return) and `es/elite` (the centre's return over the preset's
  --center_episodes); env steps are `es/frames` (a gymnasium env step is one
  frame). Stopped by Ctrl-C at the budget: the generation under way is dropped
  and the exported elite (<logdir>/elite) is the last finished generation's
  centre.
- EvoTorch: benchmarks/peers/evotorch_pgpe.py in --evotorch_venv, PGPE with
  ClipUp on `GymNE` with GymNE's observation normalization, as EvoTorch's own
  examples run MuJoCo (its header gives the hyperparameters), on --cpus Ray
  actors bound to 127.0.0.1. Its score per generation is `mean_eval`, the
  population's mean return, as PGPE's status reports it (the centre is not
  evaluated while it trains); env steps are GymNE's `total_interaction_count`.
  It stops by itself at the budget, dropping a generation that ends after it.

The same score for both: the population's mean return per generation (curves
against minutes and against env steps), and after the budget, outside it, the
final centre played for --final_episodes fresh episodes by each library's own
player (tfrl.evaluate on the exported policy; EvoTorch's `to_policy` with the
observation statistics frozen): the undiscounted return, no action noise.

The same CPUs: EvoTorch gets --cpus actors (default: all cores); with fewer
cores than the machine has, both runs are pinned to cores 0..cpus-1 (taskset).
Writes JSON with provenance (EvoTorch's command and versions too) and a chart.

--append adds runs to an existing --output of the same env, minutes and CPUs
(a (library, seed) already there is refused): a race of 3 seeds x 2 x 30
minutes can run one seed per sitting. Each run keeps the provenance of its
own sitting (commit, CPU model, date), since a seed's two runs, not the
seeds, share a machine.
"""

import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import charts  # pylint: disable=g-import-not-at-top
from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TFRL_COMMAND = "-m tfrl.es --preset=es_halfcheetah"
TFRL_EVAL_COMMAND = "-m tfrl.evaluate"
EVOTORCH_DRIVER = os.path.join(ROOT, "benchmarks", "peers", "evotorch_pgpe.py")
EVOTORCH_PACKAGES = ("evotorch", "torch", "gymnasium", "mujoco", "ray", "numpy")

_ENV = flags.DEFINE_string("env", "HalfCheetah-v5", "gymnasium env id for both libraries.")
_MINUTES = flags.DEFINE_float("minutes", 30.0, "Wall-clock minutes per run.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds; one run of each library each.")
_CPUS = flags.DEFINE_integer("cpus", os.cpu_count() or 1,
                             "CPUs for each run (EvoTorch's Ray actors).")
_TFRL_COMMAND = flags.DEFINE_string(
    "tfrl_command", TFRL_COMMAND, "tfrl's arguments after the python executable.")
_EVOTORCH_VENV = flags.DEFINE_string("evotorch_venv", "/work/peers/evotorch",
                                     "Virtualenv with evotorch and gymnasium[mujoco].")
_EVOTORCH_ARGS = flags.DEFINE_string(
    "evotorch_extra_args", "", "Appended to the EvoTorch driver (e.g. --popsize=200).")
_FINAL_EPISODES = flags.DEFINE_integer("final_episodes", 10,
                                       "Episodes of each final centre.")
_LIBRARIES = flags.DEFINE_list("libraries", ["tfrl", "evotorch"], "Which to run.")
_WORKDIR = flags.DEFINE_string("workdir", "", "Where runs write (default: a new temp dir).")
_OUTPUT = flags.DEFINE_string("output", "race_mujoco.json", "JSON path.")
_CHART = flags.DEFINE_string("chart", "", "Chart PNG (default: the JSON path with .png).")
_APPEND = flags.DEFINE_bool("append", False, "Add the runs to an existing --output "
                            "(same env, minutes and CPUs) instead of replacing it.")


def _fmt(value, spec):
  return "-" if value is None else format(value, spec)


def _pinned(cmd):
  if _CPUS.value >= (os.cpu_count() or 1):
    return cmd
  return ["taskset", "-c", f"0-{_CPUS.value - 1}", *cmd]


def tfrl_command(logdir, seed):
  return _pinned([sys.executable, *shlex.split(_TFRL_COMMAND.value), f"--env={_ENV.value}",
                  f"--seed={seed}", f"--logdir={logdir}"])


def evotorch_command(rundir, seed):
  python = os.path.join(_EVOTORCH_VENV.value, "bin", "python")
  return _pinned([python, EVOTORCH_DRIVER, f"--env={_ENV.value}",
                  f"--seconds={_MINUTES.value * 60:g}", f"--seed={seed}",
                  f"--num_actors={_CPUS.value}", f"--final_episodes={_FINAL_EPISODES.value}",
                  f"--log={rundir}/generations.jsonl", f"--result={rundir}/result.json",
                  *shlex.split(_EVOTORCH_ARGS.value)])


def run_tfrl(workdir, seed):
  logdir = os.path.join(workdir, f"tfrl_s{seed}")
  cmd = tfrl_command(logdir, seed)
  print(f"  tfrl seed {seed}: {' '.join(cmd)}", flush=True)
  done = runs.run_for(cmd, _MINUTES.value * 60, logdir + ".out", cwd=ROOT)
  by_step = {}
  for p in runs.scalars(logdir, ["es/mean", "es/elite", "es/frames"]):
    by_step.setdefault(p["step"], {"generation": p["step"],
                                   "minutes": (p["wall_time"] - done.start) / 60})
    by_step[p["step"]][p["tag"].split("/")[1]] = p["value"]
  curve = [{"generation": g["generation"], "minutes": g["minutes"],
            "env_steps": int(g.get("frames", 0)), "mean": g.get("mean"),
            "centre": g.get("elite")} for _, g in sorted(by_step.items())]
  run = check_finished({"library": "tfrl", "seed": seed, "command": " ".join(cmd),
                        "stopped": done.how, "returncode": done.returncode,
                        "output": done.output, "curve": curve}, done)
  run.update(evaluate_tfrl(logdir, seed))
  return run


def evaluate_tfrl(logdir, seed):
  """The exported centre over --final_episodes episodes, by tfrl.evaluate."""
  policy, report = os.path.join(logdir, "elite"), os.path.join(logdir, "final_eval.json")
  # The env and its protocol come from the exported policy, as trained.
  cmd = [sys.executable, *shlex.split(TFRL_EVAL_COMMAND), f"--policy={policy}",
         f"--episodes={_FINAL_EPISODES.value}", f"--seed={seed}", f"--output={report}"]
  if not os.path.isdir(policy):
    return {"final_centre_error": f"no exported policy in {policy}"}
  done = runs.run_for(cmd, 1800, logdir + "_eval.out", cwd=ROOT)
  try:
    with open(report) as f:
      scores = json.load(f)["scores"]
    return {"final_centre_returns": scores, "final_centre_mean": statistics.fmean(scores),
            "final_eval_command": " ".join(cmd)}
  except (OSError, ValueError, KeyError):
    return {"final_centre_error": done.tail(), "final_eval_command": " ".join(cmd)}


def run_evotorch(workdir, seed):
  rundir = os.path.join(workdir, f"evotorch_s{seed}")
  os.makedirs(rundir, exist_ok=True)
  cmd = evotorch_command(rundir, seed)
  print(f"  evotorch seed {seed}: {' '.join(cmd)}", flush=True)
  # Short: Ray's socket paths under it must fit the 107 bytes of a unix socket.
  ray_tmp = tempfile.mkdtemp(prefix="ray_", dir="/tmp")
  env = runs.peer_env({"RAY_TMPDIR": ray_tmp})
  try:  # its own budget ends the training; the allowance covers the final episodes
    done = runs.run_for(cmd, _MINUTES.value * 60 + 900, rundir + ".out", cwd=rundir,
                        env=env)
  finally:
    shutil.rmtree(ray_tmp, ignore_errors=True)
  curve = []
  try:
    with open(os.path.join(rundir, "generations.jsonl")) as f:
      for line in f:
        g = json.loads(line)
        curve.append({"generation": g["generation"], "minutes": g["seconds"] / 60,
                      "env_steps": g["env_steps"], "mean": g["mean_eval"],
                      "median": g["median_eval"], "best": g["pop_best_eval"],
                      "popsize": g["popsize"]})
  except OSError:
    pass
  out = check_finished({"library": "evotorch", "seed": seed, "command": " ".join(cmd),
                        "stopped": done.how, "returncode": done.returncode,
                        "output": done.output, "curve": curve}, done)
  try:
    with open(os.path.join(rundir, "result.json")) as f:
      result = json.load(f)
    out.update(final_centre_returns=result["final_center_returns"],
               final_centre_mean=result["final_center_mean"], versions=result["versions"])
  except (OSError, ValueError, KeyError):
    out["final_centre_error"] = done.tail()
  return out


def check_finished(run, done):
  """Notes a run that finished no generation, with the end of what it printed."""
  if not run["curve"]:
    run["error"] = (f"no generation finished (stopped: {done.how}, exit {done.returncode}); "
                    f"output tail:\n{done.tail(5)}")
  return run


def summarize(run):
  curve = [c for c in run["curve"] if c["minutes"] <= _MINUTES.value]
  last = curve[-1] if curve else {}
  return {"generations": last.get("generation"), "env_steps": last.get("env_steps"),
          "last_mean": last.get("mean"), "last_centre": last.get("centre"),
          "best_mean": max((c["mean"] for c in curve if c["mean"] is not None),
                           default=None)}


def print_table(results):
  print(f"\n{_ENV.value}: {_MINUTES.value:g} min per run, {_CPUS.value} CPUs")
  print(f"{'library':<10}{'seed':>5}{'gens':>6}{'env steps':>12}{'pop mean':>10}"
        f"{'centre (log)':>13}{'final centre':>14}")
  for r in results:
    s = r["summary"]
    print(f"{r['library']:<10}{r['seed']:>5}{_fmt(s['generations'], 'd'):>6}"
          f"{_fmt(s['env_steps'], 'd'):>12}{_fmt(s['last_mean'], '10.1f'):>10}"
          f"{_fmt(s['last_centre'], '13.1f'):>13}"
          f"{_fmt(r.get('final_centre_mean'), '14.1f'):>14}")
  for r in results:
    if r.get("error"):
      lines = [l for l in r["error"].splitlines()[1:] if l.strip()]
      cause = next((l for l in lines if "error" in l.lower()), lines[-1] if lines else "")
      print(f"{r['library']} seed {r['seed']}: {r['error'].splitlines()[0]} {cause[:200]}")
  for lib in _LIBRARIES.value:
    finals = [r["final_centre_mean"] for r in results
              if r["library"] == lib and r.get("final_centre_mean") is not None]
    if finals:
      print(f"{lib}: final centre, mean over {len(finals)} seeds: {statistics.fmean(finals):.1f}")


def chart(record, path):
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
  seeds = sorted({r["seed"] for r in record["runs"]})
  styles = ("-", "--", ":", "-.")
  for r in record["runs"]:
    colour = charts.OURS if r["library"] == "tfrl" else charts.PEER
    label = f"{r['library']} seed {r['seed']}"
    curve = [c for c in r["curve"] if c["mean"] is not None]
    for ax, x in zip(axes, ("minutes", "env_steps")):
      ax.plot([c[x] for c in curve], [c["mean"] for c in curve], color=colour, label=label,
              lw=1.2, ls=styles[seeds.index(r["seed"]) % len(styles)])
  axes[0].set_xlabel("minutes (wall clock, from process start)")
  axes[1].set_xlabel("environment steps")
  for ax in axes:
    ax.set_ylabel("population mean return")
    ax.legend(fontsize=7)
  names = {"tfrl": "tfrl ES", "evotorch": "EvoTorch PGPE"}
  ran = [names[lib] for lib in names if any(r["library"] == lib for r in record["runs"])]
  fig.suptitle(f"{record['env']}: {' vs '.join(ran)}, {record['cpus']} CPUs\n"
               f"{machines(record)}", fontsize=10)
  fig.tight_layout()
  fig.savefig(path)
  plt.close(fig)


def machines(record):
  """Each sitting's machine and the seeds it ran (appended seeds may run elsewhere)."""
  seeds_by_machine = {}
  for r in record["runs"]:
    # Without the date: it differs by sitting, not by machine.
    cpu = charts.machine({"provenance": r.get("provenance", record["provenance"])}, date=False)
    seeds_by_machine.setdefault(cpu, set()).add(r["seed"])
  return "; ".join(f"seed{'s' if len(s) > 1 else ''} {', '.join(map(str, sorted(s)))}: {m}"
                   for m, s in seeds_by_machine.items())


def appended_to():
  """The --output record that --append adds to, checked against this sitting's."""
  earlier = provenance.earlier_record(
      _OUTPUT.value, {"env": _ENV.value, "minutes": _MINUTES.value, "cpus": _CPUS.value})
  done = {(r["library"], r["seed"]) for r in earlier.get("runs", [])}
  again = sorted(f"{lib} seed {s}" for s in (int(s) for s in _SEEDS.value)
                 for lib in _LIBRARIES.value if (lib, s) in done)
  if again:
    raise app.UsageError(f"--append: {_OUTPUT.value} already has {', '.join(again)}")
  return earlier


def main(argv):
  del argv
  if _CPUS.value < 1 or _MINUTES.value <= 0 or not _SEEDS.value:
    raise app.UsageError("--cpus must be >= 1, --minutes > 0 and --seeds not empty.")
  unknown = set(_LIBRARIES.value) - {"tfrl", "evotorch"}
  if unknown:
    raise app.UsageError(f"--libraries takes tfrl and/or evotorch, got {sorted(unknown)}")
  if "evotorch" in _LIBRARIES.value and not os.path.exists(
      os.path.join(_EVOTORCH_VENV.value, "bin", "python")):
    raise app.UsageError(f"no python in --evotorch_venv={_EVOTORCH_VENV.value}")
  workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="tfrl_race_mujoco_")
  earlier = appended_to() if _APPEND.value else None
  record = {"provenance": provenance.provenance(), "env": _ENV.value,
            "minutes": _MINUTES.value, "cpus": _CPUS.value, "workdir": workdir,
            "tfrl_command": _TFRL_COMMAND.value, "tfrl_eval_command": TFRL_EVAL_COMMAND,
            "evotorch": {"venv": _EVOTORCH_VENV.value, "driver": "benchmarks/peers/"
                         "evotorch_pgpe.py", "extra_args": _EVOTORCH_ARGS.value,
                         "versions": runs.venv_versions(_EVOTORCH_VENV.value,
                                                        EVOTORCH_PACKAGES)},
            "load_average_start": os.getloadavg(), "runs": []}
  sitting = record["provenance"]
  for seed in (int(s) for s in _SEEDS.value):
    for lib in _LIBRARIES.value:
      result = (run_tfrl if lib == "tfrl" else run_evotorch)(workdir, seed)
      result["summary"] = summarize(result)
      result["provenance"] = sitting
      record["runs"].append(result)
  record["load_average_end"] = os.getloadavg()
  if earlier is not None:
    provenance.add_sitting(earlier, sitting)
    earlier["runs"].extend(record["runs"])
    record = earlier
  print_table(record["runs"])
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(record, f, indent=1)
  path = _CHART.value or os.path.splitext(_OUTPUT.value)[0] + ".png"
  chart(record, path)
  print(f"JSON: {_OUTPUT.value}  chart: {path}  (runs in {workdir})")


if __name__ == "__main__":
  app.run(main)
