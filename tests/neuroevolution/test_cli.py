"""End to end: the entry points on CartPole, --resume, and the elite SavedModel
played by `python -m tfrl.evaluate` and loaded by stock TensorFlow."""

import glob
import json
import os
import subprocess
import sys

import tensorflow as tf

from tfrl.neuroevolution import checkpoint

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_COMMON = ["--env=CartPole-v1", "--num_envs=8", "--hidden=8", "--noise_table_size=100000",
           "--episodes_per_eval=1"]


def _run(args, cwd=None, with_tfrl=True):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("PYTHONPATH", None)
  if with_tfrl:
    env["PYTHONPATH"] = _ROOT
  out = subprocess.run([sys.executable] + args, env=env, cwd=cwd or _ROOT,
                       capture_output=True, text=True, timeout=180)
  if out.returncode != 0:
    raise AssertionError(f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
  return out.stdout


class CliTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_ga_run_resume_export_and_evaluate(self):
    logdir = os.path.join(self.get_temp_dir(), "ga")
    out = _run(["-m", "tfrl.ga", *_COMMON, "--population=8", "--generations=2",
                "--truncation=3", "--mutation_power=0.1", "--elite_candidates=2",
                "--elite_episodes=2", f"--logdir={logdir}"])
    self.assertIn("[ga] gen    2", out)
    self.assertIn("op compiled", out)
    for name in ("checkpoint.json", "flags.txt", "elite/saved_model.pb", "summary.json"):
      self.assertTrue(os.path.exists(os.path.join(logdir, name)), name)
    with open(os.path.join(logdir, "summary.json")) as f:
      summary = json.load(f)
    self.assertEqual((summary["generation"], summary["stop_reason"]), (2, "generations"))
    self.assertEqual(summary["elite"], os.path.join(logdir, "elite"))
    self.assertTrue(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    out = _run(["-m", "tfrl.ga", f"--flagfile={logdir}/flags.txt", "--resume",
                "--generations=3", "--noexport"])
    self.assertIn("resumed", out)
    self.assertIn("[ga] gen    3", out)
    self.assertNotIn("[ga] gen    1 ", out)

    report = os.path.join(self.get_temp_dir(), "eval.json")
    out = _run(["-m", "tfrl.evaluate", f"--policy={logdir}/elite", "--env=CartPole-v1",
                "--episodes=3", f"--output={report}"])
    with open(report) as f:
      self.assertEqual(json.load(f)["episodes"], 3)

    # Stock TensorFlow, without tfrl importable, runs the elite.
    script = ("import sys, numpy as np, tensorflow as tf\n"
              "assert 'tfrl' not in sys.modules\n"
              f"p = tf.saved_model.load({os.path.join(logdir, 'elite')!r})\n"
              "out = p.signatures['serving_default'](obs=tf.zeros([2, 4]))\n"
              "print(sorted(out), out['action'].numpy().tolist())\n")
    out = _run(["-c", script], cwd=self.get_temp_dir(), with_tfrl=False)
    self.assertIn("['action', 'probs']", out)

  def test_es_and_random_search_entry_points(self):
    logdir = os.path.join(self.get_temp_dir(), "es")
    out = _run(["-m", "tfrl.es", *_COMMON, "--population=8", "--generations=1",
                "--center_episodes=1", f"--logdir={logdir}", "--noexport"])
    self.assertIn("[es] gen    1", out)
    self.assertTrue(os.path.exists(checkpoint.arrays_path(logdir)))
    logdir = os.path.join(self.get_temp_dir(), "rs")
    out = _run(["-m", "tfrl.random_search", *_COMMON, "--population=8", "--generations=1",
                "--elite_candidates=2", "--elite_episodes=1", f"--logdir={logdir}",
                "--dense_layer=circulant", "--circulant_block_size=4", "--noexport"])
    self.assertIn("[random_search] gen    1", out)
    self.assertIn("torso/dense_0:circulant", out)

  def test_ga_on_atari_exports_and_evaluates(self):
    # The small conv net, one tiny generation, its elite played by
    # tfrl.evaluate: played incrementally (the default for conv nets), and in
    # full with bfloat16 kernels and conv inputs (AMX tiles where the CPU has them).
    for name, extra, inference in (
        ("incremental", [], "incremental"),
        ("bf16", ["--weight_dtype=bfloat16", "--conv_input_dtype=bfloat16"], "full")):
      logdir = os.path.join(self.get_temp_dir(), "ga_atari_" + name)
      out = _run(["-m", "tfrl.ga", "--game=pong", "--arch=small", *extra, "--population=4",
                  "--generations=1", "--num_envs=4", "--slot_groups=1",
                  "--max_episode_frames=100", "--truncation=2", "--elite_candidates=2",
                  "--elite_episodes=1", "--noise_table_size=1000000", f"--logdir={logdir}"])
      self.assertIn("[ga] gen    1", out)
      self.assertIn(f"| {inference} inference", out)
      with open(os.path.join(logdir, "flags.txt")) as f:
        self.assertIn("--inference=auto", f.read())
      report = os.path.join(self.get_temp_dir(), f"eval_atari_{name}.json")
      _run(["-m", "tfrl.evaluate", f"--policy={logdir}/elite", "--game=pong", "--episodes=1",
            "--max_episode_frames=100", f"--output={report}"])
      with open(report) as f:
        self.assertEqual(json.load(f)["episodes"], 1)

  def test_bad_inference_flags_fail_in_one_line(self):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    for bad, message in (
        (["--inference=incremental", "--weight_dtype=bfloat16", "--conv_input_dtype=bfloat16"],
         "--inference=incremental needs --conv_input_dtype=float32"),
        (["--refresh_steps=0"], "--refresh_steps must be >= 1")):
      out = subprocess.run([sys.executable, "-m", "tfrl.ga", "--game=pong", "--arch=small",
                            "--population=4", "--generations=1", "--num_envs=2", *bad,
                            f"--logdir={os.path.join(self.get_temp_dir(), 'bad')}"],
                           env=env, cwd=_ROOT, capture_output=True, text=True, timeout=120)
      self.assertEqual(out.returncode, 2, out.stderr)
      lines = [l for l in out.stderr.splitlines() if l.startswith("tfrl.ga: error:")]
      self.assertLen(lines, 1, out.stderr)
      self.assertIn(message, lines[0])
      self.assertNotIn("Traceback", out.stderr)

  def test_conv_input_dtype_needs_bfloat16_weights(self):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    for prog in ("tfrl.ga", "tfrl.es"):
      out = subprocess.run([sys.executable, "-m", prog, "--env=CartPole-v1", "--population=4",
                            "--generations=1", "--conv_input_dtype=bfloat16",
                            f"--logdir={os.path.join(self.get_temp_dir(), prog)}"],
                           env=env, cwd=_ROOT, capture_output=True, text=True, timeout=120)
      self.assertEqual(out.returncode, 2, out.stderr)
      lines = [l for l in out.stderr.splitlines() if l.startswith(prog + ": error:")]
      self.assertLen(lines, 1, out.stderr)
      self.assertIn("requires weight_dtype='bfloat16'", lines[0])
      self.assertNotIn("Traceback", out.stderr)

  def test_bad_flags_fail_cleanly(self):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-m", "tfrl.es", "--env=CartPole-v1",
                          "--population=7", "--generations=1"],
                         env=env, cwd=_ROOT, capture_output=True, text=True, timeout=120)
    self.assertNotEqual(out.returncode, 0)
    self.assertIn("even", out.stderr + out.stdout)


