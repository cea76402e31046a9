"""`python -m tfrl.td3`: flags -> run -> summary and flags file (export, resume and
its refusals: test_td3; signals: tests/test_signals.py)."""

import json
import os
import subprocess
import sys

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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

  def test_bfloat16_run_reports_its_matmuls_and_exports_a_loadable_policy(self):
    logdir = os.path.join(self.get_temp_dir(), "bf16")
    result = _run(["--env=Pendulum-v1", "--total_steps=200", "--start_steps=100",
                   "--hidden_sizes=16,16", "--batch_size=16", "--eval_episodes=1",
                   "--eval_every=0", "--update_every=50", f"--logdir={logdir}",
                   "--precision=bfloat16"])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with open(os.path.join(logdir, "summary.json")) as f:
      reported = json.load(f)["precision"]
    self.assertEqual((reported["precision"], reported["train_ran"]), ("bfloat16", "bfloat16"))
    for name in ("policy", "policy_compressed"):
      policy = tf.saved_model.load(os.path.join(logdir, name))
      action = policy(tf.zeros([2, 3]))["action"]
      self.assertEqual((action.dtype, action.shape), (tf.float32, (2, 1)))
      self.assertAllInRange(action, -2.0, 2.0)  # Pendulum's torque bounds

  def test_unknown_precision_is_one_line_before_a_run(self):
    logdir = os.path.join(self.get_temp_dir(), "bad")
    result = _run(["--env=Pendulum-v1", f"--logdir={logdir}", "--precision=bf16"])
    self.assertEqual(result.returncode, 2)
    self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
    self.assertIn("precision must be one of auto, float32, bfloat16, got 'bf16'", result.stderr)
    self.assertFalse(os.path.exists(os.path.join(logdir, "checkpoints")))


if __name__ == "__main__":
  tf.test.main()
