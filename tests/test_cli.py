"""Entry points end on bad input with one readable line and exit code 2."""

import os
import subprocess
import sys
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BadInputTest(parameterized.TestCase):

  @parameterized.parameters(
      ("tfrl.td3", ["--env=Pendulum-v1", "--batch_size=0"], "batch_size must be >= 1"),
      ("tfrl.ga", ["--env=CartPole-v1", "--population=-3"], "population must be >= 2"),
      ("tfrl.es", ["--env=CartPole-v1", "--population=3"], "must be even"),
      ("tfrl.ga3c", ["--env=CartPole-v1", "--profile_steps=7"], "--profile_steps"),
  )
  def test_one_line_and_exit_code_2(self, module, args, expected):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    logdir = os.path.join(tempfile.mkdtemp(), "run")
    out = subprocess.run([sys.executable, "-m", module, *args, f"--logdir={logdir}"],
                         env=env, cwd=_ROOT, capture_output=True, text=True, timeout=180)
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertNotIn("Traceback", out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith(f"{module}: error: "), last)
    self.assertIn(expected, last)


if __name__ == "__main__":
  absltest.main()
