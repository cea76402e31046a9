"""`python -m tfrl.td3`: flags -> run -> summary and flags file (export: test_td3)."""

import json
import os
import signal
import subprocess
import sys

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)
from tests import processes  # pylint: disable=g-import-not-at-top


def _run(args):
  env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  return subprocess.run([sys.executable, "-m", "tfrl.td3"] + args, cwd=_REPO, env=env,
                        capture_output=True, text=True, timeout=600)


class TD3CliTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_cli_run_with_layer_flags(self):
    logdir = os.path.join(self.get_temp_dir(), "cli")
    result = _run(["--env=Pendulum-v1", "--total_steps=300", "--start_steps=100",
                   "--hidden_sizes=16,16", "--batch_size=16", "--eval_episodes=1",
                   "--eval_every=0", "--update_every=50", f"--logdir={logdir}",
                   "--dense_layer=pruned", "--pruning_schedule=nm", "--nm=1:4",
                   "--layer_plan=actor/out=dense", "--export=false"])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(summary["env_steps"], 300)
    with open(os.path.join(logdir, "summary.json")) as f:
      layers = json.load(f)["layers"]
    # 16 -> 16: one weight kept in every group of 4 (dense_0 has fan-in 3, padded).
    self.assertAllClose(layers["actor/dense_1"]["compression_ratio"], 0.75)
    self.assertEqual(layers["actor/out"]["compression_ratio"], 0.0)
    with open(os.path.join(logdir, "flags.txt")) as f:
      self.assertIn("--pruning_schedule=nm", f.read())

  def test_ctrl_c_writes_checkpoint_and_resume_finishes(self):
    logdir = os.path.join(self.get_temp_dir(), "interrupted")
    args = ["--env=Pendulum-v1", "--start_steps=100", "--hidden_sizes=16,16",
            "--batch_size=16", "--eval_episodes=1", "--eval_every=0", "--update_every=50",
            "--log_every=100", "--checkpoint_every=1000000", f"--logdir={logdir}",
            "--export=false"]
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with processes.cli(["-m", "tfrl.td3", "--total_steps=1000000"] + args, env) as proc:
      # Wait for training to be under way (a log line past the random steps).
      processes.wait_for_line(proc, "step 200:", timeout=300)
      out = processes.stop(proc, signal.SIGINT, timeout=300)
    self.assertEqual(proc.returncode, 0, out[-3000:])
    summary = json.loads(out.strip().splitlines()[-1])
    self.assertFalse(summary["completed"])
    stopped_at = summary["env_steps"]
    self.assertBetween(stopped_at, 200, 999_999)
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(logdir, "checkpoints", "ckpt-*")))
    resumed = _run(["--total_steps=%d" % (stopped_at + 100), "--resume"] + args)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    self.assertTrue(summary["completed"])
    self.assertEqual(summary["env_steps"], stopped_at + 100)

  def test_resume_without_its_replay_buffer_needs_the_flag(self):
    logdir = os.path.join(self.get_temp_dir(), "no_replay")
    args = ["--env=Pendulum-v1", "--start_steps=20", "--hidden_sizes=8", "--batch_size=4",
            "--eval_episodes=1", "--eval_every=0", "--update_every=20", "--log_every=60",
            "--checkpoint_every=60", f"--logdir={logdir}", "--export=false"]
    self.assertEqual(_run(["--total_steps=60"] + args).returncode, 0)
    replay = os.path.join(logdir, "checkpoints", "replay-60.npz")
    os.remove(replay)
    refused = _run(["--total_steps=80", "--resume"] + args)
    self.assertEqual(refused.returncode, 2, refused.stderr[-3000:])
    self.assertNotIn("Traceback", refused.stderr)
    self.assertEqual(refused.stderr.strip().splitlines()[-1],
                     f"tfrl.td3: error: cannot resume from {logdir}/checkpoints/ckpt-60: its "
                     f"replay buffer {replay} is missing; pass --resume_without_replay to "
                     "resume with an empty buffer.")
    resumed = _run(["--total_steps=80", "--resume", "--resume_without_replay"] + args)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn("with an empty replay buffer (--resume_without_replay)", resumed.stderr)
    self.assertEqual(json.loads(resumed.stdout.strip().splitlines()[-1])["env_steps"], 80)


if __name__ == "__main__":
  tf.test.main()
