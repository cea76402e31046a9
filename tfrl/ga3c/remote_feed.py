"""Remote env runners feeding a GA3C learner's training queue (IMPALA-shaped).

    feed = RemoteFeed(config, network=..., version=optimizer.step, queues=...,
                      counters=...)
    feed.start()     # Ray (--ray_address), --ray_runners actors, the feed's thread
    ...              # the learner's trainers dequeue local and remote segments alike
    feed.close()     # after the queues are closed: the thread, the actors, Ray

Each runner (`remote_runner.RemoteRunner`, a Ray actor of `ray_runner_cpus`
CPUs) plays segments with the run's own agent and predictor code on its own
env slots and network copy. The feed's thread, in the learner's process:

  * keeps one `collect` call in flight per runner and takes whichever
    finishes first (`ray.wait`): its segments go into the learner's training
    queue, its episodes into the episode queue, and the run's `env_steps` and
    `episodes` counters count what arrived (so the frames, checkpoints and
    stats count only segments the learner got);
  * broadcasts the network's weights, with the optimizer step they are at
    (the policy version), to each runner every `ray_broadcast_every` steps
    (one `ray.put`, one call in flight per runner);
  * keeps each runner's lag (optimizer steps between acting and arriving) for
    the stats line and TensorBoard (`report`);
  * replaces a runner that dies (process killed, node lost) by a fresh one
    with new seeds; what it had not delivered is lost, nothing else.

The learner never waits on a runner: its trainers only read the training
queue. When that queue is full, the feed's thread waits, the runners' own
queues fill and their agents wait: the lag stays bounded.
"""

import dataclasses
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import numpy as np

from tfrl import ray_cluster
from tfrl.ga3c.queues import QUEUE_CLOSED_ERRORS
from tfrl.ga3c.remote_runner import RunnerSpec, runner_seed

# Runners that die one after another before they ever start: the run fails
# (a bad env or setting) rather than starting them forever.
MAX_START_FAILURES = 3


class RunnersFailed(RuntimeError):
  """Runners keep dying before they start."""


@dataclasses.dataclass
class _Runner:
  """The feed's view of one runner."""
  index: int
  actor: Any
  version: int                       # the weights' version it was last sent
  info: Optional[Dict] = None        # ready()'s answer, once it came
  weights_task: Any = None           # a set_weights call in flight
  segments: int = 0
  # The lag of the segments delivered since the last report: sum, count, max.
  lag_sum: float = 0.0
  lag_count: int = 0
  lag_max: float = 0.0


def segment_bytes(training_queue) -> int:
  """Bytes of one segment of a training queue (its arrays, without framing)."""
  return sum(int(np.prod(shape.as_list())) * dtype.size
             for shape, dtype in zip(training_queue.shapes, training_queue.dtypes))


