"""Short GA / ES / random-search runs replay exactly as they were recorded.

`data/recorded_runs_<build>.json` holds runs of the code at the commit it names: each
generation's best, mean and elite score and frames (as the console line
prints them), and the final checkpoint's genomes (GA, random search) or the
SHA-256 of ES's centre and of its observation normalizer. A run is a function
of its seed, so refactors and throughput work must leave these unchanged; a
change that is meant to alter results records them again (`python
tests/neuroevolution/test_recorded_runs.py --record`, from the repository
root) and says so in its commit.

Each recorded run's scores vary from generation to generation (a run whose
every episode hits the frame cap with one score would let an evaluation bug
through), and one of them is a normalized ES with a continuous head on
HalfCheetah-v5, played on the MuJoCo ops.

The population kernels are compiled for several ISAs (tfrl/ops/population.py)
whose sums round differently (tests/ops/test_isa.py), so a run's scores are a
function of its seed *and* of the kernels' build: replayed on the avx2 build,
the HalfCheetah run's normalizer and elite score differ from the avx512
recording. So there is one recording per build (RECORDED_ISAS: a CPU with
AVX-512 runs both, one with AVX2 only the avx2 build); each says which build
ran (`population_isa`, and per run the paths its kernels ran on), and the test
replays the widest recorded build this CPU runs (--kernel_isa, with the
TFRL_POPULATION_ISA override cleared), so the comparison is exact. `--record`
records every one of them this CPU runs; a CPU that runs none fails with a
message saying so: a replay on another build is not comparable (it may differ
with no regression, or hide one).

ES's centre is also updated by TensorFlow's own float32 sums (the weighted
noise), whose order follows the CPU it runs on: on a CPU model other than the
recording's (`cpu`: vendor, family, model) ES's centre may differ in its last
bits, so there the centre's hash is left out and everything else (every
generation's scores and frames, the genomes, the normalizer) must still match
exactly. Seen: es_frostbite_small recorded on Zen 5 replayed its scores
exactly on Zen 4, with another centre hash.

RUNS holds each run's arguments in today's flag names; the JSON keeps the
command as it was recorded.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from benchmarks import provenance  # pylint: disable=g-import-not-at-top

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# The builds recorded, widest first (every CPU the suite runs on has AVX2).
RECORDED_ISAS = ("avx512", "avx2")


def data_path(isa: str) -> str:
  return os.path.join(DATA_DIR, f"recorded_runs_{isa}.json")


def cpu_isas() -> list:
  """The population kernels' builds this CPU runs, widest first."""
  from tfrl.ops import population  # pylint: disable=g-import-not-at-top
  return list(population.kernel_info()["cpu_isas"])


RUNS = {
    "ga_frostbite_small": ("tfrl.ga", [
        "--flagfile=flags/ga_frostbite_small.flags", "--population=16", "--truncation=4",
        "--elite_candidates=3", "--elite_episodes=2", "--num_envs=16",
        "--max_episode_frames=2000", "--generations=3"]),
    "ga_frostbite_sticky": ("tfrl.ga", [
        "--game=frostbite", "--arch=small", "--population=8", "--truncation=3",
        "--elite_candidates=2", "--elite_episodes=2", "--num_envs=8",
        "--max_episode_frames=1500", "--repeat_action_probability=0.25",
        "--generations=2"]),
    "es_frostbite_small": ("tfrl.es", [
        "--game=frostbite", "--arch=small", "--population=8", "--sigma=0.1",
        "--center_episodes=1", "--num_envs=8", "--max_episode_frames=1500",
        "--generations=3"]),
    "es_halfcheetah_normalized": ("tfrl.es", [
        "--flagfile=flags/es_halfcheetah.flags", "--hidden=8", "--population=8",
        "--num_envs=4", "--max_episode_frames=100", "--center_episodes=1",
        "--obs_norm_fraction=0.5", "--generations=3"]),
    "random_search_frostbite": ("tfrl.random_search", [
        "--game=frostbite", "--arch=small", "--population=8", "--elite_candidates=2",
        "--elite_episodes=2", "--num_envs=8", "--max_episode_frames=1000",
        "--generations=2"]),
    "ga_cartpole": ("tfrl.ga", ["--flagfile=flags/ga_cartpole.flags", "--generations=3"]),
}
# Runs that must play on the MuJoCo ops (MujocoEnv), not gymnasium's envs.
ON_MUJOCO_OPS = ("es_halfcheetah_normalized",)

