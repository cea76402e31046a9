"""The population library's optional parts build, link, dispatch and run.

Two parts are off by default (setup.py's BUILD_OPTIONS; docs/performance_notes.md
says why): the AMX bfloat16 tiles of the bfloat16-input convolution
(TFRL_BUILD_AMX=1) and the per-layer PopulationDeltaConv2D
(TFRL_BUILD_DELTA_CONV2D=1). This test builds the library with both, as
setup.py does, into a temporary directory, and checks that

  * the default library has neither and the option library both
    (`kernel_info()["options"]`, the AMX symbols, the op);
  * the AMX kernel is dispatchable: the option library turns the tiles on
    exactly where the CPU has AMX-BF16, and the AMX tests (test_isa.py's,
    test_population.py's bfloat16-input convolution) pass against it. They
    execute the tiles on a CPU with amx_bf16; elsewhere they run the
    portable path and skip the tile execution, saying that the CPU lacks
    AMX-BF16 (lscpu shows no amx_bf16 on the machines of this project so
    far);
  * the per-layer op's tests (delta_conv2d_cases.py) pass against
    it, none skipped, so its kernels run on the machine that builds them.

The option library is compiled once for the module (`option_library`, a
module-scoped fixture), its objects shared with setup.py's object cache.
"""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

from tfrl import ops
from tfrl.ops import population

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from tests.cpu_features import cpu_flags  # pylint: disable=g-import-not-at-top

# Building the family takes minutes on 2 cores.
pytestmark = pytest.mark.timeout(2400)

OPTIONS = {"TFRL_BUILD_AMX": "1", "TFRL_BUILD_DELTA_CONV2D": "1"}


def load_setup():
  spec = importlib.util.spec_from_file_location("tfrl_setup", os.path.join(ROOT, "setup.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def option_library(tmp_path_factory) -> str:
  """The population library built with every option, once for the module."""
  setup = load_setup()
  family = setup.op_families(OPTIONS)["population"]
  work = tmp_path_factory.mktemp("build-options")
  path = str(work / "_population_ops.so")
  setup.compile_family(family, path, str(work / "objects"), setup.tensorflow_flags())
  return path


def symbols(library: str) -> str:
  return subprocess.run(["nm", "-C", library], capture_output=True, text=True,
                        check=True).stdout


def info_of(library: str) -> str:
  """kernel_info() and whether the per-layer op exists, in a process using `library`."""
  code = ("from tfrl.ops import population as p, population_delta as d; "
          "print(repr((p.kernel_info()['options'], p.kernel_info()['amx'], "
          "d.have_delta_conv2d_op())))")
  env = dict(os.environ, TFRL_POPULATION_OPS_LIBRARY=library, PYTHONPATH=ROOT,
             TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TFRL_POPULATION_NO_AMX", None)
  out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=300, check=True)
  return out.stdout.strip().splitlines()[-1]


class DefaultBuildTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_options_are_off_by_default(self):
    setup = load_setup()
    sources = setup.op_families({})["population"].sources
    for option in setup.BUILD_OPTIONS.values():
      for source in option.sources:
        self.assertNotIn(os.path.join("custom_ops", option.family, source), sources)
    self.assertEqual(population.kernel_info()["options"], ())
    default = os.environ.get("TFRL_POPULATION_OPS_LIBRARY") or ops.library_path("population")
    self.assertNotIn("RunAmxConv", symbols(default))
    self.assertNotIn("PopulationDeltaConv2D", symbols(default))
    with self.assertRaisesRegex(RuntimeError, "TFRL_BUILD_AMX must be 0 or 1, got 'yes'"):
      setup.op_families({"TFRL_BUILD_AMX": "yes"})


class OptionLibraryTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @pytest.fixture(autouse=True)
  def _built(self, option_library):  # pylint: disable=redefined-outer-name
    self.library = option_library

  def test_option_library_has_the_amx_kernel_and_dispatches_it_by_cpu(self):
    library = self.library
    linked = symbols(library)
    self.assertIn("tfrl::population::RunAmxConv", linked)
    self.assertIn("tfrl::population::AmxConv::Compute", linked)
    self.assertIn("PopulationDeltaConv2DOp", linked)
    has_amx = {"amx_tile", "amx_bf16", "avx512_bf16"} <= cpu_flags()
    # The tiles are on exactly where the CPU has them (and the OS grants
    # them, which the Linux kernels of our machines do).
    self.assertEqual(info_of(library), repr((("amx", "delta_conv2d"), has_amx, True)))

  def test_option_library_passes_the_amx_and_per_layer_tests(self):
    library = self.library
    tests = ["tests/ops/delta_conv2d_cases.py",
             "tests/ops/test_isa.py::IsaBuildTest::test_amx_path",
             "tests/ops/test_population.py::BFloat16InputConvTest"]
    env = dict(os.environ, TFRL_POPULATION_OPS_LIBRARY=library, PYTHONPATH=ROOT,
               TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFRL_POPULATION_NO_AMX", None)
    env.pop("TFRL_POPULATION_ISA", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *tests], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=1800)
    self.assertEqual(run.returncode, 0, run.stdout[-4000:] + run.stderr[-2000:])
    # The per-layer cases (collected only when named) and the AMX tests ran.
    self.assertGreaterEqual(int(re.search(r"(\d+) passed", run.stdout).group(1)), 60)
    skipped = re.findall(r"SKIPPED \[\d+\] (\S+):\d+: (.*)", run.stdout)
    per_layer = [s for s in skipped if "delta_conv2d" in s[0]]
    self.assertEqual(per_layer, [], "per-layer op tests skipped against the option build")
    if {"amx_tile", "amx_bf16", "avx512_bf16"} <= cpu_flags():
      self.assertEqual(skipped, [])  # the tiles ran
    else:
      self.assertLen(skipped, 2)  # test_amx_path and the AMX-against-portable test
      for _, reason in skipped:
        self.assertNotIn("built without", reason)
        self.assertIn("AMX", reason)
      print("\n[population kernels] the AMX option builds and dispatches; its tiles did not "
            "execute: this CPU lacks AMX-BF16 (no amx_bf16 in lscpu)")
    print("\n" + run.stdout[-1500:])


if __name__ == "__main__":
  tf.test.main()
