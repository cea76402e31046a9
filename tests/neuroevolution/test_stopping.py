"""Stopping GA/ES evaluations: `PipelinedEvaluator.stop()` (Ctrl-C on the CLI:
tests/test_signals.py)."""

import threading

import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import population_net as pn


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


if __name__ == "__main__":
  tf.test.main()
