"""A GA3C env runner in a process of its own (the body of a Ray actor).

    runner = ray.remote(RemoteRunner).remote(spec)       # tfrl.ga3c.remote_feed does this
    runner.ready.remote()                  -> {"pid", "host", "seconds", "slots"}
    runner.collect.remote(wait_seconds)    -> the segments finished since the last call
    runner.set_weights.remote(version, weights)

A runner is the agent side of a local run, built from the same code: its own
env slots (`make_env` with the run's protocol and the runner's seed), its own
copy of the network (`network.make_network`) and the acting loops
(`acting.acting_loops`: `Queues`, an `AgentPool` of `max_agents x
envs_per_agent` slots, a `Predictor`); each agent and each of the
`predictors` predictor loops runs in a thread of the actor's process. Its
policy version is a variable that only `set_weights` moves, to the learner's
optimizer step that the weights came from, so every segment names the
learner's policy that acted (the learner's V-trace / APPO losses correct the
lag, and it is logged).

`collect` drains the local training and episode queues: segments as numpy
arrays with the training queue's keys and dtypes (uint8 observations for
Atari). While nobody collects, the agents block on the full local queue
(`--ray_runner_queue_size` segments): a slow learner slows the runner down
instead of letting the lag grow.
"""

import dataclasses
import os
import socket
import time
from typing import Any, Dict, List, Optional

import numpy as np


@dataclasses.dataclass(frozen=True)
class RunnerSpec:
  """What a runner builds.

  Attributes:
    config: the run's GA3CConfig (protocol, agents' layout, t_max, network,
      predictor and queue settings).
    index: the runner's number in the run (a replacement gets a new one).
    seed: seeds its env slots (`make_env`) and its action sampling.
    cpus: CPUs it reserves; its TensorFlow thread pools are sized to them.
    compute_dtype: the learner's network compute dtype (e.g. "float32").
    version: the learner's optimizer step that `weights` come from.
    weights: the learner's `network.variables` values (numpy), in order.
  """
  config: Any
  index: int
  seed: int
  cpus: float
  compute_dtype: str
  version: int
  weights: List[np.ndarray]


def runner_seed(run_seed: int, index: int, version: int) -> int:
  """A runner's seed: differs between runners, and from a resumed run's runners."""
  return int(np.random.SeedSequence([run_seed, index, version, 0x6a3c]).generate_state(1)[0])


class RemoteRunner:
  """Plays segments with the run's agents and predictor code; see the module docstring."""

  def __init__(self, spec: RunnerSpec):
    start = time.time()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    threads = max(1, int(round(spec.cpus)))
    # Before any op runs: TF would otherwise size its pools to the machine.
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    # pylint: disable=import-outside-toplevel
    from tfrl.envs.make import make_env
    from tfrl.ga3c.acting import acting_loops
    from tfrl.ga3c.network import make_network
    from tfrl.ga3c.workers import Worker
    # pylint: enable=import-outside-toplevel
    cfg = spec.config
    self.index = spec.index
    tf.random.set_seed(spec.seed)
    self.slots = cfg.max_agents * cfg.envs_per_agent
    self.env = make_env(cfg.protocol, self.slots, spec.seed)
    shape = tuple(self.env.observation_shape)
    self.network = make_network(cfg, self.env.num_actions, shape,
                                tf.as_dtype(spec.compute_dtype))
    self.network(tf.zeros((1,) + shape, self.env.observation_dtype))  # the variables
    self.version = tf.Variable(spec.version, dtype=tf.int64, trainable=False,
                               name="policy_version")
    self.set_weights(spec.version, spec.weights)
    counters = {k: tf.Variable(0, dtype=tf.int64, trainable=False, name=k)
                for k in ("env_steps", "episodes", "predictions", "prediction_batches")}
    self.queues, self.agents, self.predictor = acting_loops(
        cfg, self.env, self.network, num_agents=cfg.max_agents,
        training_capacity=cfg.runner_queue_capacity, counters=counters, version=self.version)
    # Traced once here, before the threads race to do it (as the system's begin()).
    self.agents.run_segment.get_concrete_function()
    self.predictor.predict.get_concrete_function()
    self._stopping = False
    self._error: Optional[BaseException] = None
    stopping = lambda: self._stopping
    self._workers = [Worker(f"runner{spec.index}_predictor_{i}", self.predictor.predict,
                            stopping, self._fail) for i in range(cfg.predictors)]
    for i in range(cfg.max_agents):
      agent = tf.constant(i, tf.int32)
      self._workers.append(Worker(f"runner{spec.index}_agent_{i}",
                                  lambda a=agent: self.agents.run_segment(a),
                                  stopping, self._fail))
    for w in self._workers:
      w.thread.start()
    self.startup_seconds = time.time() - start

  def _fail(self, error: BaseException) -> None:
    if self._error is None:
      self._error = error

  def ready(self) -> Dict[str, Any]:
    """Where the runner runs (its pid: what a test SIGKILLs) and how long it took to build."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "slots": self.slots,
            "seconds": self.startup_seconds}

  def collect(self, wait_seconds: float = 0.5) -> Dict[str, Any]:
    """The segments and episodes finished since the last call, after waiting up
    to `wait_seconds` for a first segment (so that an idle runner is not
    polled in a busy loop).

    Returns {"segments": {obs [n, T+1, ...], action, reward, done,
    behaviour_log_prob, version [n, T]} numpy, or None when n = 0;
    "scores", "lengths": the finished episodes'; "version": the runner's
    policy version now}. Raises the first error of its threads.
    """
    if self._error is not None:
      raise self._error
    training = self.queues.training
    deadline = time.monotonic() + wait_seconds
    while int(training.size()) == 0 and time.monotonic() < deadline:
      time.sleep(0.005)
    n = int(training.size())
    segments = None
    if n:
      segments = {k: v.numpy() for k, v in training.dequeue_many(n).items()}
    scores, lengths = self.queues.drain_episodes()
    return {"segments": segments, "scores": np.asarray(scores, np.float32),
            "lengths": np.asarray(lengths, np.int32), "version": int(self.version.numpy())}

  def set_weights(self, version: int, weights: List[np.ndarray]) -> None:
    """The learner's weights (its `network.variables` values) and their version.

    The version moves after the weights: a predictor that reads it never names
    a newer policy than the one that acts."""
    variables = self.network.variables
    if len(weights) != len(variables):
      raise ValueError(f"runner {self.index}: got {len(weights)} weight arrays for a "
                       f"network of {len(variables)} variables.")
    for variable, value in zip(variables, weights):
      if tuple(variable.shape) != tuple(np.shape(value)):
        raise ValueError(f"runner {self.index}: weights for {variable.name} have shape "
                         f"{list(np.shape(value))}, expected {variable.shape.as_list()}.")
      variable.assign(value)
    self.version.assign(version)

  def policy_version(self) -> int:
    """The version of the weights it acts with."""
    return int(self.version.numpy())

  def weights(self) -> List[np.ndarray]:
    """Its network's variables (numpy), in the order `set_weights` takes them."""
    return [v.numpy() for v in self.network.variables]

  def close(self) -> None:
    """Stops its threads (the feed kills the actor; this is for in-process use)."""
    self._stopping = True
    self.queues.close()
    for w in self._workers:
      w.stop_event.set()
    for w in self._workers:
      w.thread.join(timeout=10)
    self.env.close()
