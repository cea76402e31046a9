"""worker.build_local: the evaluator's process runs the protocol's kernel build."""

import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A fresh process (the build is chosen once per process): making the env alone
# leaves the population kernels unloaded; building the evaluator applies the
# protocol's --kernel_isa ('sse', the baseline every x86-64 CPU runs).
_CODE = """
from tfrl.envs import EnvProtocol, make_env
from tfrl.neuroevolution import population_net, worker
from tfrl.ops import population
protocol = EnvProtocol(env="CartPole-v1", kernel_isa="sse")
make_env(protocol, 1).close()
print("LOADED AFTER make_env", population.loaded())
spec = worker.WorkerSpec(
    env=protocol, network=population_net.NetworkConfig(arch="mlp", hidden=(8,)),
    observation_shape=(4,), num_actions=2, noise_seed=0, noise_size=10_000, capacity=4,
    num_envs=4, slot_groups=2)
evaluator = worker.build_local(spec)
print("ISA", population.active_isa())
evaluator.close()
"""


class BuildLocalTest(tf.test.TestCase):

  def test_the_evaluator_runs_the_protocols_kernel_isa(self):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFRL_POPULATION_ISA", None)
    out = subprocess.run([sys.executable, "-c", _CODE], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    self.assertIn("LOADED AFTER make_env False", out)
    self.assertIn("ISA sse", out)


if __name__ == "__main__":
  tf.test.main()
