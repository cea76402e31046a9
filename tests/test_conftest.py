"""tests/conftest.py: the serial group names test files that exist, a run with
a path that does not stops before it starts, and an xdist group keeps a shared
setup on one worker."""

import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tests import conftest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SerialFilesTest(absltest.TestCase):

  def test_every_serial_file_exists(self):
    self.assertEqual(conftest.missing_serial_files(), [])
    self.assertEqual(conftest.missing_serial_files(("tests/test_wheel.py", "tests/nope.py")),
                     ["tests/nope.py"])

  def test_a_missing_serial_file_stops_the_run(self):
    # A copy of the conftest with one more path, in a folder of its own.
    folder = tempfile.mkdtemp(prefix="tfrl-conftest-")
    self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
    with open(os.path.join(_ROOT, "tests", "conftest.py")) as f:
      text = f.read()
    text = text.replace('SERIAL_FILES = (\n', 'SERIAL_FILES = (\n    "tests/moved_away.py",\n')
    text = text.replace("_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))",
                        f"_ROOT = {_ROOT!r}")
    self.assertIn('"tests/moved_away.py"', text)
    with open(os.path.join(folder, "conftest.py"), "w") as f:
      f.write(text)
    with open(os.path.join(folder, "test_nothing.py"), "w") as f:
      f.write("def test_nothing():\n  pass\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          folder], cwd=folder, capture_output=True, text=True, timeout=120)
    self.assertNotEqual(out.returncode, 0, out.stdout)
    self.assertIn("SERIAL_FILES or BUILD_FILES lists ['tests/moved_away.py']",
                  out.stdout + out.stderr)
    self.assertNotIn("1 passed", out.stdout)

  def test_a_shared_setup_runs_once_on_one_worker(self):
    # The suite's own options (-n 2 --dist loadgroup) on a copy of the conftest:
    # a class with a setUpClass and eight tests runs its setup once, on one
    # worker (the xdist group is honoured, so the two workers do not both run it).
    folder = tempfile.mkdtemp(prefix="tfrl-conftest-")
    self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
    with open(os.path.join(_ROOT, "tests", "conftest.py")) as f:
      text = f.read()
    with open(os.path.join(folder, "conftest.py"), "w") as f:
      f.write(text.replace("_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))",
                           f"_ROOT = {_ROOT!r}"))
    log = os.path.join(folder, "setups.log")
    tests = "".join(f"  def test_{i}(self):\n    time.sleep(0.2)\n" for i in range(8))
    with open(os.path.join(folder, "test_shared.py"), "w") as f:
      f.write("import os, time, unittest\n\n"
              "class SharedTest(unittest.TestCase):\n"
              "  @classmethod\n"
              "  def setUpClass(cls):\n"
              f"    with open({log!r}, 'a') as f:\n"
              "      f.write(os.environ.get('PYTEST_XDIST_WORKER', 'none') + '\\n')\n"
              + tests)
    with open(os.path.join(folder, "test_other.py"), "w") as f:
      f.write("import time\n" + "".join(f"def test_{i}():\n  time.sleep(0.2)\n"
                                        for i in range(8)))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-n", "2", "--dist", "loadgroup", folder], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    self.assertEqual(out.returncode, 0, out.stdout[-3000:] + out.stderr[-3000:])
    self.assertIn("16 passed", out.stdout)
    with open(log) as f:
      self.assertLen(f.read().split(), 1)


if __name__ == "__main__":
  absltest.main()
