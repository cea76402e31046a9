"""Short GA / ES / random-search runs replay exactly as they were recorded.

`data/recorded_runs.json` holds runs of the code at the commit it names: each
generation's best, mean and elite score and frames (as the console line
prints them), and the final checkpoint's genomes (GA, random search) or the
SHA-256 of ES's centre. A run is a function of its seed, so refactors and
throughput work must leave these unchanged; a change that is meant to alter
results records them again (`python tests/neuroevolution/test_recorded_runs.py
--record`, from the repository root) and says so in its commit.

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
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "recorded_runs.json")

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
    "es_pong_small": ("tfrl.es", [
        "--flagfile=flags/es_pong.flags", "--arch=small", "--population=8",
        "--center_episodes=1", "--num_envs=8", "--max_episode_frames=1000",
        "--generations=2"]),
    "random_search_frostbite": ("tfrl.random_search", [
        "--game=frostbite", "--arch=small", "--population=8", "--elite_candidates=2",
        "--elite_episodes=2", "--num_envs=8", "--max_episode_frames=1000",
        "--generations=2"]),
    "ga_cartpole": ("tfrl.ga", ["--flagfile=flags/ga_cartpole.flags", "--generations=3"]),
}

_LINE = re.compile(r"gen\s+(\d+) \| best\s+(\S+) \| mean\s+(\S+) \| elite\s+(\S+) \| "
                   r"frames\s+(\d+)")


def run(name: str, logdir: str) -> dict:
  """Runs RUNS[name] into `logdir`; what a recording holds."""
  module, args = RUNS[name]
  command = [sys.executable, "-m", module, *args, f"--logdir={logdir}", "--noexport"]
  out = subprocess.run(command, cwd=_ROOT, capture_output=True, text=True, timeout=600)
  if out.returncode:
    raise AssertionError(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
  generations = [{"generation": int(g), "best": b, "mean": m, "elite": e, "frames": int(f)}
                 for g, b, m, e, f in _LINE.findall(out.stdout)]
  with open(os.path.join(logdir, "checkpoint.json")) as f:
    state = json.load(f)
  result = {"generations": generations, "elite_score": state.get("elite_score")}
  if "population" in state:   # GA and random search: seed chains
    result["population"] = state["population"]
    result["elite"] = state.get("elite")
  if state.get("arrays_file"):  # ES: its centre
    with np.load(os.path.join(logdir, state["arrays_file"])) as arrays:
      result["theta_sha256"] = hashlib.sha256(
          np.ascontiguousarray(arrays["theta"], np.float32).tobytes()).hexdigest()
  return result


class RecordedRunsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    with open(DATA) as f:
      cls.recorded = json.load(f)

  @parameterized.named_parameters((name, name) for name in RUNS)
  def test_replays_exactly(self, name):
    recorded = self.recorded["runs"][name]
    with tempfile.TemporaryDirectory() as logdir:
      now = run(name, os.path.join(logdir, "run"))
    self.assertLen(now["generations"], len(recorded["result"]["generations"]))
    self.assertEqual(now, recorded["result"])


def record() -> None:
  """Runs every RUNS entry and writes DATA with the commit it ran at."""
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                          text=True).stdout.strip()
  runs = {}
  for name, (module, args) in RUNS.items():
    with tempfile.TemporaryDirectory() as logdir:
      runs[name] = {"command": ["python", "-m", module, *args, "--noexport"],
                    "result": run(name, os.path.join(logdir, "run"))}
    print(name, runs[name]["result"]["generations"][-1], flush=True)
  os.makedirs(os.path.dirname(DATA), exist_ok=True)
  with open(DATA, "w") as f:
    json.dump({"commit": commit, "runs": runs}, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  if "--record" in sys.argv:
    record()
  else:
    absltest.main()
