"""Every ISA build of the population kernels runs, and which one ran is asserted.

Each kernel (GEMM, convolution, the incremental ops) is compiled for AVX-512,
AVX2 + FMA and the SSE baseline; TFRL_POPULATION_ISA forces one build per
process. Each test below runs a fixed workload in a subprocess with one build
forced, checks that it ran every kernel the library registers (each op and
dtype), that every op family ran on that build and on no other
(PopulationKernelInfo's call counts) and that each GEMM strategy ran, and
compares the outputs with those of the default build. A build this CPU
cannot run is skipped with the reason (read from /proc/cpuinfo, not from the
op library), never compared with itself.
"""

import json
import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tensorflow.python.framework import kernels

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


def registered_kernels():
  """{(op, T, TX)} of every kernel the loaded library registers (None for an
  op without that type attr)."""
  population.load_library()
  found = set()
  for op in ("PopulationMatmul", "PopulationConv2D", "PopulationDeltaNet",
             "PopulationDeltaConv2D"):
    for kernel in kernels.get_registered_kernels_for_op(op).kernel:
      types = {c.name: tf.dtypes.as_dtype(c.allowed_values.list.type[0]).name
               for c in kernel.constraint}
      found.add((op, types.get("T"), types.get("TX")))
  return found


def _delta_net_steps(rng, weight_dtype, obs_dtype, out, name):
  """Three steps of a small network (two convolutions, a dense layer over the
  map and a policy layer): fresh, then incremental with a fresh row."""
  index = np.array([1, 1, 1, 0, 1, 1], np.int32)
  layers = ((4, 2, 8), (3, 1, 24), (3, 1, 70), (1, 1, 5))  # over [12, 12, 2]
  kernels_, biases, c = [], [], 2
  for ks, _, n in layers:
    kernels_.append(tf.cast(rng.standard_normal((2, ks * ks * c, n)) / ks, weight_dtype))
    biases.append(rng.standard_normal((2, n)).astype(np.float32) * 0.3)
    c = n
  shapes = ((5, 5, 8), (3, 3, 24), (1, 1, 70), (1, 1, 5))
  state = [np.zeros((6,) + s, np.float32) for s in shapes]
  obs_prev = rng.integers(0, 256, (6, 12, 12, 2)).astype(np.uint8)
  feed = (lambda o: o) if obs_dtype == "uint8" else (lambda o: o.astype(np.float32) / 255)
  fresh = np.ones(6, bool)
  for step in range(3):
    obs = obs_prev.copy()
    obs[:, 4:7, step:step + 2, :] = rng.integers(0, 256, (6, 3, 2, 2))
    logits, state = delta.population_delta_net_op(
        feed(obs), feed(obs_prev), state, kernels_, biases, index, fresh,
        kernel_sizes=[l[0] for l in layers], strides=[l[1] for l in layers], relus=[True] * 3,
        input_scale=1 / 255 if obs_dtype == "uint8" else 1.0)
    state = [s.numpy() for s in state]
    out[f"{name}_logits_{step}"] = logits.numpy()
    out[f"{name}_acc0_{step}"] = state[0]
    obs_prev = obs
    fresh = np.arange(6) == step  # one row in full, the others incremental


def _workload():
  """Fixed inputs through every population op family, kernel and path.

  Returns (outputs {name: array}, {family: {path: op calls}}, kernel_info,
  the kernels it ran [[op, T, TX]]).
  """
  rng = np.random.default_rng(20)
  out, families, ran = {}, {}, set()

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
  ran |= {("PopulationMatmul", "float32", None), ("PopulationMatmul", "bfloat16", None)}
  # Convolutions: float32 and bfloat16 kernels over uint8 frames and floats;
  # bfloat16-rounded inputs.
  frames = rng.integers(0, 256, (3, 20, 20, 4)).astype(np.uint8)
  w = rng.standard_normal((2, 8 * 8 * 4, 16)).astype(np.float32)
  for wname, weights in (("f32", w), ("bf16", tf.cast(w, tf.bfloat16))):
    for xname, x, scale in (("uint8", frames, 1 / 255),
                            ("float", frames.astype(np.float32) / 255, 1.0)):
      out[f"conv_{wname}_{xname}"] = population.population_conv2d_op(
          x, weights, [0, 1, 1], kernel_size=8, stride=4, input_scale=scale, bias=w[:, 0, :],
          relu=True).numpy()
      ran.add(("PopulationConv2D", weights.dtype.name, "uint8" if xname == "uint8" else
               "float32"))
  out["conv_bf16_input"] = population.population_conv2d_op(
      frames, tf.cast(w, tf.bfloat16), [1, 0, 1], kernel_size=8, stride=4, input_scale=1 / 255,
      input_dtype="bfloat16").numpy()
  families["gemm"] = _spent(before, _calls())

  before = _calls()
  # The whole-network incremental op, for each weight and observation dtype.
  for weight_dtype in ("float32", "bfloat16"):
    for obs_dtype in ("uint8", "float32"):
      _delta_net_steps(rng, weight_dtype, obs_dtype, out, f"net_{weight_dtype}_{obs_dtype}")
      ran.add(("PopulationDeltaNet", weight_dtype, obs_dtype))
  families["delta"] = _spent(before, _calls())
  return out, families, population.kernel_info(), sorted(ran)


