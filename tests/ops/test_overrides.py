"""The environment variables that still change what runs are documented
overrides (tfrl/ops/overrides.py), read there alone and logged when set."""

import os
import subprocess
from unittest import mock

from absl.testing import absltest

from tfrl.ops import overrides

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class OverridesTest(absltest.TestCase):

  def test_a_set_override_is_read_and_logged_once(self):
    overrides._reported.discard("TFRL_ALE_NO_SIMD")  # pylint: disable=protected-access
    with mock.patch.dict(os.environ, {"TFRL_ALE_NO_SIMD": "1"}):
      with self.assertLogs(level="WARNING") as logs:
        self.assertEqual(overrides.get("TFRL_ALE_NO_SIMD"), "1")
        overrides.get("TFRL_ALE_NO_SIMD")
    self.assertLen(logs.output, 1)
    self.assertIn("environment override TFRL_ALE_NO_SIMD=1: ALE's observation pipeline "
                  "runs its portable builds", logs.output[0])
    # The C++ library acts on TFRL_ALE_NO_SIMD set to anything, "" too: so is it read.
    with mock.patch.dict(os.environ, {"TFRL_ALE_NO_SIMD": ""}):
      self.assertEqual(overrides.get("TFRL_ALE_NO_SIMD"), "")
    with mock.patch.dict(os.environ, {"TFRL_POPULATION_ISA": ""}):
      self.assertIsNone(overrides.get("TFRL_POPULATION_ISA"))

  def test_only_documented_variables_are_overrides(self):
    with self.assertRaisesRegex(ValueError, "TFRL_MUJOCO_OPS is not a documented override"):
      overrides.get("TFRL_MUJOCO_OPS")
    for variable in overrides.OVERRIDES:
      self.assertIn(variable, overrides.__doc__)

  def test_tfrl_reads_its_variables_only_here(self):
    # Elsewhere tfrl only hands its environment to a child (recording) or sets
    # Ray's own settings: no TFRL_ variable is read outside this module.
    found = subprocess.run(["grep", "-rn", "os.environ\\|getenv", "tfrl"], cwd=ROOT,
                           capture_output=True, text=True).stdout.splitlines()
    self.assertNotEmpty(found)
    elsewhere = [line for line in found if not line.startswith("tfrl/ops/overrides.py:")]
    for line in elsewhere:
      self.assertNotIn("TFRL_", line)
      self.assertNotRegex(line, r"os\.environ(\.get)?\W+[\"']TFRL")


if __name__ == "__main__":
  absltest.main()
