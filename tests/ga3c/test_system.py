"""Whole GA3C runs: SavedModel export, resume, checkpoint safety, CLI (a kill and
resume: tests/test_kill_resume.py; signals: tests/test_signals.py)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

from tfrl import resume
from tfrl import run_loop
from tfrl.envs import EnvProtocol
from tfrl.ga3c import GA3CConfig, LearnerConfig
from tfrl.ga3c import system as system_lib
from tfrl.layers import LayerPlan, LayerSpec, layers_of

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, _REPO)

from tests.ga3c import runs  # pylint: disable=g-import-not-at-top

_LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
policy = tf.saved_model.load(sys.argv[1])
out = policy.signatures["serving_default"](obs=tf.constant(np.load(sys.argv[2])))
assert "tfrl" not in sys.modules
print(json.dumps({k: np.asarray(v).tolist() for k, v in out.items()}))
"""


def _cartpole_config(logdir, **kwargs):
  defaults = dict(protocol=EnvProtocol(env="CartPole-v1"), agents=2, max_agents=2,
                  logdir=logdir, checkpoint_every=0, stats_every=100,
                  learner=LearnerConfig(loss_reduction="mean"), learning_rate=1e-3,
                  rmsprop_epsilon=1e-5)
  defaults.update(kwargs)
  return GA3CConfig(**defaults)


def _restored(config):
  """A GA3C of `config` with its checkpoint restored as a resumed run would
  (the skeleton's phases, without training)."""
  job = system_lib.build(config)
  with run_loop.Run(job) as phases:
    system = job.make()
    try:
      phases.restore(system)
    finally:
      system.close()
  return system, phases.restored_from


def _env(pythonpath=True):
  env = dict(os.environ)
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  if pythonpath:
    env["PYTHONPATH"] = _REPO
  else:
    env.pop("PYTHONPATH", None)
  return env


