"""Stopping GA/ES runs: `PipelinedEvaluator.stop()` and Ctrl-C on the CLI."""

import os
import signal
import sys
import threading

import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import population_net as pn

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests import processes  # pylint: disable=g-import-not-at-top


class EvaluatorStopTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_stop_ends_a_running_evaluation(self):
    env = GymEnv("CartPole-v1", 4, seed=0)
    layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=(8,)),
                            env.observation_shape, env.num_actions)
    net = pn.PopulationNetwork(layout, 4)
    net.load(np.zeros((4, layout.dim), np.float32))
    evaluator = evaluation.PipelinedEvaluator(env, net, num_groups=2)
    evaluator.evaluate(1, 1)  # traced, so that the stop below lands mid-run.
    # Far more episodes than can finish before the timer fires.
    timer = threading.Timer(0.5, evaluator.stop)
    timer.start()
    with self.assertRaises(evaluation.Stopped):
      evaluator.evaluate(4, 100_000)
    timer.join()
    with self.assertRaises(evaluation.Stopped):  # and it stays stopped.
      evaluator.evaluate(1, 1)
    env.close()


class CtrlCTest(tf.test.TestCase):

  test_session = None

  def test_ga_ctrl_c_keeps_checkpoint_and_exports(self):
    logdir = os.path.join(self.get_temp_dir(), "ga")
    with processes.cli(["-u", "-m", "tfrl.ga", "--flagfile=flags/ga_cartpole.flags",
                        "--generations=100000", "--target_score=100000",
                        f"--logdir={logdir}"]) as proc:
      processes.wait_for_line(proc, "[ga] gen    2", timeout=300)
      out = processes.stop(proc, signal.SIGINT, timeout=120)
    self.assertEqual(proc.returncode, 0, out[-3000:])
    self.assertIn("stopped by a signal", out)
    self.assertNotIn("Traceback", out)
    state, _ = checkpoint.load(logdir)
    self.assertGreaterEqual(state["generation"], 2)
    self.assertIn(f"holds generation {state['generation']}", out)
    self.assertTrue(os.path.exists(os.path.join(logdir, "elite", "saved_model.pb")))


if __name__ == "__main__":
  tf.test.main()
