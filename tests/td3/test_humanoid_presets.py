"""The Humanoid-v5 presets (flags/td3_humanoid*.flags) run as the entry point
parses them, on a budget of a few hundred steps: they train on the MuJoCo
ops, checkpoint (replay buffer included), resume and export both policies.

One process parses each preset's flags (as `python -m tfrl.td3 --preset=...`
would) with a small budget, replay capacity and batch, runs 200 steps, then
resumes to 300 and exports; the test reads what it reports."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The study's methods: dense, cubic pruning, the literature's ERK 20-80 % baseline and
# dual-mode GST.
_PRESETS = ("td3_humanoid", "td3_humanoid_pruning", "td3_humanoid_pruning_erk_20_80",
            "td3_humanoid_gst")
# The checker's wait (killed at its end by subprocess.run); the class's timeout
# mark is above it with room for the tests and the clean-up.
_CHECKER_SECONDS = 1200

_CHECKER = textwrap.dedent("""
    import dataclasses, json, os, sys
    from absl import flags
    from tfrl import presets
    from tfrl import run_loop
    from tfrl.envs import protocol as protocol_lib
    from tfrl.td3 import __main__ as entry
    from tfrl.td3 import loop
    root = sys.argv[1]
    budget = ["--total_steps=200", "--start_steps=100", "--update_every=50",
              "--batch_size=64", "--replay_size=1000", "--eval_every=0", "--eval_episodes=1",
              "--checkpoint_every=200", "--log_every=100"]
    out = {}
    for name in sys.argv[2:]:
      logdir = os.path.join(root, name)
      flags.FLAGS.unparse_flags()
      flags.FLAGS(presets.expand(["prog", f"--preset={name}", *budget, f"--logdir={logdir}"],
                                 "tfrl.td3"))
      config = entry.config_from_flags()
      first = run_loop.run(loop.build(dataclasses.replace(
          config, run=dataclasses.replace(config.run, export=False))))
      resumed = run_loop.run(loop.build(dataclasses.replace(
          config, total_steps=300, run=dataclasses.replace(config.run, resume=True))))
      out[name] = {"first": {k: first[k] for k in ("env_steps", "training_iterations")},
                   "resumed": {k: v for k, v in resumed.items() if k != "layers"},
                   "layers": {k: v["compression_ratio"] for k, v in resumed["layers"].items()},
                   "implementation": protocol_lib.implementation(config.protocol),
                   "logdir": logdir}
    print(json.dumps(out))
""")


# setUpClass runs inside the first test's timeout, the class clean-up inside the last's.
@pytest.mark.timeout(_CHECKER_SECONDS + 180)
class HumanoidPresetsTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    # A class cleanup runs even when setUpClass fails (tearDownClass would not).
    cls.addClassCleanup(shutil.rmtree, cls.root, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=_REPO, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", _CHECKER, cls.root, *_PRESETS], cwd=_REPO,
                            env=env, capture_output=True, text=True, timeout=_CHECKER_SECONDS)
    if result.returncode:
      raise AssertionError(f"the Humanoid presets failed: {result.stderr[-3000:]}")
    cls.results = json.loads(result.stdout.strip().splitlines()[-1])

  def test_each_preset_trains_checkpoints_and_resumes(self):
    for name in _PRESETS:
      with self.subTest(name):
        result = self.results[name]
        self.assertEqual(result["implementation"], "ops")
        self.assertEqual(result["first"], {"env_steps": 200, "training_iterations": 150})
        resumed = result["resumed"]
        self.assertEqual(resumed["env_steps"], 300)
        self.assertTrue(resumed["completed"])
        # Phases of 50 updates at t = 100, 150, 200, then 250, 300 after the resume.
        self.assertEqual(resumed["training_iterations"], 250)
        self.assertTrue(np.isfinite(resumed["eval_return"]))
        checkpoints = os.path.join(result["logdir"], "checkpoints")
        with np.load(os.path.join(checkpoints, "replay-300.npz")) as replay:
          self.assertEqual(replay["obs"].shape, (300, 348))
          self.assertEqual(replay["action"].shape, (300, 17))

  def test_each_preset_exports_both_policies(self):
    obs = tf.random.normal([2, 348])
    for name in _PRESETS:
      with self.subTest(name):
        logdir = self.results[name]["logdir"]
        actions = []
        for policy in ("policy", "policy_compressed"):
          serve = tf.saved_model.load(os.path.join(logdir, policy)).signatures["serving_default"]
          actions.append(serve(obs=obs)["action"].numpy())
        self.assertEqual(actions[0].shape, (2, 17))
        self.assertTrue(np.all(np.abs(actions[0]) <= 0.4))  # Humanoid's action box
        self.assertAllClose(actions[0], actions[1], atol=1e-5)
        resumed = self.results[name]["resumed"]
        self.assertLessEqual(resumed["policy_compressed_bytes"], resumed["policy_bytes"])

  def test_the_layer_plans(self):
    dense, pruning, erk, gst = (self.results[name]["layers"] for name in _PRESETS)
    self.assertEqual(set(dense.values()), {0.0})
    self.assertEqual(set(pruning), set(dense))  # (cubic to 90%: ~0 after 250 iterations)
    self.assertEqual(set(erk.values()), {0.0})  # its window opens at 175k updates
    # Dual mode from step 0: every layer with both sizes >= 64 circulant at b = 8; the
    # input sizes padded to a multiple of 8 (348 -> 44 blocks, 365 -> 46).
    self.assertAllClose(gst["actor/dense_1"], 1 - 1 / 8)
    self.assertAllClose(gst["critic_1/dense_1"], 1 - 1 / 8)
    self.assertAllClose(gst["actor/dense_0"], 1 - 44 * 32 * 8 / (348 * 256))
    self.assertAllClose(gst["critic_2/dense_0"], 1 - 46 * 32 * 8 / (365 * 256))
    self.assertLess(gst["actor/out"], 0.5)  # the output layer: pruned, nearly dense yet


if __name__ == "__main__":
  tf.test.main()
