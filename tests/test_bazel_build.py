"""The Bazel build (BUILD, WORKSPACE, custom_ops/<family>/BUILD) makes op
libraries that load and run."""

import os
import shutil
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Plays a few seeded Pong steps with the library named by TFRL_ALE_OPS_LIBRARY
# and prints a digest of what it saw.
PLAY = """
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


def play(library=None):
  env = dict(os.environ, PYTHONPATH=ROOT)
  if library:
    env["TFRL_ALE_OPS_LIBRARY"] = library
  out = subprocess.run([sys.executable, "-c", PLAY], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300, check=True)
  return out.stdout.split()[-1]


class BazelBuildTest(tf.test.TestCase):

  def test_bazel_built_library_loads_and_plays_like_the_pip_build(self):
    bazel = shutil.which("bazel")
    self.assertIsNotNone(bazel, "bazel is not installed: apt-get install bazel-bootstrap")
    subprocess.run([sys.executable, "setup.py", "-q", "configure_bazel"], cwd=ROOT,
                   check=True, capture_output=True, timeout=1200)
    build = subprocess.run([bazel, "build", "//:ops"], cwd=ROOT, capture_output=True,
                           text=True, timeout=1800)
    # Leave no Bazel server running after the test.
    subprocess.run([bazel, "shutdown"], cwd=ROOT, capture_output=True, timeout=120)
    self.assertEqual(build.returncode, 0, build.stderr[-3000:])
    library = os.path.join(ROOT, "bazel-bin", "custom_ops", "ale", "_ale_ops.so")
    self.assertTrue(os.path.exists(library))
    self.assertEqual(play(library), play())
    population = os.path.join(ROOT, "bazel-bin", "custom_ops", "population",
                              "_population_ops.so")
    tf.load_op_library(population)  # Loads and registers its ops.


if __name__ == "__main__":
  tf.test.main()
