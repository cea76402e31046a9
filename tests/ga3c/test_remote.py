"""GA3C's remote env runners (Ray actors) feeding the learner's training queue.

One Ray instance for the module, started in this process on the loopback
address (`--ray_address=local`'s helper) under a Ray folder of its own; at
the end no process that mentions that folder may be left. The command-line
run starts (and must stop) a Ray instance of its own.
"""

import os
import re
import shutil
import signal
import sys
import tempfile
import time

import numpy as np
import pytest
import tensorflow as tf

from tfrl import ray_cluster
from tfrl.envs import EnvProtocol
from tfrl.envs.make import make_env
from tfrl.ga3c import GA3CConfig, LearnerConfig
from tfrl.ga3c import network as network_lib
from tfrl.ga3c.agents import AgentPool
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import Queues
from tfrl.ga3c.remote_feed import RemoteFeed
from tfrl.ga3c.remote_runner import RemoteRunner, RunnerSpec
from tfrl.ga3c.workers import Worker

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests import processes  # pylint: disable=g-import-not-at-top
from tests.ga3c import runs  # pylint: disable=g-import-not-at-top

_PONG = EnvProtocol(game="PongNoFrameskip-v4")
_CARTPOLE = EnvProtocol(env="CartPole-v1")
_T = 5


def _config(protocol, **kwargs):
  """Tiny runners: 1 agent x 2 env slots each, half a CPU, no local agents."""
  defaults = dict(protocol=protocol, agents=0, max_agents=1, envs_per_agent=2, t_max=_T,
                  prediction_batch_size=8, training_queue_size=8, ray_address="local",
                  ray_runners=2, ray_runner_cpus=0.5, ray_broadcast_every=1,
                  learner=LearnerConfig(loss="vtrace", loss_reduction="mean"),
                  learning_rate=1e-3,
                  checkpoint_every=0, stats_every=1, logdir="/nonexistent")
  defaults.update(kwargs)
  return GA3CConfig(**defaults)


def _wait_for(condition, timeout, what, between=None):
  """Polls `condition()` (calling `between()` in between) until it is truthy; its value."""
  deadline = time.monotonic() + timeout
  while True:
    value = condition()
    if value:
      return value
    if time.monotonic() > deadline:
      raise AssertionError(f"{what}: not within {timeout:g} s")
    if between is not None:
      between()
    time.sleep(0.1)


def _ray_processes(marker: str):
  """PIDs of other processes whose command line or environment names `marker`."""
  return sorted(processes.mentioning(marker, environ=True))


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().split(")")[-1].split()[0] != "Z"
  except OSError:
    return False


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
  # A short folder: Ray's socket paths under it must stay within 107 bytes.
  folder = tempfile.mkdtemp(prefix="tr", dir="/tmp")
  old = os.environ.get("RAY_TMPDIR")
  os.environ["RAY_TMPDIR"] = folder
  ray, started = ray_cluster.connect("local", object_store_memory=256 << 20,
                                     log_to_driver=False)
  assert started
  # Every node on loopback, also in a process that imported Ray before.
  assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}, ray.nodes()
  yield ray
  ray_cluster.disconnect(ray, started)
  if old is None:
    os.environ.pop("RAY_TMPDIR")
  else:
    os.environ["RAY_TMPDIR"] = old
  try:
    _wait_for(lambda: not _ray_processes(folder), 60, "Ray's processes to end")
  finally:
    shutil.rmtree(folder, ignore_errors=True)


class _Learner:
  """The learner's side of a feed without trainers: network, version, queues, counters."""

  def __init__(self, config):
    env = make_env(config.protocol, 1, config.seed)
    self.shape, self.dtype = tuple(env.observation_shape), env.observation_dtype
    self.network = network_lib.make_network(config, env.num_actions, self.shape)
    env.close()
    self.network(tf.zeros((1,) + self.shape, self.dtype))
    self.version = tf.Variable(0, dtype=tf.int64)
    self.queues = Queues(obs_shape=self.shape, obs_dtype=self.dtype, num_agents=1,
                         envs_per_agent=config.envs_per_agent, t_max=config.t_max,
                         prediction_capacity=8, training_capacity=config.training_queue_size)
    self.counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("env_steps", "episodes")}

  def take(self):
    """The segments waiting in the training queue (numpy), or None."""
    n = int(self.queues.training.size())
    if not n:
      return None
    return {k: v.numpy() for k, v in self.queues.training.dequeue_many(n).items()}


