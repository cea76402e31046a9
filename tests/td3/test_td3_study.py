"""benchmarks/td3_study.py on short Pendulum runs: two seeds side by side, stopped
by Ctrl-C once both hold a checkpoint and resumed by a second sitting, each
run's figures and eval curve as its own summary.json and TensorBoard log say,
the spread over seeds, the chart, every sitting in the JSON, and a third
sitting that reads the finished runs instead of running them again, also
from its JSON alone (a new machine); SIGTERM
stopping a study as Ctrl-C does, and a sitting killed outright closed by the
next at the checkpoints its runs kept."""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_STEPS = 2400  # each run's total; evaluated at half and at the end
_SHORT = [f"--set=total_steps={_STEPS}", "--set=start_steps=200",
          f"--set=eval_every={_STEPS // 2}",
          "--set=eval_episodes=1", "--set=log_every=300", "--checkpoint_every=100"]
# A test's studies share one clock. One still running at its end gets a Ctrl-C,
# on which td3_study.py stops its runs (each by Ctrl-C, then SIGTERM and SIGKILL
# after 180 + 30 + 30 s at the most, one after the other), so no run outlives
# the test; the timeout mark leaves room for that stop.
_BUDGET_SECONDS = 900
_STOP_SECONDS = 540  # two runs' stops at the most, and the study's own exit
# benchmarks/td3_study.py ARGS, taking Ctrl-C as a terminal delivers it even
# where the suite was started in the background (with SIGINT ignored).
_STUDY = ("import runpy, signal, sys\n"
          "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
          "sys.argv = sys.argv[1:]\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.timeout(_BUDGET_SECONDS + _STOP_SECONDS + 60)
class TD3StudyTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.deadline = time.monotonic() + _BUDGET_SECONDS

  def _run(self, *args, interrupt_when=None, signal_to_send=signal.SIGINT):
    """benchmarks/td3_study.py with `args`, finished by the test's deadline; with
    `interrupt_when` (a callable), Ctrl-C (or `signal_to_send`) as soon as it
    returns True."""
    with subprocess.Popen([sys.executable, "-c", _STUDY, "benchmarks/td3_study.py", *args],
                          cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
      if interrupt_when is not None:
        while proc.poll() is None and time.monotonic() < self.deadline:
          if interrupt_when():
            proc.send_signal(signal_to_send)
            break
          time.sleep(0.1)
      try:
        out, err = proc.communicate(timeout=max(self.deadline - time.monotonic(), 1.0))
      except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
          out, err = proc.communicate(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
          proc.kill()
          out, err = proc.communicate()
        self.fail(f"td3_study.py {' '.join(args)} still ran at the test's deadline and was "
                  f"stopped; its stderr ends:\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

  def test_two_seeds_side_by_side_stopped_resumed_then_read_again(self):
    with tempfile.TemporaryDirectory() as tmp:
      output = os.path.join(tmp, "study.json")
      args = ["--presets=td3_pendulum", "--seeds=0,1", "--parallel=2", f"--workdir={tmp}",
              f"--output={output}", *_SHORT]

      def both_checkpointed():
        return all(glob.glob(os.path.join(tmp, f"td3_pendulum_s{seed}", "checkpoints",
                                          "ckpt-*.index")) for seed in (0, 1))

      # The first sitting stops (Ctrl-C) once both runs hold a checkpoint.
      stopped = self._run(*args, interrupt_when=both_checkpointed)
      self.assertEqual(stopped.returncode, 130, stopped.stderr[-3000:])
      self.assertIn("0 runs finished earlier; 2 to run", stopped.stdout)
      self.assertIn("Stopped by Ctrl-C", stopped.stdout)
      with open(output) as f:
        (first_sitting,) = json.load(f)["sittings"]
      reached = [r["to_step"] for r in first_sitting["runs"]]
      self.assertEqual([(r["seed"], r["from_step"], r["how"]) for r in first_sitting["runs"]],
                       [(0, 0, "sigint"), (1, 0, "sigint")])
      self.assertTrue(all(100 <= step < _STEPS for step in reached), reached)

      done = self._run(*args)
      self.assertEqual(done.returncode, 0, done.stderr[-3000:])
      self.assertIn("0 runs finished earlier; 2 to run", done.stdout)
      with open(output) as f:
        record = json.load(f)
      self.assertLen(record["runs"], 2)
      for run in record["runs"]:
        with open(os.path.join(run["logdir"], "summary.json")) as f:
          summary = json.load(f)
        self.assertTrue(run["completed"])
        self.assertEqual(run["env_steps"], _STEPS)
        self.assertEqual(run["eval_return"], summary["eval_return"])
        self.assertEqual(run["policy_compressed_bytes"], summary["policy_compressed_bytes"])
        # Evaluations at half the steps and at the end; the last is the summary's.
        self.assertEqual([p["step"] for p in run["curve"]], [_STEPS // 2, _STEPS])
        self.assertAlmostEqual(run["curve"][-1]["eval_return"], summary["eval_return"], places=3)
        self.assertIn("--resume", run["command"])
        self.assertIn(f"--total_steps={_STEPS}", run["flags"])
      seeds = record["summary"]["td3_pendulum"]
      self.assertEqual(seeds["seeds"], [0, 1])
      returns = [r["eval_return"] for r in record["runs"]]
      self.assertAlmostEqual(seeds["eval_return"]["mean"], sum(returns) / 2, places=3)
      self.assertEqual(seeds["eval_return"]["min"], min(returns))
      self.assertAlmostEqual(seeds["eval_pct_of_baseline"], 100.0)
      self.assertLen(record["chart_runs"], 2)
      self.assertGreater(os.path.getsize(os.path.join(tmp, "study.png")), 0)
      self.assertGreater(os.path.getsize(os.path.join(tmp, "study_tradeoff.png")), 0)
      # Each run's output went to its own file.
      with open(os.path.join(tmp, "td3_pendulum_s0.out")) as f:
        self.assertIn(f"step {_STEPS}", f.read())

      # --collect with a third seed: that run is listed, not started.
      collected = self._run(*[a for a in args if not a.startswith("--seeds")], "--seeds=0,1,2",
                            "--collect")
      self.assertEqual(collected.returncode, 0, collected.stderr[-3000:])
      self.assertIn("2 runs finished earlier; 1 not finished (--collect)", collected.stdout)
      self.assertFalse(os.path.exists(os.path.join(tmp, "td3_pendulum_s2")))
      with open(output) as f:
        record = json.load(f)
      self.assertEqual([r["completed"] for r in record["runs"]], [True, True, False])
      self.assertEqual(record["summary"]["td3_pendulum"]["seeds"], [0, 1])

      again = self._run(*args)
      self.assertEqual(again.returncode, 0, again.stderr[-3000:])
      self.assertIn("2 runs finished earlier; 0 to run", again.stdout)
      with open(output) as f:
        record = json.load(f)
      self.assertEqual([r["eval_return"] for r in record["runs"]], returns)
      # Every sitting is named (--collect runs nothing and adds none): the first
      # took both runs from 0 to their checkpoints, the second from there to
      # the end, the third found nothing to run.
      first_sitting, second_sitting, third_sitting = record["sittings"]
      self.assertEqual([r["to_step"] for r in first_sitting["runs"]], reached)
      self.assertEqual([(r["seed"], r["from_step"], r["to_step"], r["how"])
                        for r in second_sitting["runs"]],
                       [(0, reached[0], _STEPS, "exited"), (1, reached[1], _STEPS, "exited")])
      for sitting in (first_sitting, second_sitting):
        self.assertIn("cpu_model", sitting)
        self.assertIn("benchmarks/td3_study.py", sitting["command"])
      self.assertEqual(third_sitting["runs"], [])

      # A run an earlier sitting took on whose logdir is gone starts afresh, and
      # the study says so.
      record["sittings"][0]["runs"].append({"preset": "td3_pendulum", "seed": 2,
                                            "from_step": 0, "to_step": 300})
      gone = {"preset": "td3_pendulum", "seed": 2, "completed": False, "env_steps": 300,
              "curve": [{"step": 300, "eval_return": -1234.5}]}
      record["runs"].append(gone)
      lost_output = os.path.join(tmp, "lost.json")
      with open(lost_output, "w") as f:
        json.dump(record, f)
      lost = self._run(*[a for a in args if not a.startswith(("--seeds", "--output"))],
                       "--seeds=2", f"--output={lost_output}", "--collect")
      self.assertEqual(lost.returncode, 0, lost.stderr[-3000:])
      self.assertIn("td3_pendulum seed 2: an earlier sitting took it to step 300, but its "
                    "logdir is gone (another machine?); it starts afresh", lost.stdout)
      # ... and keeps what the JSON knew of it (its curve), once.
      with open(lost_output) as f:
        self.assertEqual(json.load(f)["lost_runs"], [gone])
      self.assertEqual(self._run(*[a for a in args if not a.startswith(("--seeds", "--output"))],
                                 "--seeds=2", f"--output={lost_output}", "--collect").returncode, 0)
      with open(lost_output) as f:
        self.assertEqual(json.load(f)["lost_runs"], [gone])

      # A new workdir with the first sitting's JSON as --earlier: its two
      # runs are carried over as recorded (curves and all), only seed 2 is left.
      moved = os.path.join(tmp, "moved")
      later = os.path.join(tmp, "later.json")
      carried = self._run("--presets=td3_pendulum", "--seeds=0,1,2", f"--workdir={moved}",
                          f"--output={later}", f"--earlier={output}", "--collect", *_SHORT)
      self.assertEqual(carried.returncode, 0, carried.stderr[-3000:])
      self.assertIn("2 runs carried over from earlier JSONs", carried.stdout)
      self.assertIn("2 runs finished earlier; 1 not finished (--collect)", carried.stdout)
      with open(later) as f:
        record = json.load(f)
      first, second, third = record["runs"]
      self.assertEqual([first["eval_return"], second["eval_return"]], returns)
      self.assertEqual(first["recorded_in"], output)
      self.assertIn("cpu_model", first)
      self.assertEqual(first["curve"][-1]["step"], _STEPS)
      self.assertFalse(third["completed"])
      self.assertEqual(record["summary"]["td3_pendulum"]["seeds"], [0, 1])
      self.assertLen(record["chart_runs"], 2)

      # The study's own JSON in a new workdir (the JSON kept, the machine
      # not): its finished runs are carried over as --earlier's are.
      own = os.path.join(tmp, "own.json")
      with open(output) as f, open(own, "w") as g:
        g.write(f.read())
      kept = self._run("--presets=td3_pendulum", "--seeds=0,1,2",
                       f"--workdir={os.path.join(tmp, 'new_machine')}", f"--output={own}",
                       "--collect", *_SHORT)
      self.assertEqual(kept.returncode, 0, kept.stderr[-3000:])
      self.assertIn("2 runs carried over from earlier JSONs", kept.stdout)
      self.assertIn("2 runs finished earlier; 1 not finished (--collect)", kept.stdout)
      with open(own) as f:
        record = json.load(f)
      self.assertEqual([r["eval_return"] for r in record["runs"][:2]], returns)
      self.assertEqual(record["runs"][0]["recorded_in"], own)
      self.assertLen(record["sittings"], 3)  # --collect adds none
      # A sitting given seed 2 alone keeps seeds 0-1's finished runs.
      alone = self._run("--presets=td3_pendulum", "--seeds=2",
                        f"--workdir={os.path.join(tmp, 'new_machine')}", f"--output={own}",
                        "--collect", *_SHORT)
      self.assertEqual(alone.returncode, 0, alone.stderr[-3000:])
      self.assertIn("0 runs finished earlier; 1 not finished (--collect)", alone.stdout)
      with open(own) as f:
        record = json.load(f)
      self.assertEqual([(r["seed"], r["completed"]) for r in record["runs"]],
                       [(2, False), (0, True), (1, True)])
      self.assertEqual(record["seeds"], [2, 0, 1])
      self.assertEqual(record["summary"]["td3_pendulum"]["seeds"], [0, 1])

      broken = os.path.join(tmp, "broken.json")
      with open(broken, "w") as f:
        f.write("{\"runs\": [")
      refused = self._run("--presets=td3_pendulum", "--seeds=0", f"--workdir={moved}",
                          f"--output={later}", f"--earlier={broken}", "--collect")
      self.assertNotEqual(refused.returncode, 0)
      self.assertIn(f"--earlier={broken} is not a readable study JSON", refused.stderr)

  def test_sigterm_stops_like_ctrl_c_and_a_killed_sitting_is_closed_by_the_next(self):
    with tempfile.TemporaryDirectory() as tmp:
      output = os.path.join(tmp, "study.json")
      run = os.path.join(tmp, "td3_pendulum_s0")
      args = ["--presets=td3_pendulum", "--seeds=0", "--parallel=1", f"--workdir={tmp}",
              f"--output={output}", *_SHORT]

      def sittings():
        try:
          with open(output) as f:
            return json.load(f)["sittings"]
        except (OSError, ValueError):
          return []

      def open_and_checkpointed():
        now = sittings()
        return (len(now) == 1 and now[0]["state"] == "open"
                and glob.glob(os.path.join(run, "checkpoints", "ckpt-*.index")))

      # SIGTERM (a machine's shutdown) once the JSON holds the open sitting.
      stopped = self._run(*args, interrupt_when=open_and_checkpointed,
                          signal_to_send=signal.SIGTERM)
      self.assertEqual(stopped.returncode, 143, stopped.stderr[-3000:])
      self.assertIn("Stopped by SIGTERM", stopped.stdout)
      (sitting,) = sittings()
      self.assertEqual(sitting["state"], "stopped by SIGTERM")
      self.assertEqual(sitting["runs"][0]["how"], "sigint")
      reached = sitting["runs"][0]["to_step"]
      self.assertTrue(100 <= reached < _STEPS, reached)

      # What a study killed outright leaves: its sitting open as written when
      # it started, and a run with checkpoints but no summary.json.
      with open(output) as f:
        record = json.load(f)
      record["sittings"][0].update(state="open")
      record["sittings"][0]["runs"][0].update(to_step=0, how=None)
      with open(output, "w") as f:
        json.dump(record, f)
      os.remove(os.path.join(run, "summary.json"))
      again = self._run(*args, interrupt_when=lambda: len(sittings()) == 2,
                        signal_to_send=signal.SIGTERM)
      self.assertEqual(again.returncode, 143, again.stderr[-3000:])
      killed, resumed = sittings()
      self.assertEqual(killed["state"], "killed")
      self.assertEqual((killed["runs"][0]["how"], killed["runs"][0]["to_step"]),
                       ("killed", reached))
      self.assertEqual(resumed["runs"][0]["from_step"], reached)

  def test_refuses_what_is_not_a_td3_preset(self):
    done = self._run("--presets=ga_pong", "--seeds=0")
    self.assertNotEqual(done.returncode, 0)
    self.assertIn("ga_pong not TD3 presets", done.stderr)


if __name__ == "__main__":
  absltest.main()
