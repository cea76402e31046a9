"""The independent pruning check runs SB3 with tfrl's preset schedule, and its own
schedule (written apart from tfrl's) prunes at the same steps to the same sparsity."""

import importlib.util
import os
import sys

import numpy as np
import tensorflow as tf

from tfrl.layers import schedules

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path, name):
  spec = importlib.util.spec_from_file_location(name, os.path.join(_ROOT, path))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


class PruningCheckTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))
    sys.path.insert(0, os.path.join(_ROOT, "benchmarks", "peers"))  # the peer script's own
    cls.preset = _load("benchmarks/td3_preset.py", "td3_preset")
    cls.peer = _load("benchmarks/peers/sb3_td3_pruning.py", "sb3_td3_pruning")

  def test_the_peer_gets_the_presets_schedule(self):
    settings = self.preset.pruning_settings("td3_halfcheetah_pruning")
    self.assertEqual(settings, {
        "env": "HalfCheetah-v5", "target_sparsity": 0.9, "pruning_begin": 0,
        "pruning_end": 790_000, "pruning_frequency": 1000, "learning_starts": 10_000,
        "batch_size": 256, "hidden": "256,256"})
    # The command line td3_pruning_check.py gives the peer carries all of them.
    command = [f"--{key}={value}" for key, value in settings.items()]
    args = self.peer.parse_args(["--output=/tmp/out.json", *command])
    self.assertEqual({key: getattr(args, key) for key in settings}, settings)

  def test_the_peers_schedule_is_tfrls(self):
    for t in (0, 1, 999, 1000, 250_000, 400_000, 789_999, 790_000, 900_000):
      ours = float(schedules.polynomial_sparsity(t, 0, 790_000, 0.0, 0.9, 3.0))
      self.assertAllClose(self.peer.cubic_sparsity(t, 0, 790_000, 0.9), ours, atol=1e-6)
    steps = np.arange(0, 800_000)
    theirs = [t for t in steps[::7] if self.peer.is_pruning_step(int(t), 0, 790_000, 1000)]
    self.assertEqual(theirs, [t for t in steps[::7] if t % 1000 == 0 and t <= 790_000])

  def test_bad_schedules_are_refused(self):
    with self.assertRaises(SystemExit):
      self.peer.parse_args(["--output=x", "--target_sparsity=1.0"])
    with self.assertRaises(SystemExit):
      self.peer.parse_args(["--output=x", "--pruning_end=0", "--pruning_begin=5"])


if __name__ == "__main__":
  tf.test.main()
