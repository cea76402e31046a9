"""setup.py: the op families it finds in custom_ops/, ALE's PGO switch and the
profile workload it runs."""

import importlib.util
import os
import subprocess

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_setup():
  spec = importlib.util.spec_from_file_location("tfrl_setup", os.path.join(ROOT, "setup.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


class AleBuildTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.setup = load_setup()
    self._saved = os.environ.get("TFRL_ALE_PGO")

  def tearDown(self):
    if self._saved is None:
      os.environ.pop("TFRL_ALE_PGO", None)
    else:
      os.environ["TFRL_ALE_PGO"] = self._saved
    super().tearDown()

  def test_op_families_follow_the_layout(self):
    # One folder per family under custom_ops/, its registrations in cc/ops
    # and its kernels in cc/kernels; one library per family.
    families = self.setup.op_families({})
    self.assertEqual(sorted(families), ["ale", "mujoco", "population"])
    for name, family in families.items():
      self.assertIn(f"custom_ops/{name}/cc/ops/{name}_ops.cc", family.sources)
      for source in family.sources:
        self.assertRegex(source, rf"^custom_ops/{name}/cc/(ops|kernels)/[a-z0-9_]+\.cc$")
        self.assertTrue(os.path.exists(os.path.join(ROOT, source)), source)
      self.assertEqual(family.defines, ())
    self.assertEqual([e.name for e in self.setup.extensions()],
                     ["tfrl.ops._ale_ops", "tfrl.ops._mujoco_ops", "tfrl.ops._population_ops"])

  def test_mujoco_family_needs_the_mujoco_wheel(self):
    # Its headers and libmujoco come from the installed mujoco package; a
    # build without it leaves the family out (GymEnv steps MuJoCo tasks).
    folder = self.setup.mujoco_dir()
    self.assertTrue(os.path.exists(os.path.join(folder, "include", "mujoco", "mujoco.h")))
    self.setup.mujoco_dir = lambda: None
    self.assertEqual([e.name for e in self.setup.extensions()],
                     ["tfrl.ops._ale_ops", "tfrl.ops._population_ops"])

  def test_pgo_switch(self):
    os.environ.pop("TFRL_ALE_PGO", None)
    self.assertTrue(self.setup.ale_pgo_enabled())
    os.environ["TFRL_ALE_PGO"] = "0"
    self.assertFalse(self.setup.ale_pgo_enabled())
    os.environ["TFRL_ALE_PGO"] = "yes"
    with self.assertRaisesRegex(RuntimeError, "TFRL_ALE_PGO must be 0 or 1, got 'yes'"):
      self.setup.ale_pgo_enabled()

  def test_profile_workload_plays_the_profile_games(self):
    # The cached ALE of this machine's install (no rebuild when it exists).
    prefix = self.setup.build_ale()
    work = self.get_temp_dir()
    workload = os.path.join(work, "workload")
    subprocess.check_call([
        "g++", "-O2", "-std=c++17",
        os.path.join(ROOT, "custom_ops/ale/cc/tools/ale_profile_workload.cc"),
        f"-I{prefix}/include", f"-I{prefix}/include/ale", f"{prefix}/lib/libale.a",
        "-lz", "-lpthread", "-o", workload])
    # The installed wheel carries the same ROMs as the source distribution.
    import ale_py.roms  # pylint: disable=import-outside-toplevel
    roms = [str(ale_py.roms.get_rom_path(game)) for game in self.setup.PGO_GAMES]
    out = subprocess.run([workload, "400", *roms], capture_output=True, text=True,
                         timeout=120, check=True)
    for game in self.setup.PGO_GAMES:
      self.assertRegex(out.stdout, rf"{game}\.bin: 400 frames, \d+ frames/s")
    bad = subprocess.run([workload, "-3", roms[0]], capture_output=True, text=True)
    self.assertEqual(bad.returncode, 2)
    self.assertIn("FRAMES must be a positive integer, got -3", bad.stderr)
    missing = subprocess.run([workload, "10", os.path.join(work, "no_such.bin")],
                             capture_output=True, text=True)
    self.assertEqual(missing.returncode, 1)
    self.assertIn("no_such.bin", missing.stderr)
    usage = subprocess.run([workload], capture_output=True, text=True)
    self.assertEqual(usage.returncode, 2)
    self.assertIn("usage:", usage.stderr)


if __name__ == "__main__":
  tf.test.main()
