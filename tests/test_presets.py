"""Every flagfile preset under flags/ (and every ablation under
benchmarks/ablations/) parses for its entry point and builds.

Each entry point runs in its own process (their flag sets differ); the
checker reparses the absl flags once per preset, builds the typed config
and the layer plan, and for TD3 the networks at HalfCheetah's sizes.
"""

import glob
import json
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Preset file prefix -> entry-point module.
_ENTRY_POINTS = {"td3": "tfrl.td3.__main__", "ga3c": "tfrl.ga3c.__main__", "ga": "tfrl.ga",
                 "es": "tfrl.es", "random_search": "tfrl.random_search"}

_CHECKER = textwrap.dedent("""
    import glob, importlib, json, sys
    import numpy as np
    import tensorflow as tf
    from absl import flags
    from tfrl.layers import compression
    from tfrl.layers import flags as layer_flags
    prefix, module = sys.argv[1], sys.argv[2]
    entry = importlib.import_module(module)
    FLAGS = flags.FLAGS
    out = {}
    for path in sorted(glob.glob(f"flags/{prefix}_*.flags")
                       + glob.glob(f"benchmarks/ablations/{prefix}_*.flags")):
      FLAGS.unparse_flags()
      FLAGS(["prog", f"--flagfile={path}"])
      plan = layer_flags.layer_plan_from_flags(FLAGS)
      info = {"logdir": FLAGS["logdir"].value if "logdir" in FLAGS else None,
              "dense_layer": FLAGS.dense_layer}
      if prefix == "td3":
        from tfrl.td3 import networks
        config = entry.config_from_flags()
        actor = networks.Actor(-np.ones(6), np.ones(6), config.hidden_sizes, plan)
        critic = networks.Critic(config.hidden_sizes, plan)
        actor(tf.zeros([2, 17]))
        critic(tf.zeros([2, 17]), tf.zeros([2, 6]))
        info["compression"] = compression.compression_report(
            [actor, critic])["total"]["compression_ratio"]
      elif prefix == "ga3c":
        entry.config_from_flags()
      elif prefix in ("ga", "es", "random_search"):
        entry.config_from_flags()
      out[path] = info
    print(json.dumps(out))
""")


def _check(prefix):
  env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, "-c", _CHECKER, prefix, _ENTRY_POINTS[prefix]],
                       env=env, cwd=_ROOT, capture_output=True, text=True, timeout=300)
  if out.returncode:
    raise AssertionError(f"presets {prefix}_*.flags: {out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


class PresetTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.results = {prefix: _check(prefix) for prefix in _ENTRY_POINTS}

  def test_every_preset_belongs_to_an_entry_point(self):
    checked = {p for r in self.results.values() for p in r}
    presets = {os.path.relpath(p, _ROOT) for d in ("flags", "benchmarks/ablations")
               for p in glob.glob(os.path.join(_ROOT, d, "*.flags"))}
    self.assertEqual(presets - checked, set())
    self.assertTrue(any(p.startswith("benchmarks/ablations/") for p in checked))

  def test_every_preset_says_what_it_is_for_and_what_it_measured(self):
    for path in glob.glob(os.path.join(_ROOT, "flags", "*.flags")):
      with self.subTest(path=os.path.basename(path)), open(path) as f:
        header = "".join(line for line in f if line.startswith("#"))
        self.assertIn("# For: ", header)
        self.assertIn("Measured: ", header)

  def test_td3_presets_have_their_own_logdirs(self):
    logdirs = [r["logdir"] for r in self.results["td3"].values()]
    self.assertLen(set(logdirs), len(logdirs), logdirs)

  def test_gst_presets_are_compressed_from_the_start(self):
    # GST's circulant layers hold its compression from step 0; dense holds none.
    for path, info in self.results["td3"].items():
      with self.subTest(path=path):
        if info["dense_layer"] == "gst":
          self.assertGreater(info["compression"], 0.85)
        elif info["dense_layer"] == "dense":
          self.assertEqual(info["compression"], 0.0)


if __name__ == "__main__":
  absltest.main()