_LINE = re.compile(r"gen\s+(\d+) \| best\s+(\S+) \| mean\s+(\S+) \| elite\s+(\S+) \| "
                   r"frames\s+(\d+)")
_KERNELS = "recorded_runs kernels: "
# Runs the entry point, then prints which build the population kernels ran
# and on which paths they computed (tfrl.ops.population.kernel_info).
_WRAPPER = f"""
import json, runpy, sys
sys.argv = sys.argv[1:]
try:
  runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
  from tfrl.ops import population
  if population.loaded():
    info = population.kernel_info()
    print({_KERNELS!r} + json.dumps({{"isa": info["isa"], "paths": sorted(
        p for p, calls in info["calls"].items() if calls)}}), flush=True)
"""


def _sha256(arrays: dict, names) -> str:
  digest = hashlib.sha256()
  for name in sorted(names):
    value = np.ascontiguousarray(arrays[name])
    digest.update(f"{name} {value.dtype.str} {value.shape}".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def _checkpoint(logdir: str) -> dict:
  """What a recording holds of the final checkpoint."""
  with open(os.path.join(logdir, "checkpoint.json")) as f:
    state = json.load(f)
  result = {"elite_score": state.get("elite_score")}
  if "population" in state:   # GA and random search: seed chains
    result["population"] = state["population"]
    result["elite"] = state.get("elite")
  if state.get("arrays_file"):  # ES: its centre and its observation statistics
    with np.load(os.path.join(logdir, state["arrays_file"])) as arrays:
      result["theta_sha256"] = hashlib.sha256(
          np.ascontiguousarray(arrays["theta"], np.float32).tobytes()).hexdigest()
      normalizer = [k for k in arrays.files if k.startswith("obs_norm_")]
      if normalizer:
        result["normalizer_sha256"] = _sha256(arrays, normalizer)
  return result


def run(name: str, logdir: str, isa: str = "auto") -> dict:
  """Runs RUNS[name] into `logdir` on the population kernels' build `isa`;
  what a recording holds."""
  module, args = RUNS[name]
  command = [sys.executable, "-c", _WRAPPER, module, *args, f"--kernel_isa={isa}",
             f"--logdir={logdir}", "--noexport"]
  env = {k: v for k, v in os.environ.items() if not k.startswith("TFRL_")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  out = subprocess.run(command, cwd=_ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
  refused = [line for line in out.stderr.splitlines() if "error:" in line and isa in line]
  if out.returncode and refused:
    raise AssertionError(
        f"{name} was recorded on the population kernels' {isa} build, which this CPU "
        f"does not run ({refused[-1]}). Another build rounds sums differently, so its "
        "run is not comparable with the recording: record again on this machine "
        "(--record) instead of comparing.")
  if out.returncode:
    raise AssertionError(f"{module} {' '.join(args)} failed:\n{out.stderr[-3000:]}")
  if name in ON_MUJOCO_OPS and "(MujocoEnv)" not in out.stdout:
    raise AssertionError(f"{name} did not play on the MuJoCo ops:\n{out.stdout[:2000]}")
  [kernels] = [json.loads(line[len(_KERNELS):]) for line in out.stdout.splitlines()
               if line.startswith(_KERNELS)]
  generations = [{"generation": int(g), "best": b, "mean": m, "elite": e, "frames": int(f)}
                 for g, b, m, e, f in _LINE.findall(out.stdout)]
  return {"generations": generations, **_checkpoint(logdir), "kernel_paths": kernels["paths"],
          "kernel_isa": kernels["isa"]}


def this_cpu() -> dict:
  """Vendor, family and model of this CPU, from /proc/cpuinfo."""
  fields = provenance.cpu_fields()
  return {"vendor": fields.get("vendor_id"), "family": fields.get("cpu family"),
          "model": fields.get("model")}


def scores_vary(generations) -> bool:
  """Whether a run's scores carry information: its mean score changes from
  one generation to the next, and its population's scores differ (best != mean)."""
  means = [g["mean"] for g in generations]
  return (len(generations) > 1 and all(a != b for a, b in zip(means, means[1:])) and
          any(g["best"] != g["mean"] for g in generations))


class RecordedRunsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.recordings = {}
    for isa in RECORDED_ISAS:
      with open(data_path(isa)) as f:
        cls.recordings[isa] = json.load(f)
    runs_here = [isa for isa in RECORDED_ISAS if isa in cpu_isas()]
    cls.recorded = cls.recordings[runs_here[0]] if runs_here else None

  def test_every_run_is_recorded_on_every_build_and_informative(self):
    for isa, recording in self.recordings.items():
      self.assertEqual(recording["population_isa"], isa)
      self.assertEqual(sorted(recording["runs"]), sorted(RUNS))
      for name, recorded in recording["runs"].items():
        result = recorded["result"]
        self.assertTrue(scores_vary(result["generations"]),
                        f"{isa} {name}: its scores do not vary: {result['generations']}")
        # The population kernels ran, and on the recorded build only.
        builds = set(result["kernel_paths"]) & {"avx512", "avx2", "sse"}
        self.assertEqual(builds, {isa}, name)
      cheetah = recording["runs"]["es_halfcheetah_normalized"]["result"]
      self.assertIn("normalizer_sha256", cheetah)

  @parameterized.named_parameters((name, name) for name in RUNS)
  def test_replays_exactly(self, name):
    if self.recorded is None:
      self.fail(f"no recording of a build this CPU runs (recorded: {', '.join(RECORDED_ISAS)}; "
                f"this CPU runs: {', '.join(cpu_isas())}): record one (--record).")
    recorded = self.recorded["runs"][name]
    with tempfile.TemporaryDirectory() as logdir:
      now = run(name, os.path.join(logdir, "run"), isa=self.recorded["population_isa"])
    self.assertLen(now["generations"], len(recorded["result"]["generations"]))
    expected = dict(recorded["result"])
    if this_cpu() != self.recorded["cpu"]:  # TF's sums may round otherwise here
      now.pop("theta_sha256", None)
      expected.pop("theta_sha256", None)
    self.assertEqual(now, expected)


def record() -> None:
  """Runs every RUNS entry on each recorded build this CPU runs and writes its
  recording, with the commit it ran at."""
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                          text=True).stdout.strip()
  for isa in [isa for isa in RECORDED_ISAS if isa in cpu_isas()]:
    runs = {}
    for name, (module, args) in RUNS.items():
      with tempfile.TemporaryDirectory() as logdir:
        runs[name] = {"command": ["python", "-m", module, *args, f"--kernel_isa={isa}",
                                  "--noexport"],
                      "result": run(name, os.path.join(logdir, "run"), isa=isa)}
      print(isa, name, runs[name]["result"]["generations"], flush=True)
    os.makedirs(DATA_DIR, exist_ok=True)
    with open(data_path(isa), "w") as f:
      json.dump({"commit": commit, "population_isa": isa, "cpu": this_cpu(), "runs": runs},
                f, indent=1)
      f.write("\n")


if __name__ == "__main__":
  if "--record" in sys.argv:
    record()
  else:
    absltest.main()
