"""Every ISA build of the population kernels runs, and which one ran is asserted.

Each kernel (GEMM, convolution, the incremental ops) is compiled for AVX-512,
AVX2 + FMA and the SSE baseline; TFRL_POPULATION_ISA forces one build per
process. Each test below runs a fixed workload in a subprocess with one build
forced, checks from PopulationKernelInfo's call counts that every op family
ran on that build and on no other, and compares the outputs with those of
the default build. A build this CPU cannot run is skipped with the reason
(read from /proc/cpuinfo, not from the op library), never compared with
itself.
"""

import json
import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.ops import population
from tfrl.ops import population_delta as delta


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from tests.cpu_features import cpu_flags  # pylint: disable=g-import-not-at-top

# The CPU flags each build's target attribute needs.
BUILD_FLAGS = {
    "avx512": ("avx512f", "avx512dq", "avx512bw", "avx2", "fma"),
    "avx2": ("avx2", "fma"),
    "sse": (),
}


def missing_flags(isa):
  return [f for f in BUILD_FLAGS[isa] if f not in cpu_flags()]


def _calls():
  return population.kernel_info()["calls"]


def _spent(before, after):
  return {k: after[k] - before[k] for k in after}


def _workload():
  """Fixed inputs through every population op family and kernel path.

  Returns (outputs {name: array}, {family: {path: op calls}}, kernel_info).
  """
  rng = np.random.default_rng(20)
  out, families = {}, {}

  before = _calls()
  # Dense rows: one row (streamed, scalar tail), 5 rows (K-chunked), many
  # rows with M > 1 (register-blocked, row and column tails), bfloat16.
  for name, (b, m, k, n, p) in {"streamed": (1, 1, 70, 75, 2), "chunked": (5, 1, 300, 75, 2),
                                "blocked": (13, 9, 40, 37, 3)}.items():
    x = rng.standard_normal((b, m, k)).astype(np.float32)
    w = rng.standard_normal((p, k, n)).astype(np.float32)
    index = rng.integers(0, p, b).astype(np.int32)
    bias = rng.standard_normal((p, n)).astype(np.float32)
    out["matmul_" + name] = population.population_matmul_op(x, w, index, bias=bias,
                                                            relu=True).numpy()
    out["matmul_bf16_" + name] = population.population_matmul_op(
        x, tf.cast(w, tf.bfloat16), index).numpy()
  frames = rng.integers(0, 256, (3, 20, 20, 4)).astype(np.uint8)
  w = rng.standard_normal((2, 8 * 8 * 4, 16)).astype(np.float32)
  out["conv_uint8"] = population.population_conv2d_op(
      frames, w, [0, 1, 1], kernel_size=8, stride=4, input_scale=1 / 255).numpy()
  out["conv_bf16_input"] = population.population_conv2d_op(
      frames, tf.cast(w, tf.bfloat16), [1, 0, 1], kernel_size=8, stride=4, input_scale=1 / 255,
      input_dtype="bfloat16").numpy()
  families["gemm"] = _spent(before, _calls())

  before = _calls()
  # Incremental: a convolution and a dense layer (runs of one network), bf16.
  x_prev = rng.integers(0, 256, (6, 12, 12, 2)).astype(np.uint8)
  w = rng.standard_normal((2, 4 * 4 * 2, 24)).astype(np.float32)
  wd = rng.standard_normal((2, 6 * 6 * 8, 70)).astype(np.float32)
  index = np.array([1, 1, 1, 0, 1, 1], np.int32)
  acc = np.zeros((6, 5, 5, 24), np.float32)
  dense_prev = np.zeros((6, 6, 6, 8), np.float32)
  dacc = np.zeros((6, 1, 1, 70), np.float32)
  fresh = np.ones(6, bool)
  for step in range(3):
    x = x_prev.copy()
    x[:, step:step + 3, 2:5, :] = rng.integers(0, 256, (6, 3, 3, 2))
    acc = delta.population_delta_conv2d_op(x, x_prev, acc, w, index, fresh, kernel_size=4,
                                           stride=2, input_scale=1 / 255).numpy()
    dense = np.maximum(rng.standard_normal((6, 6, 6, 8)), 0).astype(np.float32)
    dacc = delta.population_delta_conv2d_op(dense, dense_prev, dacc, tf.cast(wd, tf.bfloat16),
                                            index, fresh, kernel_size=6).numpy()
    out[f"delta_conv_{step}"], out[f"delta_dense_{step}"] = acc, dacc
    x_prev, dense_prev, fresh = x, dense, np.zeros(6, bool)
  # The whole-network op.
  kernels = [rng.standard_normal((2, 4 * 4 * 2, 8)).astype(np.float32) / 4,
             rng.standard_normal((2, 5 * 5 * 8, 5)).astype(np.float32) / 5]
  biases = [rng.standard_normal((2, 8)).astype(np.float32) * 0.3,
            rng.standard_normal((2, 5)).astype(np.float32)]
  state = [np.zeros((6, 5, 5, 8), np.float32), np.zeros((6, 1, 1, 5), np.float32)]
  obs_prev, fresh = x_prev, np.ones(6, bool)
  for step in range(3):
    obs = obs_prev.copy()
    obs[:, 4:7, step:step + 2, :] = rng.integers(0, 256, (6, 3, 2, 2))
    logits, state = delta.population_delta_net_op(
        obs, obs_prev, state, kernels, biases, index, fresh, kernel_sizes=[4, 5],
        strides=[2, 1], relus=[True], input_scale=1 / 255)
    state = [s.numpy() for s in state]
    out[f"net_logits_{step}"] = logits.numpy()
    obs_prev, fresh = obs, np.zeros(6, bool)
  families["delta"] = _spent(before, _calls())
  return out, families, population.kernel_info()