def _run_workload(tmpdir, isa=None):
  """The workload in a fresh process (TFRL_POPULATION_ISA=isa if given)."""
  out = os.path.join(tmpdir, f"workload_{isa or 'default'}.npz")
  code = ("import json, numpy as np, sys; sys.path.insert(0, %r); "
          "from tests.ops import test_isa as t; "
          "arrays, families, info, ran = t._workload(); np.savez(%r, **arrays); "
          "print('INFO' + json.dumps(dict(families=families, info=info, ran=ran)))") % (ROOT, out)
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
    # Every kernel the library registers ran on this build (the per-layer
    # delta op only where it is built: tests/ops/delta_conv2d_cases.py).
    ran = {tuple(k) for k in report["ran"]}
    want = {k for k in registered_kernels() if k[0] != "PopulationDeltaConv2D"}
    self.assertEqual(want - ran, set(), f"kernels the {isa} workload did not run")
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
    self.assertIn("TFRL_POPULATION_ISA must be one of auto, amx, avx512, avx2, sse", proc.stdout)
    self.assertIn("'avx9000'", proc.stdout)
    self.assertIn("INFO REFUSED", proc.stdout)

  def test_select_isa_chooses_once_per_process(self):
    # What a replay pins (and --kernel_isa applies): the first choice holds;
    # a bad one chooses nothing; "auto" reports the build that runs.
    code = ("import sys; sys.path.insert(0, %r); import numpy as np\n"
            "from tfrl.ops import population as p\n"
            "def pick(isa):\n"
            "  try:\n    print('PICK', isa, p.select_isa(isa))\n"
            "  except ValueError as e:\n    print('PICK', isa, 'ERROR', e)\n"
            "pick('avx9000'); pick('sse'); pick('avx2'); pick('auto')\n"
            "p.population_matmul_op(np.ones((1, 1, 2), np.float32), np.ones((1, 2, 3), "
            "np.float32), [0])\n"
            "print('RAN', p.kernel_info()['isa'], p.kernel_info()['calls']['sse'])\n") % ROOT
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFRL_POPULATION_ISA", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    lines = [l for l in proc.stdout.splitlines() if l.startswith(("PICK", "RAN"))]
    self.assertEqual(lines[0], "PICK avx9000 ERROR --kernel_isa must be one of auto, amx, "
                     "avx512, avx2, sse, portable, got 'avx9000'.")
    self.assertEqual(lines[1], "PICK sse sse")
    self.assertStartsWith(lines[2], "PICK avx2 ERROR the population kernels of this process "
                          "already run the sse build")
    self.assertEqual(lines[3:], ["PICK auto sse", "RAN sse 1"])

  def test_the_variable_overrides_the_choice_and_is_logged(self):
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from tfrl.ops import population as p\n"
            "print('PICK', p.select_isa('avx2'))\n") % ROOT
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TFRL_POPULATION_ISA="sse")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    self.assertIn("PICK sse", proc.stdout)
    self.assertIn("environment override TFRL_POPULATION_ISA=sse: overrides --kernel_isa",
                  proc.stderr)

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
    """The bfloat16-input convolution runs in AMX tiles where the library has
    them (TFRL_BUILD_AMX=1) and the CPU runs them; elsewhere the portable path
    runs, and the test says why the AMX path did not."""
    info = population.kernel_info()
    has_amx = {"amx_tile", "amx_bf16", "avx512_bf16"} <= cpu_flags()
    if "amx" in info["options"] and not has_amx:
      self.assertFalse(info["amx"])  # never dispatched to tiles the CPU lacks
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
      if "amx" not in info["options"]:
        # Nothing of AMX to run in this library: tests/ops/test_build_options.py
        # runs this test against a library built with TFRL_BUILD_AMX=1.
        return
      if not has_amx:
        reason = "this CPU lacks AMX-BF16 (lscpu: amx_bf16), so the AMX path is not dispatched"
      else:
        reason = ("the AMX path is turned off here (TFRL_POPULATION_NO_AMX, a narrower "
                  "TFRL_POPULATION_ISA, or the OS denies the tile state)")
      print(f"\n[population kernels] SKIPPED running the AMX path: {reason}")
      self.skipTest(f"{reason}; the AMX path cannot run")
    self.assertEqual(spent["amx"], 1)


if __name__ == "__main__":
  tf.test.main()