class ExportTest(tf.test.TestCase):
  test_session = None

  def test_export_matches_live_network_and_resume_restores(self):
    logdir = self.get_temp_dir()
    first, summary = runs.run(_cartpole_config(logdir, max_frames=1000))
    # The SavedModel loads in a process that never imports tfrl and gives
    # the live network's outputs.
    export_dir = os.path.join(logdir, "saved_model")
    self.assertTrue(os.path.isfile(os.path.join(export_dir, "saved_model.pb")))
    obs = np.random.RandomState(0).randn(7, 4).astype(np.float32)
    np.save(os.path.join(logdir, "obs.npy"), obs)
    result = subprocess.run(
        [sys.executable, "-c", _LOADER, export_dir,
         os.path.join(logdir, "obs.npy")],
        capture_output=True, text=True, env=_env(pythonpath=False),
        cwd=logdir, timeout=120, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    logits, value = first.network(obs)
    self.assertAllClose(loaded["probs"], tf.nn.softmax(logits), atol=1e-5)
    self.assertAllClose(loaded["value"], value, atol=1e-5)
    self.assertAllEqual(loaded["action"], np.argmax(logits, axis=1))
    # Resume in process: weights and counters come back, counting continues.
    restored, restored_from = _restored(_cartpole_config(logdir, max_frames=2000,
                                                         resume=True))
    self.assertEqual(restored_from, summary["checkpoint"])
    self.assertEqual(restored.frames, summary["frames"])
    # The rolling score's episodes come back too (--target_score goes on from them).
    self.assertNotEmpty(first.stats.scores)
    self.assertAllEqual(restored.stats.saved_scores.numpy(), list(first.stats.scores))
    restored.stats.restore_scores()
    self.assertEqual(restored.stats.rolling_score, first.stats.rolling_score)
    for a, b in zip(first.network.trainable_variables,
                    restored.network.trainable_variables):
      self.assertAllClose(a, b)
    summary2 = run_loop.run(system_lib.build(_cartpole_config(logdir, max_frames=2000,
                                                             resume=True)))
    self.assertGreaterEqual(summary2["frames"], 2000)
    self.assertGreaterEqual(summary2["episodes"], summary["episodes"])
    self.assertGreater(summary2["train_steps"], summary["train_steps"])


class LayerVariantTest(tf.test.TestCase):
  test_session = None

  def test_layer_plan_swaps_dense_layers_and_exports(self):
    # Pruned layers also exercise tfrl.layers.after_update in the trainer.
    kind = "pruned"
    logdir = self.get_temp_dir()
    plan = LayerPlan(default=LayerSpec(kind=kind, block_size=4,
                                       target_sparsity=0.5, schedule="constant"))
    system, summary = runs.run(_cartpole_config(logdir, max_frames=400, layer_plan=plan,
                                                hidden_sizes=(16, 16)))
    self.assertTrue(any(kind in type(l).__name__.lower()
                        for l in layers_of(system.network)))
    self.assertGreater(summary["train_steps"], 0)
    loaded = tf.saved_model.load(os.path.join(logdir, "saved_model"))
    obs = np.ones([3, 4], np.float32)
    logits, _ = system.network(obs)
    self.assertAllClose(loaded(obs)["probs"], tf.nn.softmax(logits), atol=1e-5)


  def test_gst_controller_prunes_reward_aware_layers_and_resumes(self):
    # GST on a 4 -> 32 -> 32 -> heads MLP: the 32x32 layer is dual-mode, the
    # input layer and the heads are pruned to the controller's sparsity, which
    # it raises while CartPole's score holds up (every score does at first), to
    # 0.6: below the 32x32 layer's circulant ratio (0.875), so it stays circulant.
    from tfrl.layers import RewardAwareConfig, gst  # pylint: disable=import-outside-toplevel
    from tfrl.layers.dual_mode import DualModeDense  # pylint: disable=import-outside-toplevel
    logdir = self.get_temp_dir()
    plan = LayerPlan(default=LayerSpec(kind="gst", block_size=8, gst_min_dim=32,
                                       target_sparsity=0.9, begin_step=0, end_step=10**6,
                                       frequency=5))
    reward_aware = RewardAwareConfig(window=1, tolerance=1.0, backoff=1.0, step_up=0.3,
                                     max_sparsity=0.6, reward_scale=1000.0)
    config = _cartpole_config(logdir, max_frames=3000, layer_plan=plan, hidden_sizes=(32, 32),
                              reward_aware=reward_aware)
    system, summary = runs.run(config)
    governed = gst.reward_aware_layers(system.network)
    self.assertLen(governed, 4)   # input layer, the dual-mode layer, policy and value heads.
    self.assertGreater(summary["train_steps"], 20)
    self.assertAllClose(float(system.controller.sparsity), 0.6)
    for layer in governed:
      self.assertAllClose(float(layer.sparsity_target), 0.6)
      if isinstance(layer, DualModeDense):
        self.assertTrue(bool(layer.circulant_mode.numpy()))
        self.assertAllClose(float(layer.kernel_stats()[1]), 32 * 32 / 8)
      else:
        self.assertAllClose(float(layer.sparsity()), 0.6, atol=0.05)
    # The controller is part of the checkpoint.
    again, _ = _restored(dataclasses.replace(config, resume=True))
    self.assertAllClose(float(again.controller.sparsity), 0.6)
    self.assertEqual(int(again.controller.num_returns), int(system.controller.num_returns))


class CheckpointSafetyTest(tf.test.TestCase):
  """A resume refuses another run's checkpoint, naming what differs, and reports
  an unreadable one in one line; nothing is changed on disk. (A fresh run over a
  checkpoint, and a resume without one: the skeleton's, tests/test_run_loop.py.)"""
  test_session = None

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.source = tempfile.mkdtemp()
    run_loop.run(system_lib.build(_cartpole_config(cls.source, max_frames=200)))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.source, ignore_errors=True)
    super().tearDownClass()

  def _copy(self, name):
    logdir = os.path.join(self.get_temp_dir(), name)
    shutil.copytree(self.source, logdir)
    ckpt_dir = os.path.join(logdir, "checkpoints")
    return logdir, ckpt_dir, tf.train.latest_checkpoint(ckpt_dir)

  def _refused(self, logdir, error=ValueError, **kwargs):
    files = {}
    for d, _, names in os.walk(logdir):
      for n in names:
        with open(os.path.join(d, n), "rb") as f:
          files[os.path.join(d, n)] = f.read()
    with self.assertRaises(error) as cm:
      run_loop.run(system_lib.build(_cartpole_config(logdir, resume=True, **kwargs)))
    message = str(cm.exception)
    self.assertNotIn("\n", message)
    after = {}
    for d, _, names in os.walk(logdir):
      for n in names:
        with open(os.path.join(d, n), "rb") as f:
          after[os.path.join(d, n)] = f.read()
    self.assertEqual(sorted(after), sorted(files))
    self.assertTrue(all(after[k] == files[k] for k in files), "a file changed")
    return message

  def test_resume_refuses_each_mismatch(self):
    logdir, ckpt_dir, _ = self._copy("mismatch")
    message = self._refused(logdir, hidden_sizes=(16, 16))
    self.assertStartsWith(message, f"cannot resume {ckpt_dir} (checkpoint != this run): ")
    self.assertIn("hidden sizes [64, 64] != [16, 16]", message)
    self.assertRegex(message, r"parameters \d+ != \d+$")
    message = self._refused(logdir, protocol=EnvProtocol(env="Acrobot-v1"))
    self.assertIn("env CartPole-v1 != Acrobot-v1; observation spec [None, 4] float32 != "
                  "[None, 6] float32; actions 2 != 3", message)
    # Another env protocol: the field that differs is named.
    message = self._refused(logdir,
                            protocol=EnvProtocol(env="CartPole-v1", max_episode_frames=100))
    self.assertEqual(message, f"cannot resume {ckpt_dir} (checkpoint != this run): "
                     "max episode frames (none) != 100")
    plan = LayerPlan(default=LayerSpec(kind="circulant", block_size=4))
    message = self._refused(logdir, layer_plan=plan)
    self.assertRegex(message, r"layers policy:Dense, .*torso/dense_0:Dense.* != "
                              r"policy:BlockCirculantDense\(b=4\), .*torso/dense_0:"
                              r"BlockCirculantDense\(b=4\)")

  def test_damaged_checkpoint_files_are_one_line(self):
    def truncate(path, size):
      with open(path, "rb") as f:
        data = f.read()
      with open(path, "wb") as f:
        f.write(data[:size])

    cases = {
        "state_truncated": (lambda d, c: truncate(os.path.join(d, "checkpoint"), 30),
                            "checkpoint", "not a checkpoint state, truncated?"),
        "state_empty": (lambda d, c: truncate(os.path.join(d, "checkpoint"), 0),
                        "checkpoint", "names no checkpoint"),
        "state_missing": (lambda d, c: os.remove(os.path.join(d, "checkpoint")),
                          "checkpoint", "missing, though ckpt-* files are there"),
        "index_truncated": (lambda d, c: truncate(c + ".index", 40), None, ""),
        "index_missing": (lambda d, c: os.remove(c + ".index"), ".index", "missing"),
        "data_truncated": (lambda d, c: truncate(c + ".data-00000-of-00001", 64), None, ""),
        "identity_truncated": (lambda d, c: truncate(os.path.join(d, "run.json"), 10),
                               "run.json", "not valid JSON, truncated?"),
    }
    for name, (damage, file, problem) in cases.items():
      with self.subTest(name):
        logdir, ckpt_dir, latest = self._copy(name)
        damage(ckpt_dir, latest)
        message = self._refused(logdir, error=resume.CorruptCheckpoint)
        if file is None:
          path = latest  # TF's own error, on the checkpoint's prefix
        elif file.startswith("."):
          path = latest + file
        else:
          path = os.path.join(ckpt_dir, file)
        self.assertStartsWith(message, f"cannot load the checkpoint {path}: {problem}")
        self.assertIn("(nothing was changed", message)


