"""setup.py: the op families it finds in custom_ops/, ALE's PGO switch, the
profile workload it runs and the object cache."""

import contextlib
import ctypes
import importlib.util
import io
import os
import re
import shutil
import subprocess
import tempfile

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
    # and its kernels in cc/kernels; one library per family. Headers several
    # families include live in custom_ops/common/, which every family's
    # build searches after its own kernels (and which is no family).
    families = self.setup.op_families({})
    self.assertEqual(sorted(families), ["ale", "mujoco", "population"])
    common = os.path.join(ROOT, "custom_ops", "common")
    self.assertTrue(os.path.exists(os.path.join(common, "BUILD")))
    for name, family in families.items():
      self.assertEqual(family.include_dirs,
                       (os.path.join(ROOT, "custom_ops", name, "cc", "kernels"), common))
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


_PROBE_SOURCE = """#include "probe.h"
extern "C" int probe_value() { return PROBE_VALUE; }
"""
_PROBE_HEADER = """#include "probe_value.h"
// TFRL_IN_A_COMMENT: named here, used nowhere.
/* And TFRL_IN_A_BLOCK_COMMENT,
   over two lines. */
#ifdef TFRL_PROBE_ON
#undef PROBE_VALUE
#define PROBE_VALUE 9
#endif
"""


class ObjectCacheTest(tf.test.TestCase):
  """Builds of a one-file family (no TensorFlow) that a C caller can run: the
  object comes from the cache exactly when nothing that makes it changed."""

  def setUp(self):
    super().setUp()
    self.setup = load_setup()
    self.work = tempfile.mkdtemp(prefix="tfrl-object-cache-")
    self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
    self.setup.ROOT = os.path.join(self.work, "checkout")
    self.external = os.path.join(self.work, "venv", "include")
    self._write("venv/include/tensorflow/core/public/release_version.h", "#define TF_V 1\n")
    self._write("checkout/ops/probe.cc", _PROBE_SOURCE)
    self._write("checkout/ops/probe.h", _PROBE_HEADER)
    # Found through the second include folder, as a header in custom_ops/common.
    self._write("checkout/common/probe_value.h", "#define PROBE_VALUE 7\n")
    self._env = {k: os.environ.get(k) for k in ("TFRL_CACHE_DIR", "TFRL_OBJECT_CACHE")}
    os.environ["TFRL_CACHE_DIR"] = os.path.join(self.work, "cache")
    os.environ.pop("TFRL_OBJECT_CACHE", None)
    self.builds = 0

  def tearDown(self):
    for key, value in self._env.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
    super().tearDown()

  def _write(self, name, text):
    path = os.path.join(self.work, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
      f.write(text)

  def _build(self, defines=()):
    """(value the library returns, objects taken from the cache)."""
    self.builds += 1
    folders = tuple(os.path.join(self.setup.ROOT, f) for f in ("ops", "common"))
    family = self.setup.Family("probe", ("ops/probe.cc",), tuple(defines), folders)
    output = os.path.join(self.work, f"lib{self.builds}", "probe.so")
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
      self.setup.compile_family(family, output, os.path.join(self.work, f"obj{self.builds}"),
                                ([f"-I{self.external}"], []))
    cached = re.search(r"\((\d+) of 1 objects from the object cache\)", log.getvalue())
    return ctypes.CDLL(output).probe_value(), int(cached.group(1))

  def test_an_object_comes_from_the_cache_only_when_nothing_that_makes_it_changed(self):
    self.assertEqual(self._build(), (7, 0))
    self.assertEqual(self._build(), (7, 1))
    self._write("checkout/common/probe_value.h", "#define PROBE_VALUE 8\n")  # a nested header
    self.assertEqual(self._build(), (8, 0))
    self.assertEqual(self._build(defines=["TFRL_PROBE_ON"]), (9, 0))  # a define it names
    self.assertEqual(self._build(defines=["TFRL_OTHER"]), (8, 1))  # one it does not
    # Names in comments only: hit.
    self.assertEqual(self._build(defines=["TFRL_IN_A_COMMENT", "TFRL_IN_A_BLOCK_COMMENT"]),
                     (8, 1))
    # Another checkout, another virtualenv with the same library headers: hit.
    shutil.copytree(self.setup.ROOT, os.path.join(self.work, "clone"))
    self.setup.ROOT = os.path.join(self.work, "clone")
    shutil.copytree(os.path.join(self.work, "venv"), os.path.join(self.work, "venv2"))
    self.external = os.path.join(self.work, "venv2", "include")
    self.assertEqual(self._build(), (8, 1))
    # Another library version: miss.
    self._write("venv2/include/tensorflow/core/public/release_version.h", "#define TF_V 2\n")
    self.assertEqual(self._build(), (8, 0))
    os.environ["TFRL_OBJECT_CACHE"] = "0"
    self.assertEqual(self._build(), (8, 0))
    os.environ["TFRL_OBJECT_CACHE"] = "yes"
    with self.assertRaisesRegex(RuntimeError, "TFRL_OBJECT_CACHE must be 0 or 1, got 'yes'"):
      self._build()

  def test_objects_unused_for_thirty_days_are_removed(self):
    self._build()
    [old] = os.listdir(os.path.join(self.work, "cache", "objects"))
    path = os.path.join(self.work, "cache", "objects", old)
    month = self.setup.OBJECT_CACHE_DAYS * 86400
    os.utime(path, (os.path.getatime(path) - month - 60,) * 2)
    self.assertEqual(self._build(), (7, 0))
    self.assertEqual(os.listdir(os.path.join(self.work, "cache", "objects")), [old])
    self.assertEqual(self._build(), (7, 1))


if __name__ == "__main__":
  tf.test.main()
