"""TD3: learns Pendulum; GST run with resume and compressed export."""

import dataclasses
import json
import os
import shutil
import tempfile
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl import resume
from tfrl import run_loop
from tfrl import td3
from tfrl import tf_checkpoints
from tfrl.envs import EnvProtocol
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner

# The return TD3 must reach on Pendulum-v1 in the CI test (random: ~ -1200).
PENDULUM_TARGET = -400.0

_SMALL = dict(protocol=EnvProtocol(env="Pendulum-v1"), hidden_sizes=(64, 64), batch_size=128,
              actor_lr=1e-3, critic_lr=1e-3, eval_every=0, eval_episodes=3, log_every=1000)


def _train(config, plan=None, reward_config=None, **run):
  """A TD3 run of `config` with these layers and `td3.RunSettings(**run)`, as the
  entry point runs it (`td3.build`, then the run skeleton); its summary."""
  config = dataclasses.replace(config, layer_plan=plan, reward_aware=reward_config,
                               run=td3.RunSettings(**run))
  return run_loop.run(td3.build(config))


def _load_serving(path):
  return tf.saved_model.load(path).signatures["serving_default"]


class TD3Test(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_learns_pendulum(self):
    logdir = self.get_temp_dir() + "/dense"
    config = TD3Config(total_steps=7000, start_steps=1000, checkpoint_every=7000, **_SMALL)
    summary = _train(config, tl.LayerSpec(kind="dense"), logdir=logdir)
    self.assertGreater(summary["eval_return"], PENDULUM_TARGET)
    self.assertEqual(summary["env_steps"], 7000)
    self.assertEqual(summary["average_compression_ratio"], 0.0)
    with open(os.path.join(logdir, "summary.json")) as f:
      self.assertEqual(json.load(f)["env_steps"], 7000)
    serve = _load_serving(os.path.join(logdir, "policy"))
    action = serve(obs=tf.zeros([4, 3]))["action"]
    self.assertEqual(action.shape, (4, 1))
    self.assertTrue(np.all(np.abs(action.numpy()) <= 2.0))
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(logdir, "events.out.tfevents*")))

  def test_gst_resume_and_compressed_export(self):
    spec = tl.LayerSpec(kind="gst", gst_mode="fixed", block_size=8, gst_min_dim=32,
                        target_sparsity=0.8, frequency=100, begin_step=0, end_step=10_000)
    reward_config = tl.RewardAwareConfig(window=1, max_sparsity=0.8, step_up=0.2)
    common = dict(start_steps=200, update_every=50, checkpoint_every=200,
                  **dict(_SMALL, hidden_sizes=(32, 32), batch_size=32))
    logdir = self.get_temp_dir() + "/resumed"
    _train(TD3Config(total_steps=400, **common), spec, reward_config, logdir=logdir,
           export=False)
    resumed = _train(TD3Config(total_steps=600, **common), spec, reward_config, logdir=logdir,
                     resume=True)
    self.assertEqual(resumed["env_steps"], 600)
    # Phases of 50 updates at t = 200, 250, ..., 600 (5 before, 4 after resuming),
    # as in an uninterrupted 600-step run.
    self.assertEqual(resumed["training_iterations"], 450)
    # Hidden 32x32 layer is circulant (b=8) from step 0; the rest is
    # reward-aware pruned (window 1: sparsity rises by 0.2 per good update).
    self.assertIn("actor/dense_1", resumed["layers"])
    self.assertAllClose(resumed["layers"]["actor/dense_1"]["compression_ratio"], 0.875)
    self.assertGreater(resumed["layers"]["actor/dense_0"]["compression_ratio"], 0.0)
    self.assertGreater(resumed["average_compression_ratio"], 0.3)
    self.assertLess(resumed["policy_compressed_bytes"], resumed["policy_bytes"])
    obs = tf.random.normal([16, 3])
    live = _load_serving(os.path.join(logdir, "policy"))(obs=obs)["action"]
    packed = _load_serving(os.path.join(logdir, "policy_compressed"))(obs=obs)["action"]
    self.assertAllClose(live, packed, atol=1e-5)

  def test_dual_mode_gst_switches_after_a_resume_and_exports(self):
    # Hidden 32x32 layers block-circulant (b=8, ratio 0.875) until the controller's
    # target reaches 0.875: it raises by 0.45 at each decision (huge tolerance),
    # one per Pendulum episode (200 steps) from the first phase after it.
    spec = tl.LayerSpec(kind="gst", block_size=8, gst_min_dim=32, target_sparsity=0.9,
                        frequency=50, begin_step=0, end_step=10_000, switch_ramp_steps=100)
    reward_config = tl.RewardAwareConfig(window=1, max_sparsity=0.9, step_up=0.45,
                                         tolerance=1e6, backoff=1e6)
    common = dict(start_steps=200, update_every=50, checkpoint_every=300,
                  **dict(_SMALL, hidden_sizes=(32, 32), batch_size=32))
    logdir = self.get_temp_dir() + "/dual"
    first = _train(TD3Config(total_steps=300, **common), spec, reward_config, logdir=logdir,
                   export=False)
    # One decision so far (0.45): still circulant.
    self.assertAllClose(first["layers"]["actor/dense_1"]["compression_ratio"], 0.875)
    resumed = _train(TD3Config(total_steps=900, **common), spec, reward_config, logdir=logdir,
                     resume=True)
    self.assertEqual(resumed["env_steps"], 900)
    # After the resume the target passed 0.875 (0.9): every hidden layer switched and,
    # 100 updates of the ramp later, is pruned to it, as are the input and output layers.
    for name in ("actor/dense_1", "critic_1/dense_1", "critic_2/dense_1", "actor/dense_0",
                 "critic_1/out"):
      self.assertAllClose(resumed["layers"][name]["compression_ratio"], 0.9, atol=0.02,
                          msg=name)
    self.assertGreater(resumed["average_compression_ratio"], 0.5)
    obs = tf.random.normal([16, 3])
    live = _load_serving(os.path.join(logdir, "policy"))(obs=obs)["action"]
    packed = _load_serving(os.path.join(logdir, "policy_compressed"))(obs=obs)["action"]
    self.assertAllClose(live, packed, atol=1e-5)
    self.assertLess(resumed["policy_compressed_bytes"], resumed["policy_bytes"])

  def test_target_networks_use_online_masks(self):
    config = TD3Config(hidden_sizes=(16, 16), batch_size=8, policy_delay=1)
    spec = tl.LayerSpec(kind="pruned", schedule="constant", target_sparsity=0.5)
    learner = TD3Learner(config, 3, [-1.0], [1.0], spec)
    batch = (np.random.randn(2, 8, 3).astype(np.float32),
             np.random.uniform(-1, 1, [2, 8, 1]).astype(np.float32),
             np.random.randn(2, 8).astype(np.float32), np.random.randn(2, 8, 3).astype(np.float32),
             np.ones([2, 8], np.float32), np.random.randn(2, 8, 1).astype(np.float32))
    learner.update(*batch)
    self.assertAllEqual(learner.actor.hidden[0].mask, learner.target_actor.hidden[0].mask)
    kernel = learner.target_actor.hidden[0].kernel.numpy()
    self.assertTrue(np.all(kernel[learner.actor.hidden[0].mask.numpy() == 0] == 0))

  def test_config_validation(self):
    with self.assertRaisesRegex(ValueError, "batch_size"):
      TD3Config(batch_size=0)
    with self.assertRaisesRegex(ValueError, "tau"):
      TD3Config(tau=0.0)
    with self.assertRaisesRegex(ValueError, "Box"):
      _train(TD3Config(protocol=EnvProtocol(env="CartPole-v1"), total_steps=1),
             logdir=self.get_temp_dir() + "/cp")


