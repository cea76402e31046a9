"""A short pruned Pendulum TD3 run, trained once per test class, for the tests of
the scripts that read TD3 runs."""

import os
import subprocess
import sys
import tempfile
from typing import Sequence

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PrunedPendulumRunTest(absltest.TestCase):
  """`run_dir`: 400 steps of `td3_pendulum` (200 random) with `LAYER_FLAGS`, pruned
  over its first 100 updates, in `_tmp` (removed after the class)."""

  LAYER_FLAGS: Sequence[str] = ()

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    cls.run_dir = os.path.join(cls._tmp.name, "pruned")
    done = subprocess.run(
        [sys.executable, "-m", "tfrl.td3", "--preset=td3_pendulum", "--total_steps=400",
         "--start_steps=200", "--eval_every=0", "--eval_episodes=1", *cls.LAYER_FLAGS,
         "--pruning_begin=0", "--pruning_end=100", "--pruning_frequency=10",
         f"--logdir={cls.run_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()