def _run_workload(tmpdir, isa=None):
  """The workload in a fresh process (TFRL_POPULATION_ISA=isa if given)."""
  out = os.path.join(tmpdir, f"workload_{isa or 'default'}.npz")
  code = ("import json, numpy as np, sys; sys.path.insert(0, %r); "
          "from tests.ops import test_isa as t; "
          "arrays, families, info = t._workload(); np.savez(%r, **arrays); "
          "print('INFO' + json.dumps(dict(families=families, info=info)))") % (ROOT, out)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  env.pop("TFRL_POPULATION_ISA", None)
  if isa is not None:
    env["TFRL_POPULATION_ISA"] = isa
  proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                        text=True, timeout=600)
  if proc.returncode != 0:
    raise AssertionError(f"workload with TFRL_POPULATION_ISA={isa} failed:\n"
                         f"{proc.stderr[-3000:]}")
  line = [l for l in proc.stdout.splitlines() if l.startswith("INFO")][-1]
  report = json.loads(line[4:])
  with np.load(out) as f:
    arrays = {k: f[k] for k in f.files}
  return arrays, report


_DEFAULT = {}  # the default build's workload, run once


class IsaBuildTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_reports_what_the_cpu_runs(self):
    info = population.kernel_info()
    want = tuple(isa for isa in ("avx512", "avx2", "sse") if not missing_flags(isa))
    if not cpu_flags():
      self.skipTest("no /proc/cpuinfo to check the op's CPU detection against")
    self.assertEqual(info["cpu_isas"], want)
    if "TFRL_POPULATION_ISA" not in os.environ:
      self.assertEqual(info["isa"], want[0])  # the widest by default
      print(f"\n[population kernels] this CPU runs {', '.join(want)}; default build "
            f"{info['isa']}; AMX {'on' if info['amx'] else 'off'}")

  @parameterized.parameters("avx512", "avx2", "sse")
  def test_build_runs_and_matches_the_default(self, isa):
    missing = missing_flags(isa)
    if missing:
      print(f"\n[population kernels] SKIPPED the {isa} build: this CPU lacks "
            f"{', '.join(missing)}")
      self.skipTest(f"this CPU lacks {', '.join(missing)}, so the {isa} build cannot run")
    tmp = self.get_temp_dir()
    got, report = _run_workload(tmp, isa)
    info = report["info"]
    self.assertEqual(info["isa"], isa)
    self.assertEqual(sorted(info["gemm_calls"]), ["k_chunked", "streamed", "tiles"])
    for strategy, count in info["gemm_calls"].items():
      self.assertGreater(count, 0, f"the GEMM's {strategy} strategy did not run on {isa}")
    if isa != "avx512":
      self.assertFalse(info["amx"])  # AMX tiles run only beside the AVX-512 build
    for family, calls in report["families"].items():
      self.assertGreater(calls[isa], 0, f"{family} ops did not run on the {isa} build")
      others = {p: c for p, c in calls.items()
                if p != isa and c and not (p == "amx" and info["amx"])}
      self.assertEqual(others, {}, f"{family} ops ran on other paths than {isa}")
    print(f"\n[population kernels] ran the {isa} build: {report['families']}; "
          f"GEMM strategies {info['gemm_calls']}")
    if "default" not in _DEFAULT:
      _DEFAULT["default"] = _run_workload(tmp)
    default, default_report = _DEFAULT["default"]
    self.assertEqual(sorted(got), sorted(default))
    # Builds differ in vector width and FMA (the baseline has none), so sums
    # round differently; the values agree to float32 accuracy.
    for name in sorted(got):
      scale = max(1.0, float(np.abs(default[name]).max()))
      self.assertAllClose(got[name], default[name], rtol=1e-5, atol=1e-5 * scale, msg=name)
    self.assertEqual(default_report["info"]["isa"], population.kernel_info()["cpu_isas"][0])

  def test_unknown_build_is_refused(self):
    code = ("import sys; sys.path.insert(0, %r); import numpy as np, tensorflow as tf; "
            "from tfrl.ops import population as p\n"
            "try:\n  p.population_matmul_op(np.ones((1, 1, 2), np.float32), "
            "np.ones((1, 2, 3), np.float32), [0])\n"
            "except tf.errors.InvalidArgumentError as e:\n  print('REFUSED', e.message)\n"
            "try:\n  p.kernel_info()\n"
            "except tf.errors.InvalidArgumentError as e:\n  print('INFO REFUSED')\n") % ROOT
    env = dict(os.environ, TFRL_POPULATION_ISA="avx9000", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    self.assertIn("REFUSED", proc.stdout)
    self.assertIn("TFRL_POPULATION_ISA must be one of auto, avx512, avx2, sse", proc.stdout)
    self.assertIn("'avx9000'", proc.stdout)
    self.assertIn("INFO REFUSED", proc.stdout)

  def test_build_the_cpu_lacks_is_refused(self):
    lacking = [isa for isa in ("avx512", "avx2") if missing_flags(isa)]
    if not lacking:
      print("\n[population kernels] SKIPPED refusing a build: this CPU runs all three")
      self.skipTest("this CPU runs every build, so none can be refused here")
    code = ("import sys; sys.path.insert(0, %r); import numpy as np, tensorflow as tf; "
            "from tfrl.ops import population as p\n"
            "try:\n  p.population_matmul_op(np.ones((1, 1, 2), np.float32), "
            "np.ones((1, 2, 3), np.float32), [0])\n"
            "except tf.errors.InvalidArgumentError as e:\n  print('REFUSED', e.message)\n") % ROOT
    env = dict(os.environ, TFRL_POPULATION_ISA=lacking[0], TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    self.assertIn("REFUSED", proc.stdout)
    self.assertIn("which this CPU cannot run", proc.stdout)

  def test_amx_path(self):
    """The bfloat16-input convolution runs in AMX tiles where the CPU has them."""
    info = population.kernel_info()
    has_amx = {"amx_tile", "amx_bf16", "avx512_bf16"} <= cpu_flags()
    before = _calls()
    x = np.random.default_rng(1).standard_normal((2, 9, 9, 3)).astype(np.float32)
    w16 = tf.cast(np.random.default_rng(2).standard_normal((2, 27, 16)), tf.bfloat16)
    population.population_conv2d_op(x, w16, [0, 1], kernel_size=3, stride=1,
                                    input_dtype="bfloat16")
    spent = _spent(before, _calls())
    if not info["amx"]:
      # The portable path ran (rounding, then the GEMM build), not AMX.
      self.assertEqual(spent["amx"], 0)
      self.assertEqual(spent[info["isa"]], 1)
      reason = ("this CPU lacks AMX-BF16" if not has_amx else
                "the AMX path is turned off here (TFRL_POPULATION_NO_AMX, a narrower "
                "TFRL_POPULATION_ISA, or the OS denies the tile state)")
      print(f"\n[population kernels] SKIPPED the AMX path: {reason}")
      self.skipTest(f"{reason}; the AMX path cannot run")
    self.assertEqual(spent["amx"], 1)


if __name__ == "__main__":
  tf.test.main()