_RS = ["-m", "tfrl.random_search", *_COMMON, "--population=8", "--elite_candidates=2",
       "--elite_episodes=1", "--noexport"]


def _run_status(args, timeout=180):
  env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable] + args, env=env, cwd=_ROOT, capture_output=True,
                        text=True, timeout=timeout)


def _error_line(test, out, prog):
  test.assertEqual(out.returncode, 2, out.stderr[-3000:])
  test.assertNotIn("Traceback", out.stderr)
  last = out.stderr.strip().splitlines()[-1]
  test.assertStartsWith(last, f"{prog}: error: ")
  test.assertLen([l for l in out.stderr.splitlines() if ": error: " in l], 1)
  return last


class RandomSearchTest(tf.test.TestCase):

  test_session = None

  def test_resume_continues_as_the_uninterrupted_run(self):
    whole = os.path.join(self.get_temp_dir(), "whole")
    _run([*_RS, "--generations=2", f"--logdir={whole}"])
    parts = os.path.join(self.get_temp_dir(), "parts")
    out = _run([*_RS, "--generations=1", "--resume", f"--logdir={parts}"])
    self.assertIn(f"[random_search] --resume: no checkpoint in {parts}; starting afresh.", out)
    out = _run([*_RS, "--generations=2", "--resume", f"--logdir={parts}"])
    self.assertIn("resumed from", out)
    self.assertIn("[random_search] gen    2", out)
    # Episodes are seeded by (seed, generation, ...): the same population, elite, frames.
    self.assertEqual(checkpoint.load(parts)[0], checkpoint.load(whole)[0])

  def test_bad_input_is_one_line(self):
    logdir = os.path.join(self.get_temp_dir(), "bad")
    for args, message in (
        (["--population=1"], "population must be >= 2"),
        (["--elite_candidates=0"], "elite_candidates must be in [1, population]"),
        (["--refresh_steps=0"], "--refresh_steps must be >= 1"),
        (["extra_argument"], "Unexpected arguments"),
    ):
      out = _run_status([*_RS, "--generations=1", f"--logdir={logdir}", *args])
      self.assertIn(message, _error_line(self, out, "tfrl.random_search"))

  def test_refuses_to_resume_another_runs_checkpoint(self):
    logdir = os.path.join(self.get_temp_dir(), "ga")
    _run(["-m", "tfrl.ga", *_COMMON, "--population=8", "--generations=1", "--truncation=2",
          "--elite_candidates=2", "--elite_episodes=1", "--noexport", f"--logdir={logdir}"])
    with open(os.path.join(logdir, "flags.txt")) as f:
      flags_before = f.read()
    out = _run_status(["-m", "tfrl.random_search", "--env=Acrobot-v1", "--num_envs=8",
                       "--hidden=16", "--noise_table_size=100000", "--population=16",
                       "--generations=2", "--resume", f"--logdir={logdir}"])
    line = _error_line(self, out, "tfrl.random_search")
    self.assertEqual(
        line, f"tfrl.random_search: error: cannot resume {logdir} (checkpoint != this run): "
        "algorithm ga != random_search; env CartPole-v1 != Acrobot-v1; network mlp D=58 "
        "(full 58) [torso/dense_0:dense,policy:dense] != mlp D=163 (full 163) "
        "[torso/dense_0:dense,policy:dense]; population 8 != 16; observation spec "
        "[None, 4] float32 != [None, 6] float32")
    with open(os.path.join(logdir, "flags.txt")) as f:
      self.assertEqual(f.read(), flags_before)  # the refused run's flags are not kept
    self.assertEqual(checkpoint.load(logdir)[0]["generation"], 1)
    # Nor a resume with another env protocol: the field is named.
    out = _run_status(["-m", "tfrl.ga", *_COMMON, "--population=8", "--generations=2",
                       "--truncation=2", "--elite_candidates=2", "--elite_episodes=1",
                       "--max_episode_frames=100", "--resume", f"--logdir={logdir}"])
    self.assertEqual(_error_line(self, out, "tfrl.ga"),
                     f"tfrl.ga: error: cannot resume {logdir} (checkpoint != this run): "
                     "max episode frames (none) != 100")


if __name__ == "__main__":
  tf.test.main()