_TINY = dict(protocol=EnvProtocol(env="Pendulum-v1"), total_steps=60, start_steps=20,
             update_every=20, checkpoint_every=60, hidden_sizes=(8, 8), batch_size=4, eval_every=0,
             eval_episodes=1, log_every=60)


class CheckpointSafetyTest(tf.test.TestCase):
  """Resumes refuse other runs' checkpoints, missing replay buffers and unreadable
  files, in one line, changing nothing. (A fresh run over a checkpoint, and a
  resume without one: the skeleton's, tests/test_run_loop.py.)"""

  test_session = None

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.source = tempfile.mkdtemp()
    _train(TD3Config(**_TINY), logdir=cls.source, export=False)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.source, ignore_errors=True)
    super().tearDownClass()

  def _copy(self, name):
    logdir = os.path.join(self.get_temp_dir(), name)
    shutil.copytree(self.source, logdir)
    return logdir, os.path.join(logdir, "checkpoints")

  def _snapshot(self, logdir):
    out = {}
    for d, _, names in os.walk(logdir):
      for n in names:
        with open(os.path.join(d, n), "rb") as f:
          out[os.path.join(d, n)] = f.read()
    return out

  def _refused(self, logdir, error=ValueError, **changes):
    before = self._snapshot(logdir)
    with self.assertRaises(error) as cm:
      _train(TD3Config(**dict(_TINY, total_steps=80, **changes)), logdir=logdir,
             resume=True, export=False)
    self.assertEqual(self._snapshot(logdir), before)
    self.assertNotIn("\n", str(cm.exception))
    return str(cm.exception)

  def test_the_last_checkpoint_is_not_saved_again(self):
    # total_steps a multiple of checkpoint_every: the loop saves at its last
    # step, and the final save must not write that checkpoint again (TF would
    # rewrite its index in place: a kill then would leave no whole checkpoint).
    logdir, ckpt_dir = self._copy("saved_once")
    saved = []
    original = tf_checkpoints.RunCheckpoints.save

    def save(checkpoints, algorithm, number, identity):
      saved.append(number)
      return original(checkpoints, algorithm, number, identity)

    with mock.patch.object(tf_checkpoints.RunCheckpoints, "save", save):
      summary = _train(TD3Config(**dict(_TINY, total_steps=120)), logdir=logdir, resume=True,
                       export=False)
    self.assertEqual(summary["env_steps"], 120)
    self.assertEqual(saved, [120])
    self.assertEqual(os.path.basename(tf.train.latest_checkpoint(ckpt_dir)), "ckpt-120")
    self.assertIn("replay-120.npz", os.listdir(ckpt_dir))

  def test_each_checkpoint_keeps_its_own_replay_buffer(self):
    logdir, ckpt_dir = self._copy("replay")
    self.assertEqual(sorted(f for f in os.listdir(ckpt_dir) if "replay" in f),
                     ["replay-60.npz"])
    summary = _train(TD3Config(**dict(_TINY, total_steps=120)), logdir=logdir, resume=True,
                     export=False)
    self.assertEqual(summary["env_steps"], 120)
    self.assertEqual(sorted(f for f in os.listdir(ckpt_dir) if "replay" in f),
                     ["replay-120.npz"])

  def test_mismatches_are_named(self):
    logdir, ckpt_dir = self._copy("mismatch")
    message = self._refused(logdir, hidden_sizes=(16, 16))
    self.assertStartsWith(message, f"cannot resume {ckpt_dir} (checkpoint != this run): "
                                   "hidden sizes [8, 8] != [16, 16]; ")
    self.assertRegex(message, r"parameters \d+ != \d+$")
    message = self._refused(logdir, protocol=EnvProtocol(env="MountainCarContinuous-v0"))
    self.assertIn("env Pendulum-v1 != MountainCarContinuous-v0; observation spec "
                  "[None, 3] float32 != [None, 2] float32", message)
    message = self._refused(logdir, protocol=EnvProtocol(env="Pendulum-v1",
                                                         max_episode_frames=50))
    self.assertEqual(message, f"cannot resume {ckpt_dir} (checkpoint != this run): "
                     "max episode frames (none) != 50")
    plan = tl.LayerSpec(kind="circulant", block_size=4)
    before = self._snapshot(logdir)
    with self.assertRaisesRegex(ValueError, r"layers actor/dense_0:Dense.* != "
                                            r"actor/dense_0:BlockCirculantDense\(b=4\)"):
      _train(TD3Config(**_TINY), plan, logdir=logdir, resume=True, export=False)
    self.assertEqual(self._snapshot(logdir), before)

  def test_missing_replay_buffer_is_refused_unless_allowed(self):
    logdir, ckpt_dir = self._copy("no_replay")
    os.remove(os.path.join(ckpt_dir, "replay-60.npz"))
    message = self._refused(logdir)
    self.assertEqual(message, f"cannot resume from {ckpt_dir}/ckpt-60: its replay buffer "
                     f"{ckpt_dir}/replay-60.npz is missing; pass --resume_without_replay "
                     "to resume with an empty buffer.")
    with self.assertLogs("absl", level="WARNING") as logs:
      summary = _train(TD3Config(**dict(_TINY, total_steps=80)), logdir=logdir, resume=True,
                       export=False, resume_without_replay=True)
    self.assertEqual(summary["env_steps"], 80)
    self.assertIn(f"Resuming from {ckpt_dir}/ckpt-60 with an empty replay buffer "
                  "(--resume_without_replay).", "\n".join(logs.output))

  def test_damaged_files_are_one_line(self):
    def truncate(path, size):
      with open(path, "rb") as f:
        data = f.read()
      with open(path, "wb") as f:
        f.write(data[:size])

    cases = {
        "replay_truncated": ("replay-60.npz", 200, "unreadable replay buffer, truncated?"),
        "replay_garbage": ("replay-60.npz", None, "unreadable replay buffer, truncated?"),
        "state_truncated": ("checkpoint", 25, "not a checkpoint state, truncated?"),
        "index_truncated": ("ckpt-60.index", 30, ""),
        "data_truncated": ("ckpt-60.data-00000-of-00001", 30, ""),
    }
    for name, (file, size, problem) in cases.items():
      with self.subTest(name):
        logdir, ckpt_dir = self._copy(name)
        path = os.path.join(ckpt_dir, file)
        if size is None:
          with open(path, "wb") as f:
            f.write(b"PK\x03\x04" + b"\0" * 300)
        else:
          truncate(path, size)
        message = self._refused(logdir, error=resume.CorruptCheckpoint)
        named = path if "ckpt-60." not in file else os.path.join(ckpt_dir, "ckpt-60")
        self.assertStartsWith(message, f"cannot load the checkpoint {named}: {problem}")


if __name__ == "__main__":
  tf.test.main()
