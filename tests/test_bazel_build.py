"""The Bazel build (BUILD, WORKSPACE, custom_ops/<family>/BUILD) makes op
libraries that load and run, from the same sources as setup.py, with the
same optional parts off by default: ALE and MuJoCo play the pip build's
episodes, the population library computes."""

import importlib.util
import os
import shutil
import subprocess
import sys
import time

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every wait of the test but `bazel shutdown` shares one clock (the build's
# actions take about 4 minutes on 2 cores), and the test's timeout mark leaves
# room for the shutdown after it: a hung step fails here and the Bazel server
# is still shut down before pytest's timeout would fire.
_BUDGET_SECONDS = 1800
_SHUTDOWN_SECONDS = 120

# Plays a few seeded Pong steps with the library named by TFRL_ALE_OPS_LIBRARY
# and prints a digest of what it saw.
PLAY_ALE = """
import hashlib, numpy as np
from tfrl.envs import AtariEnv
env = AtariEnv("Pong", 2, seed=11)
digest = hashlib.sha256(env.reset().numpy().tobytes())
for t in range(30):
  obs, reward, _, _ = env.step(np.array([t % 6, (t + 3) % 6], np.int32))
  digest.update(obs.numpy().tobytes())
  digest.update(reward.numpy().tobytes())
print(digest.hexdigest())
"""

# The same for HalfCheetah-v5 on the library named by TFRL_MUJOCO_OPS_LIBRARY.
PLAY_MUJOCO = """
import hashlib, numpy as np
from tfrl.envs.mujoco_env import MujocoEnv
env = MujocoEnv("HalfCheetah-v5", 2, seed=11)
digest = hashlib.sha256(env.reset().numpy().tobytes())
for t in range(30):
  obs, reward, _, _ = env.step(np.full((2, 6), 0.1 * (t % 7) - 0.3, np.float32))
  digest.update(obs.numpy().tobytes())
  digest.update(reward.numpy().tobytes())
print(digest.hexdigest())
"""


# The population library's options and one op call, with the library named by
# TFRL_POPULATION_OPS_LIBRARY.
POPULATION = """
from tfrl.ops import population
y = population.population_matmul_op([[[1.0, 2.0]]], [[[3.0], [4.0]]], [0])
print(population.kernel_info()["options"], float(y[0, 0, 0]))
"""


def load_setup():
  spec = importlib.util.spec_from_file_location("tfrl_setup", os.path.join(ROOT, "setup.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def seconds_left(deadline):
  """The timeout of a wait that must end by `deadline` (time.monotonic())."""
  return max(deadline - time.monotonic(), 1.0)


def bazel_sources(bazel, deadline, *defines):
  """The .cc sources of the population library in a Bazel build with `defines`."""
  out = subprocess.run([bazel, "cquery", *defines, "--output=label",
                        "labels(srcs, //custom_ops/population:_population_ops.so)"],
                       cwd=ROOT, capture_output=True, text=True,
                       timeout=seconds_left(deadline), check=True)
  labels = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("//")]
  return sorted(l[2:].replace(":", "/") for l in labels if l.endswith(".cc"))


def play(family, code, deadline, library=None):
  """The digest `code` prints with `family`'s library (the installed one by default)."""
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  if library:
    env[f"TFRL_{family.upper()}_OPS_LIBRARY"] = library
  out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=seconds_left(deadline), check=True)
  return out.stdout.split()[-1]


class BazelBuildTest(tf.test.TestCase):

  @pytest.mark.timeout(_BUDGET_SECONDS + _SHUTDOWN_SECONDS + 180)
  def test_bazel_built_library_loads_and_plays_like_the_pip_build(self):
    deadline = time.monotonic() + _BUDGET_SECONDS
    bazel = shutil.which("bazel")
    self.assertIsNotNone(bazel, "bazel is not installed: apt-get install bazel-bootstrap")
    subprocess.run([sys.executable, "setup.py", "-q", "configure_bazel"], cwd=ROOT,
                   check=True, capture_output=True, timeout=seconds_left(deadline))
    try:
      # -O0 (appended after the rules' -O3): the test is about the build graph,
      # and the optimised objects of the same sources are setup.py's, compiled
      # by the install; -O0 saves about a quarter of the compile time, more on
      # the longest source (population_delta_net.cc: 112 s at -O3, 48 s at -O0).
      build = subprocess.run([bazel, "build", "--per_file_copt=//custom_ops/.*@-O0", "//:ops"],
                             cwd=ROOT, capture_output=True, text=True,
                             timeout=seconds_left(deadline))
      # The optional parts are selected as setup.py selects them.
      setup = load_setup()
      options = [o.bazel for o in setup.BUILD_OPTIONS.values()]
      default_sources = bazel_sources(bazel, deadline)
      option_sources = bazel_sources(bazel, deadline, *options)
    finally:
      # Leave no Bazel server running after the test, whatever happened above.
      subprocess.run([bazel, "shutdown"], cwd=ROOT, capture_output=True,
                     timeout=_SHUTDOWN_SECONDS)
    self.assertEqual(build.returncode, 0, build.stderr[-3000:])
    self.assertEqual(default_sources, sorted(setup.op_families({})["population"].sources))
    every = {variable: "1" for variable in setup.BUILD_OPTIONS}
    self.assertEqual(option_sources, sorted(setup.op_families(every)["population"].sources))
    self.assertGreater(len(option_sources), len(default_sources))
    for family, code in (("ale", PLAY_ALE), ("mujoco", PLAY_MUJOCO)):
      library = os.path.join(ROOT, "bazel-bin", "custom_ops", family, f"_{family}_ops.so")
      self.assertTrue(os.path.exists(library), library)
      self.assertEqual(play(family, code, deadline, library), play(family, code, deadline),
                       family)
    population = os.path.join(ROOT, "bazel-bin", "custom_ops", "population",
                              "_population_ops.so")
    env = dict(os.environ, PYTHONPATH=ROOT, TFRL_POPULATION_OPS_LIBRARY=population)
    out = subprocess.run([sys.executable, "-c", POPULATION], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=seconds_left(deadline),
                         check=True)
    self.assertEqual(out.stdout.split("\n")[-2], "() 11.0")


if __name__ == "__main__":
  tf.test.main()