class CommandLineTest(tf.test.TestCase):
  test_session = None

  def test_helpfull_documents_flags_and_bad_flags_fail(self):
    result = subprocess.run(
        [sys.executable, "-m", "tfrl.ga3c", "--helpfull"], capture_output=True,
        text=True, env=_env(), cwd=_REPO, timeout=120, check=False)
    text = result.stdout + result.stderr
    for flag in ("game", "logdir", "max_frames", "seed", "agents", "predictors",
                 "trainers", "dynamic_adjustment", "prediction_batch_size",
                 "training_min_batch_size", "t_max", "learning_rate",
                 "entropy_beta", "log_epsilon", "checkpoint_every", "resume",
                 "profile_steps"):
      self.assertRegex(text, rf"--(\[no\])?{flag}:")
    result = subprocess.run(
        [sys.executable, "-m", "tfrl.ga3c", "--env=CartPole-v1",
         "--profile_steps=7", f"--logdir={self.get_temp_dir()}"],
        capture_output=True, text=True, env=_env(), cwd=_REPO, timeout=120,
        check=False)
    self.assertNotEqual(result.returncode, 0)
    self.assertIn("profile_steps", result.stderr)
    self.assertNotIn("Traceback", result.stderr)


if __name__ == "__main__":
  tf.test.main()