def _local_segments(config):
  """Segments of a local agent, as the system plays them (one agent, one predictor)."""
  env = make_env(config.protocol, config.envs_per_agent, config.seed)
  learner = _Learner(config)
  counters = {k: tf.Variable(0, dtype=tf.int64) for k in
              ("env_steps", "episodes", "predictions", "prediction_batches")}
  agents = AgentPool(env, learner.queues, num_agents=1, envs_per_agent=config.envs_per_agent,
                     t_max=config.t_max, counters=counters)
  predictor = Predictor(learner.network, learner.queues, batch_size=8, counters=counters,
                        version=learner.version)
  errors = []
  worker = Worker("predictor", predictor.predict, lambda: False, errors.append)
  worker.thread.start()
  try:
    agents.run_segment(tf.constant(0, tf.int32))
    segments = learner.take()
  finally:
    learner.queues.close()
    worker.thread.join(timeout=30)
    env.close()
  assert not errors, errors
  return segments


@pytest.fixture(scope="module")
def pong_feed():
  """A feed of two Pong runners into a learner's queues (nobody trains)."""
  config = _config(_PONG)
  learner = _Learner(config)
  feed = RemoteFeed(config, network=learner.network, version=learner.version,
                    queues=learner.queues, counters=learner.counters)
  feed.start()
  yield config, learner, feed
  learner.queues.close()
  feed.close()


class TestRunners:

  def test_segment_carries_the_local_agents_fields_shapes_and_dtypes(self, pong_feed):
    config, learner, _ = pong_feed
    remote = _wait_for(learner.take, 300, "a segment from a Pong runner")
    local = _local_segments(config)
    assert sorted(remote) == sorted(local) == sorted(
        ["obs", "action", "reward", "done", "behaviour_log_prob", "version"])
    for key in local:
      assert remote[key].dtype == local[key].dtype, key
      assert remote[key].shape[1:] == local[key].shape[1:], key
    assert remote["obs"].dtype == np.uint8 and remote["obs"].shape[1:] == (_T + 1, 84, 84, 4)
    assert remote["version"].dtype == np.int64 and (remote["version"] == 0).all()
    # Actions and log-probabilities are the predictor's: a valid action, log p < 0.
    assert (remote["behaviour_log_prob"] < 0).all()
    assert ((remote["action"] >= 0) & (remote["action"] < 6)).all()
    assert int(learner.counters["env_steps"].numpy()) % _T == 0

  def test_weight_broadcast_reaches_every_runner(self, pong_feed, ray_instance):
    _, learner, feed = pong_feed
    runners = _wait_for(lambda: len(feed.runners()) == 2 and feed.runners(), 300,
                        "two Pong runners", between=learner.take)
    rng = np.random.default_rng(0)
    for v in learner.network.variables:
      v.assign(rng.normal(size=v.shape).astype(v.dtype.as_numpy_dtype) * 0.01)
    learner.version.assign(7)
    for actor in runners.values():
      _wait_for(lambda a=actor: ray_instance.get(a.policy_version.remote()) == 7, 120,
                "the runner's policy version to reach 7", between=learner.take)
      for got, want in zip(ray_instance.get(actor.weights.remote()), learner.network.variables):
        np.testing.assert_array_equal(got, want.numpy())
    # The runners' later segments carry the new version.
    seen = set()
    def newest():
      segments = learner.take()
      if segments is not None:
        seen.update(segments["version"].ravel().tolist())
      return 7 in seen
    _wait_for(newest, 120, "a segment played at version 7")
    assert seen <= {0, 7}, seen

  @pytest.mark.parametrize("queue_size, holds", [(2, 2), (0, 8)])
  def test_runner_holds_at_most_its_queue_size(self, ray_instance, queue_size, holds):
    # Nobody collects for a while: the agents fill the runner's queue and wait.
    # 0 (the default) holds training_queue_size (8) segments, more than the 2
    # env slots play at once.
    config = _config(_CARTPOLE, ray_runner_queue_size=queue_size)
    learner = _Learner(config)
    spec = RunnerSpec(config=config, index=0, seed=1, cpus=0.5, compute_dtype="float32",
                      version=0, weights=[v.numpy() for v in learner.network.variables])
    actor = ray_instance.remote(RemoteRunner).options(num_cpus=0.5).remote(spec)
    try:
      ray_instance.get(actor.ready.remote(), timeout=300)
      collected, pause = [], [1.0]   # waits of 1, 2, 4, ... s between collects
      def full():
        time.sleep(pause[0])
        pause[0] *= 2
        out = ray_instance.get(actor.collect.remote(0.0), timeout=120)
        collected.append(0 if out["segments"] is None else len(out["segments"]["action"]))
        return collected[-1] == holds
      _wait_for(full, 200, f"a runner queue of {holds} segments")
      assert max(collected) == holds, collected
    finally:
      ray_instance.kill(actor, no_restart=True)


