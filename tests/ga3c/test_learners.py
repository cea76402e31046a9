"""GA3C's lag-correcting learners on the real queues: what a segment carries,
the a3c loss against its formula, and a short run of each learner."""

import os
import subprocess
import sys
import tempfile
import threading

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import networks
from tfrl.envs import EnvProtocol
from tfrl.envs.make import make_env
from tfrl.ga3c import learner as learner_lib
from tfrl.ga3c.agents import AgentPool
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import Queues

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_T = 6


def _net(num_actions, seed=0):
  tf.random.set_seed(seed)
  net = networks.ActorCritic(num_actions, networks.MLPTorso([16]))
  net(tf.zeros([1, 4]))
  return net


class SegmentTest(tf.test.TestCase):
  test_session = None

  def test_segment_carries_the_predictors_log_probs_and_version(self):
    env = make_env(EnvProtocol(env="CartPole-v1"), 3, seed=1)
    queues = Queues(obs_shape=env.observation_shape, obs_dtype=env.observation_dtype,
                    num_agents=1, envs_per_agent=3, t_max=_T, prediction_capacity=8,
                    training_capacity=4)
    counters = {k: tf.Variable(0, dtype=tf.int64) for k in (
        "env_steps", "episodes", "predictions", "prediction_batches")}
    net = _net(env.num_actions)
    version = tf.Variable(7, dtype=tf.int64)
    agents = AgentPool(env, queues, num_agents=1, envs_per_agent=3, t_max=_T,
                       counters=counters)
    predictor = Predictor(net, queues, batch_size=8, counters=counters, version=version)
    stop = threading.Event()

    def serve():
      while not stop.is_set():
        try:
          predictor.predict()
        except (tf.errors.OutOfRangeError, tf.errors.CancelledError):
          return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
      agents.run_segment(tf.constant(0))
    finally:
      stop.set()
      queues.close()
      thread.join(10)
    segment = queues.training.dequeue_many(3)
    self.assertEqual(segment["behaviour_log_prob"].dtype, tf.float32)
    self.assertEqual(segment["version"].dtype, tf.int64)
    self.assertAllEqual(segment["version"], np.full([3, _T], 7))
    obs = tf.reshape(segment["obs"][:, :_T], [3 * _T, -1])
    logits, _ = net(obs)
    expected = tf.gather(tf.nn.log_softmax(logits), tf.reshape(segment["action"], [-1]),
                         axis=-1, batch_dims=1)
    self.assertAllClose(segment["behaviour_log_prob"], tf.reshape(expected, [3, _T]),
                        atol=1e-5)
    self.assertTrue(np.all(segment["behaviour_log_prob"].numpy() < 0.0))


class A3CLossOnBatchTest(tf.test.TestCase):
  test_session = None

  def test_a3c_learner_loss_is_the_papers_formula(self):
    # The learner's a3c loss on a fixed batch, against the formula computed here
    # in numpy from the network's outputs: n-step returns, -log pi * advantage,
    # entropy, squared error; rewards clipped to [-1, 1], summed.
    rng = np.random.default_rng(3)
    net = _net(2, seed=3)
    batch = {"obs": rng.standard_normal((2, _T + 1, 4)).astype(np.float32),
             "action": rng.integers(0, 2, (2, _T)).astype(np.int32),
             "reward": rng.choice([-3.0, 0.0, 1.0], (2, _T)).astype(np.float32),
             "done": rng.uniform(size=(2, _T)) < 0.2}
    config = learner_lib.LearnerConfig(discount=0.9, entropy_beta=0.01, value_coef=0.5)
    loss, _ = learner_lib.Learner(net, None, config).loss(batch)
    logits, values = (x.numpy() for x in net(batch["obs"].reshape(-1, 4)))
    logits, values = logits.reshape(2, _T + 1, 2), values.reshape(2, _T + 1)
    total = 0.0
    for b in range(2):
      ret = values[b, _T]
      for t in reversed(range(_T)):
        ret = np.clip(batch["reward"][b, t], -1, 1) + 0.9 * (0.0 if batch["done"][b, t] else ret)
        probs = np.exp(logits[b, t]) / np.exp(logits[b, t]).sum()
        adv = ret - values[b, t]
        total += (-np.log(probs[batch["action"][b, t]]) * adv
                  + 0.01 * np.sum(probs * np.log(probs)) + 0.5 * adv ** 2)
    self.assertAllClose(loss, total, rtol=1e-5)


class APPOAnchorTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  @parameterized.parameters(("learner", 0.0), ("behaviour", 1.0))
  def test_clip_range_is_centred_on_the_anchor(self, anchor, clipped):
    # The behaviour policy gave each taken action probability 0.01, far from
    # the learner's: anchored at the learner, the first step's ratios are all 1
    # (nothing clipped); anchored at the behaviour policy, all are clipped.
    rng = np.random.default_rng(5)
    net = _net(2, seed=5)
    batch = {"obs": rng.standard_normal((3, _T + 1, 4)).astype(np.float32),
             "action": rng.integers(0, 2, (3, _T)).astype(np.int32),
             "reward": rng.uniform(-1, 1, (3, _T)).astype(np.float32),
             "done": np.zeros((3, _T), bool),
             "behaviour_log_prob": np.full((3, _T), np.log(0.01), np.float32),
             "version": np.zeros((3, _T), np.int64)}
    from tfrl import optimizers  # pylint: disable=import-outside-toplevel
    config = learner_lib.LearnerConfig(loss="appo", appo_anchor=anchor, ppo_clip=0.2,
                                       loss_reduction="mean")
    metrics = learner_lib.Learner(net, optimizers.Adam(1e-3), config).train(batch)
    self.assertAllClose(metrics["clip_fraction"], clipped)


