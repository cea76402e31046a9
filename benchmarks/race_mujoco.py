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
  actors bound to 127.0.0.1, in each of --evotorch_configs: `mlp`, tfrl's
  network (the preset's 64x64 tanh MLP, tanh action head) and population (48,
  one episode each, the centre over 2 episodes a generation), and `linear`, its
  rl_clipup.py walker example (a linear policy, popsize 100 growing to 800).
  Its score per generation is `mean_eval`, the population's mean return, as
  PGPE's status reports it, and the centre's mean return over its 2 episodes;
  env steps are GymNE's `total_interaction_count` plus the centre's episodes.
  It stops by itself at the budget, dropping a generation that ends after it.

Env steps are counted the same way on both sides: the training episodes and
the centre's (the JSON's `env_steps_counted` says so; EvoTorch's curve also
has `training_env_steps` alone).

The same score for both: the population's mean return per generation (curves
against minutes and against env steps), and after the budget, outside it, the
final centre played for --final_episodes fresh episodes by each library's own
player (tfrl.evaluate on the exported policy; EvoTorch's `to_policy` with the
observation statistics frozen): the undiscounted return, no action noise.

The same CPUs: EvoTorch gets --cpus actors (default: all cores); with fewer
cores than the machine has, both runs are pinned to cores 0..cpus-1 (taskset).
Writes JSON with provenance (EvoTorch's command, versions and settings too)
and a chart.

A quiet machine: before every run the 1-minute load average must fall to
--max_load_per_core x cores within --settle_seconds (benchmarks/peers/quiet.py);
otherwise the race prints one line saying so, leaves what it has in
<workdir>/partial.json, reports nothing and exits 3. Each run records the load
average before and after it. --dry_run writes the record of what would run
(commands, versions, settings, load) and runs nothing.

--append adds runs to an existing --output of the same env, minutes and CPUs
(a (library, configuration, seed) already there is refused): a race of 3 seeds x 2 x 30
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
from benchmarks.peers import evotorch_pgpe  # pylint: disable=g-import-not-at-top
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from benchmarks.peers import race_cli  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TFRL_COMMAND = "-m tfrl.es --preset=es_halfcheetah"
TFRL_EVAL_COMMAND = "-m tfrl.evaluate"
EVOTORCH_DRIVER = os.path.join(ROOT, "benchmarks", "peers", "evotorch_pgpe.py")
EVOTORCH_PACKAGES = ("evotorch", "torch", "gymnasium", "mujoco", "ray", "numpy")
TFRL_NETWORK = ("tanh MLP 64x64 with a tanh action head (the preset's --hidden=64,64 "
                "--activation=tanh --action_head=tanh)")
ENV_STEPS_COUNTED = ("training and centre episodes on both sides: tfrl's es/frames (its "
                     "population's episodes + --center_episodes a generation); EvoTorch's "
                     "GymNE interactions + its centre's --center_episodes a generation")

_ENV = flags.DEFINE_string("env", "HalfCheetah-v5", "gymnasium env id for both libraries.")
_MINUTES = flags.DEFINE_float("minutes", 30.0, "Wall-clock minutes per run.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds; one run of each library each.")
_CPUS = flags.DEFINE_integer("cpus", os.cpu_count() or 1,
                             "CPUs for each run (EvoTorch's Ray actors).")
_TFRL_COMMAND = flags.DEFINE_string(
    "tfrl_command", TFRL_COMMAND, "tfrl's arguments after the python executable.")
_EVOTORCH_VENV = flags.DEFINE_string("evotorch_venv", "/work/peers/evotorch",
                                     "Virtualenv with evotorch and gymnasium[mujoco].")
_EVOTORCH_CONFIGS = flags.DEFINE_list(
    "evotorch_configs", ["mlp"], f"EvoTorch configurations, of "
    f"{sorted(evotorch_pgpe.CONFIGS)} (benchmarks/peers/evotorch_pgpe.py); one run each.")
_EVOTORCH_ARGS = flags.DEFINE_string(
    "evotorch_extra_args", "", "Appended to the EvoTorch driver (e.g. --popsize=200).")
_GATE = quiet.define_gate_flags()
_OUT = race_cli.define_output_flags(
    "race_mujoco", "commands, versions, settings, load",
    "Add the runs to an existing --output (same env, minutes and CPUs) instead of "
    "replacing it.")
_FINAL_EPISODES = flags.DEFINE_integer("final_episodes", 10,
                                       "Episodes of each final centre.")
_LIBRARIES = flags.DEFINE_list("libraries", ["tfrl", "evotorch"], "Which to run.")


def _pinned(cmd):
  if _CPUS.value >= (os.cpu_count() or 1):
    return cmd
  return ["taskset", "-c", f"0-{_CPUS.value - 1}", *cmd]


def tfrl_command(logdir, seed):
  return _pinned([sys.executable, *shlex.split(_TFRL_COMMAND.value), f"--env={_ENV.value}",
                  f"--seed={seed}", f"--logdir={logdir}"])


def evotorch_command(rundir, seed, config):
  python = os.path.join(_EVOTORCH_VENV.value, "bin", "python")
  return _pinned([python, EVOTORCH_DRIVER, f"--config={config}", f"--env={_ENV.value}",
                  f"--seconds={_MINUTES.value * 60:g}", f"--seed={seed}",
                  f"--num_actors={_CPUS.value}", f"--final_episodes={_FINAL_EPISODES.value}",
                  f"--log={rundir}/generations.jsonl", f"--result={rundir}/result.json",
                  *shlex.split(_EVOTORCH_ARGS.value)])


def run_tfrl(gate, workdir, seed):
  logdir = os.path.join(workdir, f"tfrl_s{seed}")
  cmd = tfrl_command(logdir, seed)
  load = quiet.before_run(f"tfrl seed {seed}", gate)
  print(f"  tfrl seed {seed}: {' '.join(cmd)}", flush=True)
  done = runs.run_for(cmd, _MINUTES.value * 60, logdir + ".out", cwd=ROOT)
  load.update(quiet.after_run(gate))
  by_step = {}
  for p in runs.scalars(logdir, ["es/mean", "es/elite", "es/frames"]):
    by_step.setdefault(p["step"], {"generation": p["step"],
                                   "minutes": (p["wall_time"] - done.start) / 60})
    by_step[p["step"]][p["tag"].split("/")[1]] = p["value"]
  curve = [{"generation": g["generation"], "minutes": g["minutes"],
            "env_steps": int(g.get("frames", 0)), "mean": g.get("mean"),
            "centre": g.get("elite")} for _, g in sorted(by_step.items())]
  run = check_finished({"library": "tfrl", "config": "preset", "seed": seed,
                        "command": " ".join(cmd), "stopped": done.how,
                        "returncode": done.returncode, "output": done.output, **load,
                        "curve": curve}, done)
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


def run_evotorch(gate, workdir, seed, config):
  rundir = os.path.join(workdir, f"evotorch_{config}_s{seed}")
  cmd = evotorch_command(rundir, seed, config)
  load = quiet.before_run(f"evotorch {config} seed {seed}", gate)
  os.makedirs(rundir, exist_ok=True)
  print(f"  evotorch {config} seed {seed}: {' '.join(cmd)}", flush=True)
  # Short: Ray's socket paths under it must fit the 107 bytes of a unix socket.
  ray_tmp = tempfile.mkdtemp(prefix="ray_", dir="/tmp")
  env = runs.peer_env({"RAY_TMPDIR": ray_tmp})
  try:  # its own budget ends the training; the allowance covers the final episodes
    done = runs.run_for(cmd, _MINUTES.value * 60 + 900, rundir + ".out", cwd=rundir,
                        env=env)
  finally:
    shutil.rmtree(ray_tmp, ignore_errors=True)
  load.update(quiet.after_run(gate))
  out = check_finished({"library": "evotorch", "config": config, "seed": seed,
                        "command": " ".join(cmd), "stopped": done.how,
                        "returncode": done.returncode, "output": done.output, **load,
                        "curve": evotorch_curve(rundir)}, done)
  try:
    with open(os.path.join(rundir, "result.json")) as f:
      result = json.load(f)
    out.update(final_centre_returns=result["final_center_returns"],
               final_centre_mean=result["final_center_mean"], versions=result["versions"],
               settings=result["args"], parameters=result.get("parameters"))
  except (OSError, ValueError, KeyError):
    out["final_centre_error"] = done.tail()
  return out


def evotorch_curve(rundir):
  curve = []
  try:
    with open(os.path.join(rundir, "generations.jsonl")) as f:
      for line in f:
        g = json.loads(line)
        curve.append({"generation": g["generation"], "minutes": g["seconds"] / 60,
                      "env_steps": g["env_steps"],
                      "training_env_steps": g.get("training_env_steps"),
                      "mean": g["mean_eval"], "centre": g.get("centre_eval"),
                      "median": g["median_eval"], "best": g["pop_best_eval"],
                      "popsize": g["popsize"]})
  except OSError:
    pass
  return curve


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


def side(run):
  """tfrl, or evotorch_<config> (runs from before the configurations: linear)."""
  if run["library"] == "tfrl":
    return "tfrl"
  return f"evotorch_{run.get('config', 'linear')}"


def print_table(results):
  print(f"\n{_ENV.value}: {_MINUTES.value:g} min per run, {_CPUS.value} CPUs")
  print(f"{'side':<16}{'seed':>5}{'gens':>6}{'env steps':>12}{'pop mean':>10}"
        f"{'centre (log)':>13}{'final centre':>14}")
  for r in results:
    s = r["summary"]
    print(f"{side(r):<16}{r['seed']:>5}{race_cli.fmt(s['generations'], 'd'):>6}"
          f"{race_cli.fmt(s['env_steps'], 'd'):>12}{race_cli.fmt(s['last_mean'], '10.1f'):>10}"
          f"{race_cli.fmt(s['last_centre'], '13.1f'):>13}"
          f"{race_cli.fmt(r.get('final_centre_mean'), '14.1f'):>14}")
  for r in results:
    if r.get("error"):
      lines = [l for l in r["error"].splitlines()[1:] if l.strip()]
      cause = next((l for l in lines if "error" in l.lower()), lines[-1] if lines else "")
      print(f"{side(r)} seed {r['seed']}: {r['error'].splitlines()[0]} {cause[:200]}")
  for name in sorted({side(r) for r in results}):
    finals = [r["final_centre_mean"] for r in results
              if side(r) == name and r.get("final_centre_mean") is not None]
    if finals:
      print(f"{name}: final centre, mean over {len(finals)} seeds: "
            f"{statistics.fmean(finals):.1f}")


def chart(record, path):
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
  seeds = sorted({r["seed"] for r in record["runs"]})
  styles = ("-", "--", ":", "-.")
  colours = {"tfrl": charts.OURS, "evotorch_mlp": charts.PEER, "evotorch_linear": "#999999"}
  for r in record["runs"]:
    colour = colours.get(side(r), charts.PEER)
    label = f"{side(r)} seed {r['seed']}"
    curve = [c for c in r["curve"] if c["mean"] is not None]
    for ax, x in zip(axes, ("minutes", "env_steps")):
      ax.plot([c[x] for c in curve], [c["mean"] for c in curve], color=colour, label=label,
              lw=1.2, ls=styles[seeds.index(r["seed"]) % len(styles)])
  axes[0].set_xlabel("minutes (wall clock, from process start)")
  axes[1].set_xlabel("environment steps")
  for ax in axes:
    ax.set_ylabel("population mean return")
    ax.legend(fontsize=7)
  names = {"tfrl": "tfrl ES", "evotorch_mlp": "EvoTorch PGPE (MLP)",
           "evotorch_linear": "EvoTorch PGPE (linear)"}
  ran = [names[n] for n in names if any(side(r) == n for r in record["runs"])]
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


def planned_sides():
  """The sides this sitting runs: tfrl and/or evotorch_<config> per --evotorch_configs."""
  out = ["tfrl"] if "tfrl" in _LIBRARIES.value else []
  if "evotorch" in _LIBRARIES.value:
    out += [f"evotorch_{c}" for c in _EVOTORCH_CONFIGS.value]
  return out


def appended_to():
  """The --output record that --append adds to, checked against this sitting's."""
  earlier = provenance.earlier_record(
      _OUT.output.value, {"env": _ENV.value, "minutes": _MINUTES.value, "cpus": _CPUS.value})
  done = {(side(r), r["seed"]) for r in earlier.get("runs", [])}
  again = sorted(f"{name} seed {s}" for s in (int(s) for s in _SEEDS.value)
                 for name in planned_sides() if (name, s) in done)
  if again:
    raise app.UsageError(f"--append: {_OUT.output.value} already has {', '.join(again)}")
  return earlier


def evotorch_settings():
  """Each configuration's settings as the driver resolves them (its parse_args)."""
  extra = shlex.split(_EVOTORCH_ARGS.value)
  return {c: {k: v for k, v in vars(evotorch_pgpe.parse_args(
      [f"--config={c}", "--log=-", "--result=-", *extra])).items()
              if k not in ("log", "result", "seed", "seconds", "env")}
          for c in _EVOTORCH_CONFIGS.value}


def check_flags():
  if _CPUS.value < 1 or _MINUTES.value <= 0 or not _SEEDS.value:
    raise app.UsageError("--cpus must be >= 1, --minutes > 0 and --seeds not empty.")
  unknown = set(_LIBRARIES.value) - {"tfrl", "evotorch"}
  if unknown:
    raise app.UsageError(f"--libraries takes tfrl and/or evotorch, got {sorted(unknown)}")
  configs = set(_EVOTORCH_CONFIGS.value) - set(evotorch_pgpe.CONFIGS)
  if configs or not _EVOTORCH_CONFIGS.value:
    raise app.UsageError(f"--evotorch_configs takes {sorted(evotorch_pgpe.CONFIGS)}, got "
                         f"{_EVOTORCH_CONFIGS.value}")
  if ("evotorch" in _LIBRARIES.value and not _OUT.dry_run.value and not os.path.exists(
      os.path.join(_EVOTORCH_VENV.value, "bin", "python"))):
    raise app.UsageError(f"no python in --evotorch_venv={_EVOTORCH_VENV.value} "
                         "(benchmarks/peers/setup_peers.sh evotorch makes it)")
  # The load average is the machine's: its limit counts all its cores.
  return race_cli.gate(_GATE)


def new_record(gate, workdir):
  python = os.path.join(_EVOTORCH_VENV.value, "bin", "python")
  return {"provenance": provenance.provenance(), "env": _ENV.value,
          "minutes": _MINUTES.value, "cpus": _CPUS.value, "workdir": workdir,
          "tfrl_command": _TFRL_COMMAND.value, "tfrl_eval_command": TFRL_EVAL_COMMAND,
          "tfrl_network": TFRL_NETWORK, "env_steps_counted": ENV_STEPS_COUNTED,
          "evotorch": {"venv": _EVOTORCH_VENV.value, "driver": "benchmarks/peers/"
                       "evotorch_pgpe.py", "extra_args": _EVOTORCH_ARGS.value,
                       "configs": evotorch_settings(),
                       "versions": (runs.venv_versions(_EVOTORCH_VENV.value,
                                                       EVOTORCH_PACKAGES)
                                    if os.path.exists(python) else None)},
          "commands": {name: " ".join(
              tfrl_command("LOGDIR", "SEED") if name == "tfrl" else
              evotorch_command("RUNDIR", "SEED", name.split("_", 1)[1]))
                       for name in planned_sides()},
          "quiet_gate": gate.settings(), "load_average_start": list(quiet.read_load(gate.path)),
          "runs": []}


def race(gate, record, workdir):
  """Every (seed, side) run (a refused one leaves what was done in
  <workdir>/partial.json)."""
  with race_cli.running(gate, record, workdir):
    for seed in (int(s) for s in _SEEDS.value):
      for name in planned_sides():
        result = (run_tfrl(gate, workdir, seed) if name == "tfrl" else
                  run_evotorch(gate, workdir, seed, name.split("_", 1)[1]))
        result["summary"] = summarize(result)
        result["provenance"] = record["provenance"]
        record["runs"].append(result)


def main(argv):
  started = race_cli.start(argv, _OUT, check_flags, new_record)
  if started is None:
    return
  gate, record, workdir = started
  earlier = appended_to() if _OUT.append.value else None
  race(gate, record, workdir)
  if earlier is not None:
    provenance.add_sitting(earlier, record["provenance"])
    earlier["runs"].extend(record["runs"])
    record = earlier
  print_table(record["runs"])
  runs.write_json(record, _OUT.output.value)
  path = _OUT.chart_path()
  chart(record, path)
  print(f"JSON: {_OUT.output.value}  chart: {path}  (runs in {workdir})")


if __name__ == "__main__":
  app.run(main)