@pytest.fixture(scope="module")
def killed_run():
  """A CartPole run on two runners, one SIGKILLed once both delivered; stopped once its
  replacement delivered too. (summary, logdir, what the killing thread saw)."""
  logdir = tempfile.mkdtemp(prefix="tfrl_remote_")
  run = runs.Background(_config(_CARTPOLE, logdir=logdir, max_seconds=400))
  system = run.start()
  seen = {}
  try:
    info = _wait_for(lambda: (len(system.feed.runner_info()) == 2 and all(
        r["segments"] for r in system.feed.runner_info().values())
                              and system.feed.runner_info()), 300, "two delivering runners")
    seen["killed"] = info[0]["pid"]
    os.kill(info[0]["pid"], signal.SIGKILL)
    seen["replacement"] = _wait_for(
        lambda: system.feed.runner_info().get(2, {}).get("segments"), 300,
        "the replacement's segments")
  except AssertionError as e:
    seen["error"] = str(e)
  summary = run.stop(timeout=120)
  yield summary, logdir, seen
  shutil.rmtree(logdir, ignore_errors=True)


class TestFaults:

  def test_killed_runner_is_replaced_and_run_ends_with_checkpoint_and_policy(
      self, killed_run):
    summary, logdir, seen = killed_run
    assert "error" not in seen, seen
    assert summary["stop_reason"] == "requested"
    ray = summary["ray"]
    assert (ray["runners_started"], ray["runners_lost"]) == (3, 1), ray
    # Frames count exactly the segments that reached the learner.
    assert summary["frames"] == ray["segments"] * _T, summary
    assert summary["train_steps"] > 0 and summary["episodes"] > 0
    assert os.path.exists(summary["checkpoint"] + ".index"), summary
    assert os.path.exists(os.path.join(logdir, "saved_model", "saved_model.pb"))
    assert not _alive(seen["killed"])

  def test_resume_with_one_runner_stopped_by_sigint_leaves_no_ray_process(self, killed_run):
    summary, logdir, _ = killed_run
    folder = tempfile.mkdtemp(prefix="tr", dir="/tmp")
    env = processes.cli_env(RAY_TMPDIR=folder)
    env.pop("RAY_ADDRESS", None)
    args = ["-u", "-m", "tfrl.ga3c", "--env=CartPole-v1", "--agents=0", "--max_agents=1",
            "--envs_per_agent=2", f"--t_max={_T}", "--prediction_batch_size=8",
            "--training_queue_size=8", "--loss=vtrace", "--loss_reduction=mean",
            "--learning_rate=1e-3", "--checkpoint_every=0", "--stats_every=1",
            "--ray_address=local", "--ray_runners=1", "--ray_runner_cpus=0.5",
            f"--logdir={logdir}", "--resume"]
    try:
      with processes.cli(args, env) as proc:
        processes.wait_for_line(proc, f"at frame {summary['frames']},", timeout=300)
        line = re.compile(r"frames (\d+) .*\| ray 1 runners")
        while int(line.search(processes.wait_for_line(proc, line, timeout=300)).group(1)) \
            <= summary["frames"]:
          pass
        out = processes.stop(proc, signal.SIGINT, timeout=120)
        assert proc.returncode == 0, out[-3000:]
        assert "stopped by a signal" in out.lower(), out[-3000:]
        _wait_for(lambda: not _ray_processes(folder), 60, "the run's Ray processes to end")
    finally:
      shutil.rmtree(folder, ignore_errors=True)
    checkpoints = tf.train.get_checkpoint_state(os.path.join(logdir, "checkpoints"))
    number = int(checkpoints.model_checkpoint_path.rsplit("-", 1)[1])
    assert number > summary["frames"], (number, summary["frames"])
    assert os.path.exists(os.path.join(logdir, "saved_model", "saved_model.pb"))
