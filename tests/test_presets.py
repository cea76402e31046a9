"""Every flagfile preset under flags/ (and every ablation under
benchmarks/ablations/) parses for its entry point and builds; presets are
found by name (`--preset=NAME`, tfrl/presets.py) and a bad name ends in one
line.

Each entry point runs in its own process (their flag sets differ); the
checker reparses the absl flags once per preset (the presets of flags/ named
by --preset, the ablations by --flagfile), builds the typed config and the
layer plan, and for TD3 the networks at HalfCheetah's sizes. The installed
package's presets: tests/test_wheel.py.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from unittest import mock

from absl import flags
from absl.testing import absltest

from tfrl import presets

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Preset file prefix -> entry-point module.
_ENTRY_POINTS = {"td3": "tfrl.td3.__main__", "ga3c": "tfrl.ga3c.__main__",
                 "ga": "tfrl.ga.__main__", "es": "tfrl.es.__main__",
                 "random_search": "tfrl.random_search.__main__"}

_CHECKER = textwrap.dedent("""
    import glob, importlib, json, os, sys
    import numpy as np
    import tensorflow as tf
    from absl import flags
    from tfrl import presets
    from tfrl.layers import compression
    from tfrl.layers import flags as layer_flags
    prefix, module = sys.argv[1], sys.argv[2]
    entry = importlib.import_module(module)
    FLAGS = flags.FLAGS
    out = {}
    # The presets by name, as `--preset=NAME` gives them to the entry point.
    named = {os.path.relpath(presets.path(name, f"tfrl.{prefix}")): f"--preset={name}"
             for name in presets.names(f"tfrl.{prefix}")}
    ablations = {path: f"--flagfile={path}"
                 for path in glob.glob(f"benchmarks/ablations/{prefix}_*.flags")}
    for path, arg in sorted({**named, **ablations}.items()):
      FLAGS.unparse_flags()
      FLAGS(presets.expand(["prog", arg], f"tfrl.{prefix}"))
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
    files = {os.path.relpath(p, _ROOT) for d in ("flags", "benchmarks/ablations")
             for p in glob.glob(os.path.join(_ROOT, d, "*.flags"))}
    self.assertEqual(files - checked, set())
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
    # GST's circulant layers hold its compression from step 0 (dual mode at b=8: 87.5%
    # of the 256x256 layers, about 80% of the whole); dense holds none.
    for path, info in self.results["td3"].items():
      with self.subTest(path=path):
        if info["dense_layer"] == "gst":
          self.assertGreater(info["compression"], 0.75)
        elif info["dense_layer"] == "dense":
          self.assertEqual(info["compression"], 0.0)


class PresetByNameTest(absltest.TestCase):
  """--preset=NAME: the same file as --flagfile, from any entry point."""

  def test_every_file_is_a_preset_of_one_entry_point(self):
    files = sorted(os.path.basename(p)[:-len(".flags")]
                   for p in glob.glob(os.path.join(_ROOT, "flags", "*.flags")))
    self.assertEqual(presets.names(), files)
    self.assertEqual(presets.directory(), os.path.join(_ROOT, "flags"))
    for name in files:
      self.assertIn(presets.entry_point(name), {f"tfrl.{p}" for p in _ENTRY_POINTS}, name)
    self.assertEqual(presets.entry_point("ga3c_pong"), "tfrl.ga3c")
    self.assertEqual(presets.entry_point("ga_pong"), "tfrl.ga")
    self.assertEqual(presets.entry_point("random_search_pong"), "tfrl.random_search")
    self.assertEqual(sum(len(presets.names(f"tfrl.{p}")) for p in _ENTRY_POINTS),
                     len(files))

  def test_preset_becomes_its_flags_in_place(self):
    pong = presets.flag_lines("ga_pong")
    self.assertIn("--game=pong", pong)
    self.assertEqual(
        presets.expand(["prog", "--seed=1", "--preset=ga_pong", "--population=8"], "tfrl.ga"),
        ["prog", "--seed=1", *pong, "--population=8"])
    self.assertEqual(presets.expand(["prog", "--preset", "ga_pong", "-preset=ga_pong"],
                                    "tfrl.ga"),
                     ["prog", *pong, *pong])
    self.assertEqual(presets.expand(["prog", "--", "--preset=nothing"], "tfrl.ga"),
                     ["prog", "--", "--preset=nothing"])

  def test_flags_are_absls_reading_of_the_file(self):
    # absl itself reads each file from the clone root, where a preset's
    # --flagfile=flags/<other>.flags resolves: the reference.
    including = 0
    cwd = os.getcwd()
    os.chdir(_ROOT)
    self.addCleanup(os.chdir, cwd)
    for name in presets.names():
      path = os.path.relpath(presets.path(name))
      with open(path) as f:
        including += "--flagfile=" in f.read()
      with self.subTest(name=name):
        self.assertEqual(presets.flag_lines(name),
                         flags.FLAGS.read_flags_from_files([f"--flagfile={path}"]))
    self.assertGreaterEqual(including, 5)   # td3_*_gst, td3_*_pruning, es_pong_vbn

  def test_an_include_that_is_missing_or_circular_is_one_line(self):
    folder = tempfile.mkdtemp(prefix="tfrl_presets_")
    self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
    for name, text in (("ga_a", "--flagfile=flags/ga_b.flags\n"),
                       ("ga_b", "# b\n--flagfile=flags/ga_a.flags\n"),
                       ("ga_c", "--seed=3\n--flagfile=flags/ga_gone.flags\n")):
      with open(os.path.join(folder, name + ".flags"), "w") as f:
        f.write(text)
    with mock.patch.object(presets, "directory", return_value=folder):
      for name, message in (("ga_a", r"^preset ga_a includes itself: ga_a -> ga_b -> ga_a$"),
                            ("ga_c", r"^preset ga_c includes 'ga_gone', which is not among "
                                     r"the presets in ")):
        with self.assertRaisesRegex(ValueError, message):
          presets.expand(["prog", f"--preset={name}"], "tfrl.ga")

  def test_bad_names_are_one_line(self):
    with self.assertRaisesRegex(ValueError, r"^no preset named 'ga_pongg'; the presets of "
                                r"tfrl.ga are: ga_cartpole, ga_frostbite_small, ga_humanoid, ga_pong, ga_seaquest_small$"):
      presets.expand(["prog", "--preset=ga_pongg"], "tfrl.ga")
    with self.assertRaisesRegex(ValueError, r"^preset td3_pendulum is for tfrl.td3, not "
                                r"tfrl.ga: python -m tfrl.td3 --preset=td3_pendulum$"):
      presets.expand(["prog", "--preset=td3_pendulum"], "tfrl.ga")
    with self.assertRaisesRegex(ValueError, "^--preset needs a name: es_cartpole, "):
      presets.expand(["prog", "--preset"], "tfrl.es")


