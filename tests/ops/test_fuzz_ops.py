"""A fixed-seed sample of tests/fuzz_ops.py: every custom op (population, ALE
and MuJoCo, the last checked against gymnasium's envs) gets random shapes,
dtypes, sizes, indices and values; no call may crash, hang, accept bad input,
reject valid input or return a wrong result."""

import os
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from tests import fuzz_ops  # pylint: disable=g-import-not-at-top
from tests.ops import test_isa  # pylint: disable=g-import-not-at-top

SEED = 20251125


def _bug_report(summary):
  lines = [fuzz_ops.table(summary)]
  for bug in summary["bugs"][:10]:
    lines.append(f"{bug['op']} call {bug['i']}: {bug['outcome']} "
                 f"[{bug.get('mutation') or 'valid'}] "
                 f"{bug.get('message') or bug.get('ended', '')} {bug.get('detail', '')}\n"
                 f"  repro: {bug['repro']}")
  return "\n".join(lines)


class FuzzSampleTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_every_op_sample_has_no_bug(self):
    calls = 60
    summary = fuzz_ops.fuzz(fuzz_ops.available_ops(), calls, seed=SEED, batch=10000,
                            verbose=False)
    print("\n" + fuzz_ops.table(summary))
    self.assertEqual(summary["bugs"], [], _bug_report(summary))
    self.assertContainsSubset(fuzz_ops.ALE_OPS + fuzz_ops.MUJOCO_OPS, summary["per_op"])
    for op, counts in summary["per_op"].items():
      self.assertEqual(counts["calls"], calls, op)
      self.assertGreater(counts["ok"], 0, f"{op}: no valid input in the sample")
      if not op.endswith("kernel_info"):
        self.assertGreater(counts["rejected"], 0, f"{op}: no bad input in the sample")

  def test_population_ops_on_every_isa_build(self):
    # The same kind of sample on each other build this CPU runs (edge shapes
    # reach each build's tails and blocks).
    others = [isa for isa in ("avx2", "sse") if not test_isa.missing_flags(isa)]
    if not others:
      self.skipTest("this CPU runs no build besides the default one")
    for isa in others:
      env = dict(os.environ, TFRL_POPULATION_ISA=isa)
      summary = fuzz_ops.fuzz(fuzz_ops.available_ops(fuzz_ops.POPULATION_OPS), 20,
                              seed=SEED + 1, batch=10000, env=env, verbose=False)
      print(f"\nTFRL_POPULATION_ISA={isa}\n" + fuzz_ops.table(summary))
      self.assertEqual(summary["bugs"], [], f"{isa}:\n" + _bug_report(summary))

  def test_crashes_and_hangs_are_counted(self):
    # A call that kills its process (SIGSEGV) or never returns is counted,
    # and the fuzzer goes on with the next call.
    summary = fuzz_ops.fuzz(["selftest_crash"], 2, seed=SEED, batch=10, verbose=False)
    self.assertEqual(summary["per_op"]["selftest_crash"]["crash"], 2)
    self.assertEqual(summary["per_op"]["selftest_crash"]["calls"], 2)
    self.assertIn("SIGSEGV", summary["bugs"][0]["ended"])
    self.assertIn("--repro=selftest_crash:0", summary["bugs"][0]["repro"])
    summary = fuzz_ops.fuzz(["selftest_hang"], 1, seed=SEED, timeout=3, verbose=False)
    self.assertEqual(summary["per_op"]["selftest_hang"]["hang"], 1)


if __name__ == "__main__":
  tf.test.main()
