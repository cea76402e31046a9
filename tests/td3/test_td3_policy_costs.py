"""benchmarks/td3_policy_costs.py on a short pruned Pendulum run: the bytes it
reports are the SavedModels' on disk, the packed policy is smaller and acts
the same, a busy machine and a run without policies are refused. No timing
is asserted."""

import json
import os
import subprocess
import sys

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _ROOT)

from tests import load_average  # pylint: disable=g-import-not-at-top
from tests.td3 import short_runs  # pylint: disable=g-import-not-at-top


def _costs(*args):
  return subprocess.run([sys.executable, "benchmarks/td3_policy_costs.py", *args], cwd=_ROOT,
                        capture_output=True, text=True, timeout=600)


def _bytes(path):
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


class TD3PolicyCostsTest(short_runs.PrunedPendulumRunTest):

  LAYER_FLAGS = ("--dense_layer=pruned", "--target_sparsity=0.9")

  def test_bytes_and_the_same_actions(self):
    output = os.path.join(self._tmp.name, "costs.json")
    done = _costs(f"--logdirs={self.run_dir}", "--rounds=1", "--calls=20", "--warmup=5",
                  f"--load_file={load_average.write(self._tmp.name, 0.0)}", f"--output={output}")
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    with open(output) as f:
      record = json.load(f)
    live, packed = record["rows"]
    self.assertEqual((live["policy"], packed["policy"]), ("policy", "policy_compressed"))
    for row in (live, packed):
      self.assertEqual(row["run"], "pruned")
      path = os.path.join(self.run_dir, row["policy"])
      self.assertEqual(row["variables_bytes"], _bytes(os.path.join(path, "variables")))
      self.assertEqual(row["savedmodel_bytes"], _bytes(path))
      self.assertLen(row["batch1_micros_rounds"], 1)
      self.assertLess(row["max_action_difference_to_other"], 1e-5)
    # 90 % of the kernels pruned: the packed weights take far fewer bytes.
    self.assertLess(packed["variables_bytes"], 0.5 * live["variables_bytes"])
    self.assertEqual(record["loads"][0]["before"]["load_average_start"][0], 0.0)

  def test_refuses_a_busy_machine_and_a_run_without_policies(self):
    busy = _costs(f"--logdirs={self.run_dir}", "--settle_seconds=0",
                  f"--load_file={load_average.write(self._tmp.name, 64.0)}",
                  f"--output={os.path.join(self._tmp.name, 'busy.json')}")
    self.assertNotEqual(busy.returncode, 0)
    self.assertIn("refused: round 0 not run", busy.stderr)
    self.assertFalse(os.path.exists(os.path.join(self._tmp.name, "busy.json")))
    empty = _costs(f"--logdirs={self._tmp.name}")
    self.assertNotEqual(empty.returncode, 0)
    self.assertIn("has no policy/ SavedModel", empty.stderr)


if __name__ == "__main__":
  absltest.main()
