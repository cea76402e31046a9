"""tests/conftest.py: the serial group names test files that exist, and a run
with a path that does not stops before it starts."""

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
    self.assertIn("SERIAL_FILES lists ['tests/moved_away.py']", out.stdout + out.stderr)
    self.assertNotIn("1 passed", out.stdout)


if __name__ == "__main__":
  absltest.main()
