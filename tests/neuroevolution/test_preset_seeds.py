"""benchmarks/preset_seeds.py on a tiny GA: each seed's run, its curve, its
elite played under both protocols (as the evaluation reports say), the chart,
and --append's refusals."""

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TINY = ("population=4,truncation=2,elite_candidates=1,elite_episodes=1,num_envs=4,"
         "slot_groups=1,max_episode_frames=400")
# Seconds all the test's commands share: they end (a late one killed with its
# process group) before the test's own timeout, which leaves _CLEANUP seconds
# for the temporary folder's removal.
_BUDGET = 600.0  # the test takes ~80 s alone on a 2-core VM
_CLEANUP = 60.0


def _command(args, deadline):
  """`python ARGS` from the repository root, in a process group of its own,
  until `deadline` (time.monotonic()): its CompletedProcess. Whatever of the
  group is left when it ends, or at the deadline, is killed."""
  proc = subprocess.Popen([sys.executable, *args], cwd=_ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)
  try:
    stdout, stderr = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
    raise AssertionError(f"{args} (or a process holding its output) still ran at the "
                         f"test's deadline (its commands share {_BUDGET:g} s); its stderr "
                         f"ends:\n{stderr[-3000:]}") from None
  finally:
    with contextlib.suppress(ProcessLookupError, PermissionError):
      os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


class PresetSeedsTest(absltest.TestCase):

  @pytest.mark.timeout(_BUDGET + _CLEANUP)
  def test_runs_a_seed_evaluates_both_protocols_and_refuses_a_second_time(self):
    deadline = time.monotonic() + _BUDGET

    def _run(*args):
      return _command(["benchmarks/preset_seeds.py", *args], deadline)

    with tempfile.TemporaryDirectory() as tmp:
      output = os.path.join(tmp, "seeds.json")
      args = ["--preset=ga_frostbite_small", "--max_frames=5000", "--episodes=1",
              f"--preset_flags={_TINY}", f"--workdir={tmp}", f"--output={output}"]
      done = _run(*args, "--seeds=0")
      self.assertEqual(done.returncode, 0, done.stderr[-3000:])
      with open(output) as f:
        record = json.load(f)
      (run,) = record["runs"]
      self.assertGreaterEqual(run["frames"], 5000)
      self.assertEqual([p["generation"] for p in run["curve"]],
                       list(range(1, len(run["curve"]) + 1)))
      # Each protocol's report says the protocol it played.
      for protocol, sticky, noops in (("noop", 0.0, 30), ("sticky", 0.25, 0)):
        self.assertLen(run["eval"][protocol]["scores"], 1)
        with open(os.path.join(run["logdir"], f"eval_{protocol}.json")) as f:
          played = json.load(f)["protocol"]
        self.assertEqual(played["repeat_action_probability"], sticky)
        self.assertEqual(played["noop_max"], noops)
        self.assertEqual(played["max_episode_frames"], 108000)
      self.assertFalse(run["resumed"])
      minutes = [p["minutes"] for p in run["curve"]]
      self.assertEqual(minutes, sorted(minutes))
      self.assertEqual(record["chart_seeds"], [0])
      self.assertTrue(os.path.getsize(os.path.join(tmp, "seeds.png")) > 0)
      # The chart is drawn from the curve the JSON records, through a CSV.
      with open(os.path.join(tmp, "ga_frostbite_small_s0_curve.csv")) as f:
        rows = list(csv.reader(f))
      self.assertEqual(rows[0], ["step", "seconds", "ga/frames", "ga/elite", "ga/best", "ga/mean"])
      self.assertEqual([(int(r[0]), int(r[2]), float(r[3])) for r in rows[1:]],
                       [(p["generation"], p["frames"], p["elite"]) for p in run["curve"]])
      # So --redraw draws it again with the run's folder gone.
      shutil.rmtree(run["logdir"])
      os.remove(os.path.join(tmp, "seeds.png"))
      redrawn = _run(f"--output={output}", f"--workdir={tmp}", "--redraw")
      self.assertEqual(redrawn.returncode, 0, redrawn.stderr[-3000:])
      self.assertIn("(seeds [0])", redrawn.stdout)
      missing = _run(f"--output={os.path.join(tmp, 'none.json')}", "--redraw")
      self.assertNotEqual(missing.returncode, 0)
      self.assertIn("--redraw: no --output=", missing.stderr)
      self.assertTrue(os.path.getsize(os.path.join(tmp, "seeds.png")) > 0)
      self.assertEqual(record["summary"]["final_elite_sticky"]["seeds"], 1)

      again = _run(*args, "--seeds=0", "--append")
      self.assertNotEqual(again.returncode, 0)
      self.assertIn("already has seeds [0]", again.stderr)
      other = _run(*[a for a in args if not a.startswith("--max_frames")],
                   "--max_frames=8000", "--seeds=1", "--append")
      self.assertNotEqual(other.returncode, 0)
      self.assertIn("this sitting", other.stderr)

      # A seed stopped short in an earlier sitting is resumed, to the same curve.
      resumed_dir = os.path.join(tmp, "resumed")
      partial = _command(
          ["-m", "tfrl.ga", "--preset=ga_frostbite_small", "--seed=0", "--max_frames=1",
           *[f"--{f}" for f in _TINY.split(",")],
           f"--logdir={os.path.join(resumed_dir, 'ga_frostbite_small_s0')}"], deadline)
      self.assertEqual(partial.returncode, 0, partial.stderr[-3000:])
      resumed_output = os.path.join(tmp, "resumed.json")
      done = _run(*[a for a in args if not a.startswith(("--workdir", "--output"))],
                  "--seeds=0", f"--workdir={resumed_dir}", f"--output={resumed_output}")
      self.assertEqual(done.returncode, 0, done.stderr[-3000:])
      with open(resumed_output) as f:
        (resumed,) = json.load(f)["runs"]
      self.assertTrue(resumed["resumed"])
      self.assertNotIn("error", resumed)
      self.assertIn("--resume", resumed["command"])
      with open(os.path.join(resumed_dir, "ga_frostbite_small_s0.out")) as f:
        self.assertIn("resumed from", f.read())
      self.assertGreater(len(run["curve"]), 1)  # so that the resume played generations
      fields = ("generation", "best", "mean", "elite", "frames")
      self.assertEqual([[p[k] for k in fields] for p in resumed["curve"]],
                       [[p[k] for k in fields] for p in run["curve"]])


if __name__ == "__main__":
  absltest.main()