def _batch(seed, segments=4):
  rng = np.random.default_rng(seed)
  return {"obs": rng.standard_normal((segments, _T + 1, 4)).astype(np.float32),
          "action": rng.integers(0, 2, (segments, _T)).astype(np.int32),
          "reward": rng.uniform(-2, 2, (segments, _T)).astype(np.float32),
          "done": rng.uniform(size=(segments, _T)) < 0.2,
          "behaviour_log_prob": np.log(rng.uniform(0.2, 0.8, (segments, _T))).astype(np.float32),
          "version": np.zeros((segments, _T), np.int64)}


def _numpy_vtrace(batch, net, discount, lambda_):
  """V-trace by its definition (IMPALA sec. 4.1), clips 1, from the net's outputs."""
  segments = batch["action"].shape[0]
  logits, values = net(batch["obs"].reshape(segments * (_T + 1), 4))
  logits = logits.numpy().reshape(segments, _T + 1, -1)
  values = values.numpy().reshape(segments, _T + 1)
  log_pi = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  vs, adv = np.zeros((segments, _T)), np.zeros((segments, _T))
  for b in range(segments):
    taken = log_pi[b, np.arange(_T), batch["action"][b]]
    rho = np.exp(taken - batch["behaviour_log_prob"][b])
    reward = np.clip(batch["reward"][b], -1, 1)
    gamma = discount * (1.0 - batch["done"][b])
    for s in range(_T):
      total = values[b, s]
      for t in range(s, _T):
        weight = np.prod(gamma[s:t]) * np.prod(lambda_ * np.minimum(1.0, rho[s:t]))
        delta = min(1.0, rho[t]) * (reward[t] + gamma[t] * values[b, t + 1] - values[b, t])
        total += weight * delta
      vs[b, s] = total
    for s in range(_T):
      following = vs[b, s + 1] if s + 1 < _T else values[b, _T]
      adv[b, s] = min(1.0, rho[s]) * (reward[s] + gamma[s] * following - values[b, s])
  return vs, adv


class VTraceTargetsTest(tf.test.TestCase):
  test_session = None

  def test_batch_targets_are_vtrace_under_the_arrival_network(self):
    net, batch = _net(2, seed=3), _batch(3)
    config = learner_lib.LearnerConfig(loss="appo", vtrace_targets="batch", discount=0.9,
                                       vtrace_lambda=0.95, loss_reduction="mean")
    from tfrl import optimizers  # pylint: disable=import-outside-toplevel
    fixed = learner_lib.Learner(net, optimizers.Adam(1e-3), config)._arrival(batch)
    vs, adv = _numpy_vtrace(batch, net, 0.9, 0.95)
    self.assertAllClose(fixed["vs"], vs, rtol=1e-4, atol=1e-5)
    self.assertAllClose(fixed["pg_advantages"], adv, rtol=1e-4, atol=1e-5)

  def test_batch_targets_stay_fixed_through_the_epochs_and_step_targets_move(self):
    from tfrl import optimizers  # pylint: disable=import-outside-toplevel
    for targets in ("step", "batch"):
      net, batch = _net(2, seed=4), _batch(4)
      config = learner_lib.LearnerConfig(loss="appo", vtrace_targets=targets, epochs=3,
                                         loss_reduction="mean")
      learner = learner_lib.Learner(net, optimizers.Adam(0.05), config)
      arrival = np.exp(learner._arrival(batch)["anchor_log_prob"]
                       - batch["behaviour_log_prob"]).mean()
      # The third pass's importance weights: the arrival network's with fixed
      # targets; the trained network's (a large step size moved it) otherwise.
      last = learner.train(batch)["rho_mean"].numpy()
      if targets == "batch":
        self.assertAllClose(last, arrival, rtol=1e-6)
      else:
        self.assertNotAllClose(last, arrival, rtol=1e-3)


class ShortRunTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  @parameterized.parameters("a3c", "vtrace", "appo")
  def test_learner_logs_its_policy_lag(self, loss):
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    extra = ["--epochs=2", "--minibatches=2"] if loss != "a3c" else []
    result = subprocess.run(
        [sys.executable, "-m", "tfrl.ga3c", "--preset=ga3c_cartpole", f"--loss={loss}",
         "--t_max=8", "--training_min_batch_size=32", "--max_frames=3000", "--stats_every=1",
         "--checkpoint_every=0", f"--logdir={logdir}", *extra],
        cwd=_REPO, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    lines = [l for l in result.stderr.splitlines() if "| lag " in l]
    self.assertNotEmpty(lines, result.stderr[-3000:])
    lag = float(lines[-1].split("| lag ")[1].split()[0])
    self.assertGreaterEqual(lag, 0.0)
    tags = set()
    for name in os.listdir(logdir):
      if name.startswith("events.out"):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(logdir, name)):
          tags.update(v.tag for v in event.summary.value)
    self.assertContainsSubset({"loss/lag_mean", "loss/lag_max"}, tags)


if __name__ == "__main__":
  tf.test.main()