class RemoteFeed:
  """Runs the remote runners of one GA3C run; see the module docstring.

  Args:
    config: the run's GA3CConfig (its `ray_*` fields say where and how many).
    network: the learner's network (its `variables` are broadcast).
    version: int64 tf.Variable, the policy version (the optimizer's step).
    queues: the learner's `Queues` (training and episodes are fed).
    counters: the run's int64 counters; `env_steps` and `episodes` grow here.
    compute_dtype: the learner network's compute dtype name (runners use it).
    stopping: true once the run is ending (a lost runner is then not replaced).
    fail: called with an error that must end the run (default: logged).
    log: where runner starts, losses and replacements are reported.
    collect_wait: seconds a `collect` call waits for a first segment.
  """

  def __init__(self, config, *, network, version, queues, counters,
               compute_dtype: str = "float32", stopping: Callable[[], bool] = lambda: False,
               fail: Optional[Callable[[BaseException], None]] = None,
               log: Callable[[str], None] = logging.info, collect_wait: float = 0.5):
    self.config = config
    self._network = network
    self._version = version
    self._queues = queues
    self._counters = counters
    self._compute_dtype = compute_dtype
    self._stopping = stopping
    self._fail = fail or (lambda e: logging.error("GA3C remote feed failed: %s", e))
    self._log = log
    self._collect_wait = collect_wait
    self._ray = None
    self._started_ray = False
    self._remote = None
    self._runners: Dict[int, _Runner] = {}
    self._pending: Dict[Any, Tuple[int, str]] = {}   # task ref -> (runner, kind)
    self._next_index = 0
    self._start_failures = 0
    self._lock = threading.Lock()   # the stats `report` reads
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, name="ga3c_remote_feed", daemon=True)
    self.segment_bytes = segment_bytes(queues.training)
    self.segments = 0
    self.lost = 0
    self.broadcasts = 0

  # -- Life -------------------------------------------------------------------

  def start(self) -> None:
    """Joins or starts Ray, starts the runners (without waiting for them) and the thread."""
    cfg = self.config
    in_flight = 2 * cfg.ray_runners * max(cfg.training_queue_size, 64) * self.segment_bytes
    self._ray, self._started_ray = ray_cluster.connect(
        cfg.ray_address, object_store_memory=max(256 << 20, in_flight))
    from tfrl.ga3c.remote_runner import RemoteRunner  # pylint: disable=import-outside-toplevel
    self._remote = self._ray.remote(RemoteRunner)
    version, weights = self._read_version(), self._read_weights()
    for _ in range(cfg.ray_runners):
      self._start_runner(version, weights)
    self._thread.start()
    self._log(f"[ray] {cfg.ray_runners} runners x {cfg.max_agents * cfg.envs_per_agent} "
              f"env slots, {cfg.ray_runner_cpus:g} CPUs each; weights every "
              f"{cfg.ray_broadcast_every} optimizer steps; {self.segment_bytes:,} bytes "
              f"per segment")

  def close(self) -> None:
    """Stops the thread, kills the runners, stops the Ray instance `start` started.
    Close the learner's queues first: a thread waiting on the full training
    queue returns only then."""
    self._stop.set()
    if self._thread.is_alive():
      self._thread.join(timeout=30)
      if self._thread.is_alive():
        logging.warning("GA3C remote feed thread still running after close.")
    for runner in list(self._runners.values()):
      self._kill(runner)
    self._runners.clear()
    self._pending.clear()
    if self._ray is not None:
      ray_cluster.disconnect(self._ray, self._started_ray)
      self._ray = None

  # -- Runners ------------------------------------------------------------------

  def _start_runner(self, version: int, weights) -> _Runner:
    cfg = self.config
    index = self._next_index
    self._next_index += 1
    spec = RunnerSpec(config=cfg, index=index, seed=runner_seed(cfg.seed, index, version),
                      cpus=cfg.ray_runner_cpus, compute_dtype=self._compute_dtype,
                      version=version, weights=weights)
    actor = self._remote.options(
        num_cpus=cfg.ray_runner_cpus, max_restarts=0, max_task_retries=0,
        scheduling_strategy="SPREAD").remote(spec)
    runner = _Runner(index, actor, version)
    with self._lock:
      self._runners[index] = runner
    self._pending[actor.ready.remote()] = (index, "ready")
    return runner

  def _kill(self, runner: _Runner) -> None:
    try:
      self._ray.kill(runner.actor, no_restart=True)
    except Exception:  # pylint: disable=broad-except
      pass  # already gone

  def _replace(self, runner: _Runner, why: str) -> None:
    """Drops a dead runner (and its calls in flight); starts a fresh one unless stopping."""
    with self._lock:
      del self._runners[runner.index]
    self._pending = {ref: v for ref, v in self._pending.items() if v[0] != runner.index}
    self.lost += 1
    self._kill(runner)
    if self._stopping() or self._stop.is_set():
      self._log(f"[ray] runner {runner.index} lost ({why}) while the run ends")
      return
    self._start_failures = 0 if runner.info is not None else self._start_failures + 1
    if self._start_failures >= MAX_START_FAILURES:
      raise RunnersFailed(f"{MAX_START_FAILURES} Ray runners in a row died before they "
                          f"started; the last: {why}")
    new = self._start_runner(self._read_version(), self._read_weights())
    self._log(f"[ray] runner {runner.index} lost ({why}); its undelivered segments are "
              f"dropped; starting runner {new.index}")

  def runners(self) -> Dict[int, Any]:
    """{index: actor handle} of the started runners (for tests and tools)."""
    with self._lock:
      return {i: r.actor for i, r in self._runners.items() if r.info is not None}

  def runner_info(self) -> Dict[int, Dict]:
    """{index: ready()'s answer (pid, host, slots, seconds) and the segments it
    delivered} of the started runners."""
    with self._lock:
      return {i: dict(r.info, segments=r.segments) for i, r in self._runners.items()
              if r.info is not None}

  # -- The thread ---------------------------------------------------------------

  def _loop(self) -> None:
    try:
      while not self._stop.is_set():
        self._broadcast()
        if not self._pending:
          self._stop.wait(0.2)
          continue
        done, _ = self._ray.wait(list(self._pending), num_returns=1, timeout=0.2)
        for ref in done:
          self._on_done(ref)
    except QUEUE_CLOSED_ERRORS:
      pass   # the run is ending: the learner's queues are closed
    except Exception as e:  # pylint: disable=broad-except
      if not (self._stopping() or self._stop.is_set()):
        logging.exception("GA3C remote feed failed")
        self._fail(e)

  def _on_done(self, ref) -> None:
    index, kind = self._pending.pop(ref)
    runner = self._runners.get(index)
    if runner is None:
      return
    ray = self._ray
    try:
      out = ray.get(ref)
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
            ray.exceptions.ObjectLostError) as e:
      self._replace(runner, _reason(e))
      return
    if kind == "weights":
      runner.weights_task = None
      return
    if kind == "ready":
      with self._lock:
        runner.info = out
      self._start_failures = 0
      self._log(f"[ray] runner {index} ready: pid {out['pid']} on {out['host']}, "
                f"{out['slots']} slots, built in {out['seconds']:.1f} s")
    else:
      self._deliver(runner, out)
    self._pending[runner.actor.collect.remote(self._collect_wait)] = (index, "collect")

  def _deliver(self, runner: _Runner, out: Dict) -> None:
    """A collect's segments and episodes into the learner's queues, then counted."""
    segments = out["segments"]
    if segments is not None:
      self._queues.training.enqueue_many(segments)   # waits while the queue is full
      self._counters["env_steps"].assign_add(int(segments["action"].size))
      lag = self._read_version() - segments["version"]
      with self._lock:
        runner.segments += len(segments["action"])
        runner.lag_sum += float(lag.sum())
        runner.lag_count += int(lag.size)
        runner.lag_max = max(runner.lag_max, float(lag.max()))
        self.segments += len(segments["action"])
    if len(out["scores"]):
      self._queues.episodes.enqueue_many({"score": out["scores"], "length": out["lengths"]})
      self._counters["episodes"].assign_add(len(out["scores"]))

  def _broadcast(self) -> None:
    """The weights to every started runner that is `ray_broadcast_every` steps behind
    and has no broadcast in flight (one `ray.put` for all of them)."""
    version = self._read_version()
    targets = [r for r in self._runners.values()
               if r.info is not None and r.weights_task is None
               and version - r.version >= self.config.ray_broadcast_every]
    if not targets:
      return
    weights = self._ray.put(self._read_weights())
    for runner in targets:
      runner.version = version
      runner.weights_task = runner.actor.set_weights.remote(version, weights)
      self._pending[runner.weights_task] = (runner.index, "weights")
    self.broadcasts += 1

  def _read_version(self) -> int:
    return int(self._version.numpy())

  def _read_weights(self) -> List[np.ndarray]:
    # The version is read before the weights: a segment may name an older
    # policy than the one that acted, never a newer one.
    return [v.numpy() for v in self._network.variables]

  # -- Stats ----------------------------------------------------------------------

  def report(self) -> Tuple[Dict[str, float], str]:
    """(TensorBoard scalars, a suffix for the stats line) since the last report:
    runners alive, lost, and each runner's lag (optimizer steps between the
    policy that acted and the segment's arrival; mean, max)."""
    with self._lock:
      alive = sum(r.info is not None for r in self._runners.values())
      scalars = {"ray/runners": alive, "ray/runners_lost": self.lost,
                 "ray/segments": self.segments}
      lags = []
      for index, runner in sorted(self._runners.items()):
        if runner.lag_count:
          mean = runner.lag_sum / runner.lag_count
          scalars[f"ray/lag_mean/runner_{index}"] = mean
          scalars[f"ray/lag_max/runner_{index}"] = runner.lag_max
          lags.append(f"{index}:{mean:.1f}")
          runner.lag_sum, runner.lag_count, runner.lag_max = 0.0, 0, 0.0
    text = f" | ray {alive} runners ({self.lost} lost)"
    if lags:
      text += " lag " + " ".join(lags)
    return scalars, text

  def summary(self) -> Dict[str, int]:
    """Counts for the run's summary.json."""
    return {"runners": self.config.ray_runners, "runners_started": self._next_index,
            "runners_lost": self.lost, "segments": self.segments,
            "broadcasts": self.broadcasts, "segment_bytes": self.segment_bytes}


def _reason(error: BaseException) -> str:
  text = str(error).strip()
  return text.splitlines()[0][:200] if text else type(error).__name__
