"""Stopping GA/ES runs: `PipelinedEvaluator.stop()` and Ctrl-C on the CLI."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import population_net as pn

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "tfrl.ga", "--flagfile=flags/ga_cartpole.flags",
         "--generations=100000", "--target_score=100000", f"--logdir={logdir}"],
        cwd=_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
      deadline = time.time() + 300
      for line in proc.stdout:
        if "[ga] gen    2" in line or time.time() > deadline:
          break
      proc.send_signal(signal.SIGINT)
      out, _ = proc.communicate(timeout=120)
    finally:
      if proc.poll() is None:
        proc.kill()
    self.assertEqual(proc.returncode, 0, out[-3000:])
    self.assertIn("stopped by a signal", out)
    self.assertNotIn("Traceback", out)
    state, _ = checkpoint.load(logdir)
    self.assertGreaterEqual(state["generation"], 2)
    self.assertIn(f"holds generation {state['generation']}", out)
    self.assertTrue(os.path.exists(os.path.join(logdir, "elite", "saved_model.pb")))


if __name__ == "__main__":
  tf.test.main()