# An entry point on `cli.run` without TensorFlow, with (string) flags of the
# names ga_cartpole sets: prints two of them.
_ENTRY = textwrap.dedent("""
    import sys
    from absl import flags
    from tfrl import cli, presets
    with open(presets.path("ga_cartpole")) as f:
      for line in f:
        if line.startswith("--"):
          flags.DEFINE_string(line[2:].split("=")[0], None, "")
    def main(argv):
      print(flags.FLAGS.population, flags.FLAGS.env)
    cli.run(main, sys.argv.pop(1))
""")


def _entry(prog, *args, cwd=_ROOT):
  env = dict(os.environ, PYTHONPATH=_ROOT)
  return subprocess.run([sys.executable, "-c", _ENTRY, prog, *args], env=env, cwd=cwd,
                        capture_output=True, text=True, timeout=120)


class PresetFlagTest(absltest.TestCase):
  """cli.run: --preset on the command line of every entry point."""

  def _tempdir(self):
    path = tempfile.mkdtemp(prefix="tfrl_presets_")
    self.addCleanup(shutil.rmtree, path, ignore_errors=True)
    return path

  def test_preset_then_override_from_any_folder(self):
    out = _entry("tfrl.ga", "--preset=ga_cartpole", "--population=5",
                 cwd=self._tempdir())
    self.assertEqual((out.returncode, out.stdout), (0, "5 CartPole-v1\n"), out.stderr)

  def test_a_preset_that_includes_presets_runs_from_any_folder(self):
    # td3_halfcheetah_gst_fixed_b32 starts from td3_halfcheetah_gst_fixed_b16, which starts
    # from td3_halfcheetah; absl alone would look for them under ./flags.
    out = subprocess.run(
        [sys.executable, "-m", "tfrl.td3", "--preset=td3_halfcheetah_gst_fixed_b32",
         "--only_check_args"], env=dict(os.environ, PYTHONPATH=_ROOT),
        cwd=self._tempdir(), capture_output=True, text=True, timeout=300)
    self.assertEqual(out.returncode, 0, out.stderr[-2000:])
    self.assertNotIn("Unable to open flagfile", out.stderr)

  def test_bad_preset_is_one_line_and_exit_code_2(self):
    for prog, name, expected in (
        ("tfrl.ga", "nope", "tfrl.ga: error: no preset named 'nope'; the presets of tfrl.ga "
         "are: ga_cartpole, ga_frostbite_small, ga_humanoid, ga_pong, ga_seaquest_small"),
        ("tfrl.ga", "td3_pendulum", "tfrl.ga: error: preset td3_pendulum is for tfrl.td3, "
         "not tfrl.ga: python -m tfrl.td3 --preset=td3_pendulum")):
      out = _entry(prog, f"--preset={name}")
      self.assertEqual((out.returncode, out.stderr), (2, expected + "\n"))

  def test_help_lists_the_presets(self):
    out = _entry("tfrl.random_search", "--helpfull")
    self.assertIn("--preset", out.stdout)
    self.assertIn("Presets of tfrl.random_search: random_search_cartpole,", out.stdout)

  def test_preset_in_a_flag_file_is_refused(self):
    path = os.path.join(self._tempdir(), "my.flags")
    with open(path, "w") as f:
      f.write("--preset=ga_cartpole\n")
    out = _entry("tfrl.ga", f"--flagfile={path}")
    self.assertEqual(out.returncode, 2, out.stderr)
    self.assertEqual(out.stderr.strip().splitlines()[-1],
                     "tfrl.ga: error: --preset=ga_cartpole works on the command line only; "
                     "in a flag file, use --flagfile=<the preset's file>.")

  def test_entry_points_without_presets_have_no_preset_flag(self):
    out = _entry("tfrl.evaluate", "--preset=ga_pong")
    self.assertNotEqual(out.returncode, 0)
    self.assertIn("Unknown command line flag 'preset'", out.stderr)


if __name__ == "__main__":
  absltest.main()
