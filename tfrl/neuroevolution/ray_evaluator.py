"""Population evaluation on a Ray cluster: fixed chunks dealt to Ray actors.

    evaluator = RayEvaluator(spec, RayConfig(address="auto", workers=8))
    result = evaluator.evaluate(genomes, episodes, seeds)   # as LocalEvaluator

Each actor (`PopulationWorker`, one process, `worker_cpus` CPUs) builds what
a local run builds, from the same `worker.WorkerSpec`: its batched env,
population network, noise table and parent cache, with TF's thread pools
sized to its CPUs and the compiled ops loaded in its own process. A call is
cut into chunks of (networks, episodes); one chunk at a time goes to each
idle actor, the largest first. Only seed chains travel to the actors (and
ES's centre, once per change, through the object store; the observation
statistics, once per generation); only returns and lengths come back, and
the observation sums of the episodes that `observe` names. No weights and
no TF objects cross a process boundary.

Every episode starts from its own seed, so a chunk gives the same result on
any actor: when an actor dies (its process killed, its node gone), its chunk
is dealt again to another actor, a replacement is started (at most
`max_worker_restarts` in a run), and the call's result is the one an
undisturbed run gives. With no actor left and none starting within
`worker_start_timeout`, `evaluate` raises `WorkersLost`.

Ray is imported only when a `RayEvaluator` is made.
"""

import collections
import dataclasses
import os
import pickle
import socket
import threading
import time
from typing import Callable, Dict, List, Optional

import numpy as np

from tfrl import ray_cluster
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import normalization
from tfrl.neuroevolution import worker as worker_lib
from tfrl.neuroevolution.settings import RayConfig

Genome = genome_lib.Genome


WorkersLost = evaluators.WorkersLost
LOOPBACK_ENV = ray_cluster.LOOPBACK_ENV


@dataclasses.dataclass
class Chunk:
  """Networks [first, first + count) of a call, episodes [episode, episode + episodes)."""
  index: int
  first: int
  count: int
  episode: int
  episodes: int
  expected: float = 0.0


def make_chunks(num_networks: int, episodes: int, target: int,
                expected_steps: Optional[np.ndarray] = None) -> List[Chunk]:
  """About `target` chunks, largest expected work first.

  With at least `target` networks a chunk holds whole networks (all their
  episodes share its weights' reads); with fewer, a network's episodes are
  split over chunks (e.g. the elite candidates' re-evaluation).
  """
  expected = (np.ones(num_networks) if expected_steps is None
              else np.asarray(expected_steps, np.float64))
  chunks = []
  if num_networks >= target:
    for part in np.array_split(np.arange(num_networks), target):
      if part.size:
        chunks.append(Chunk(len(chunks), int(part[0]), int(part.size), 0, episodes,
                            float(expected[part].sum() * episodes)))
  else:
    splits = min(episodes, -(-target // max(num_networks, 1)))
    for net in range(num_networks):
      for part in np.array_split(np.arange(episodes), splits):
        if part.size:
          chunks.append(Chunk(len(chunks), net, 1, int(part[0]), int(part.size),
                              float(expected[net] * part.size)))
  chunks.sort(key=lambda c: -c.expected)
  return chunks


class PopulationWorker:
  """The body of a Ray actor: a `LocalEvaluator` built from the spec in its process."""

  def __init__(self, spec: worker_lib.WorkerSpec, cpus: float, table_ref=None):
    start = time.time()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    threads = max(1, int(round(cpus)))
    # Before any op runs: TF would otherwise size its pools to the machine.
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    table = None
    if table_ref is not None:
      import ray  # pylint: disable=import-outside-toplevel
      table = ray.get(table_ref[0])
    self.local = worker_lib.build_local(spec, table)
    self.frames_per_step = self.local.pipelined.frames_per_step
    self._center_version = None
    self._normalization_version = None
    self._remember_version = None
    self._exit_after = None
    self.startup_seconds = time.time() - start

  def ready(self) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "seconds": self.startup_seconds, "frames_per_step": self.frames_per_step}

  def arm_exit(self, seconds: float) -> None:
    """Fault injection for tests: the next chunk ends this process mid-way."""
    self._exit_after = float(seconds)

  def evaluate(self, request: dict) -> dict:
    if request.get("center") is not None:
      version, ref = request["center"]
      if version != self._center_version:
        import ray  # pylint: disable=import-outside-toplevel
        self.local.set_center(ray.get(ref[0]))
        self._center_version = version
    if request.get("normalization") is not None:
      version, mean, std = request["normalization"]
      if version != self._normalization_version:
        self.local.set_normalization(mean, std)
        self._normalization_version = version
    if request.get("remember") is not None:
      version, chains = request["remember"]
      if version != self._remember_version:
        self.local.remember([Genome.from_json(c) for c in chains])
        self._remember_version = version
    if self._exit_after is not None:
      # Dies mid-chunk (or at its end, before answering, if it is quicker).
      threading.Timer(self._exit_after, os._exit, (1,)).start()
    start = time.perf_counter()
    genomes = [Genome.from_json(c) for c in request["genomes"]]
    res = self.local.evaluate(genomes, request["episodes"], request["seeds"],
                              request.get("expected_steps"), request.get("observe"))
    if self._exit_after is not None:
      os._exit(1)
    return {"returns": res.returns, "lengths": res.lengths,
            "observations": res.observations, "seconds": time.perf_counter() - start}


class RayEvaluator(evaluators.Evaluator):
  """Deals evaluation calls to Ray actors; see the module docstring.

  Args:
    spec: what each actor builds (`num_envs` and `slot_groups` are per actor).
    config: the `RayConfig`.
    table: the driver's noise table (shared through the object store when
      `config.noise == "object_store"`).
    log: where worker losses and restarts are reported (one line each).
  """

  def __init__(self, spec: worker_lib.WorkerSpec, config: RayConfig, table=None,
               log: Callable[[str], None] = print):
    ray, self._started_ray = ray_cluster.connect(
        config.address, object_store_memory=_object_store_bytes(spec))
    self._ray = ray
    self.spec = spec
    self.config = config
    self.log = log
    self._stop = threading.Event()
    self._remote = ray.remote(PopulationWorker)
    self._table_ref = None
    if config.noise == "object_store":
      if table is None:
        raise ValueError("noise='object_store' needs the driver's noise table.")
      self._table_ref = [ray.put(table)]
    self.frames_per_step = None
    self.startup_seconds: List[float] = []
    self.restarts = 0
    self.lost = 0
    self.bytes_sent = 0
    self.bytes_received = 0
    self.worker_seconds = 0.0     # time the workers spent on chunks (for overhead)
    self._center = None           # (version, array, [ref])
    self._normalization = None    # (version, mean, std)
    self._remember = None         # (version, [chains])
    self._workers: Dict[int, dict] = {}   # live and starting actors by id
    self._next_id = 0
    for _ in range(config.workers):
      self._start_worker()
    self._wait_for_workers(config.workers)

  # --- workers ---

  def _start_worker(self) -> None:
    actor = self._remote.options(
        num_cpus=self.config.worker_cpus, max_restarts=0, max_task_retries=0,
        scheduling_strategy="SPREAD").remote(self.spec, self.config.worker_cpus,
                                             self._table_ref)
    wid = self._next_id
    self._next_id += 1
    self._workers[wid] = {"actor": actor, "ready": actor.ready.remote(), "alive": False,
                          "center": None, "normalization": None, "remember": None,
                          "started": time.time()}

  def _on_ready(self, wid: int) -> None:
    w = self._workers[wid]
    try:
      info = self._ray.get(w["ready"])
    except self._ray.exceptions.RayError as e:
      self._lose(wid, f"failed to start ({_reason(e)})")
      return
    w["ready"], w["alive"] = None, True
    w["info"] = info
    self.frames_per_step = info["frames_per_step"]
    self.startup_seconds.append(info["seconds"])

  def _wait_for_workers(self, count: int) -> None:
    deadline = time.time() + self.config.worker_start_timeout
    while True:
      starting = {w["ready"]: wid for wid, w in self._workers.items() if w["ready"]}
      if not starting or time.time() > deadline or self._stop.is_set():
        break
      done, _ = self._ray.wait(list(starting), num_returns=1, timeout=0.5)
      for ref in done:
        self._on_ready(starting[ref])
    alive = sum(w["alive"] for w in self._workers.values())
    if alive == 0:
      cpus = self._ray.cluster_resources().get("CPU", 0)
      self.close()
      raise WorkersLost(f"no Ray worker started within {self.config.worker_start_timeout:g} s "
                        f"(asked for {count} workers of {self.config.worker_cpus:g} CPUs each; the "
                        f"cluster has {cpus:g} CPUs).")
    if alive < count:
      self.log(f"[ray] {alive} of {count} workers started; going on with them")

  def _lose(self, wid: int, why: str) -> None:
    w = self._workers.pop(wid)
    self.lost += 1
    try:
      self._ray.kill(w["actor"], no_restart=True)
    except Exception:  # pylint: disable=broad-except
      pass  # already gone
    if self.restarts < self.config.max_worker_restarts and not self._stop.is_set():
      self.restarts += 1
      self._start_worker()
      self.log(f"[ray] worker {wid} {why}; starting replacement worker "
               f"{self._next_id - 1} ({self.restarts} of "
               f"{self.config.max_worker_restarts} restarts)")
    else:
      self.log(f"[ray] worker {wid} {why}; no replacement (restarts used: "
               f"{self.restarts} of {self.config.max_worker_restarts})")

  @property
  def workers_alive(self) -> int:
    return sum(w["alive"] for w in self._workers.values())

  def worker_pids(self) -> List[int]:
    return [w["info"]["pid"] for w in self._workers.values() if w["alive"]]

  def arm_exit(self, worker_index: int, seconds: float = 0.2) -> None:
    """Fault injection for tests: the `worker_index`-th live worker's next chunk
    ends its process after `seconds` (or at the chunk's end)."""
    live = [w for w in self._workers.values() if w["alive"]]
    self._ray.get(live[worker_index]["actor"].arm_exit.remote(seconds))

  # --- the Evaluator interface ---

  @property
  def capacity(self) -> int:
    return self.spec.capacity

  def set_center(self, center: np.ndarray) -> None:
    center = np.asarray(center, np.float32)
    if self._center is not None and np.array_equal(self._center[1], center):
      return
    version = 0 if self._center is None else self._center[0] + 1
    self._center = (version, center.copy(), [self._ray.put(center)])

  def set_normalization(self, mean: np.ndarray, std: np.ndarray) -> None:
    mean, std = np.asarray(mean, np.float32), np.asarray(std, np.float32)
    if self._normalization is not None and np.array_equal(self._normalization[1], mean) \
        and np.array_equal(self._normalization[2], std):
      return
    version = 0 if self._normalization is None else self._normalization[0] + 1
    self._normalization = (version, mean.copy(), std.copy())

  def remember(self, genomes) -> None:
    version = 0 if self._remember is None else self._remember[0] + 1
    self._remember = (version, [g.to_json() for g in genomes])

  def _request(self, wid: int, chunk: Chunk, genomes, seeds, expected_steps,
               observe) -> dict:
    w = self._workers[wid]
    nets = slice(chunk.first, chunk.first + chunk.count)
    eps = slice(chunk.episode, chunk.episode + chunk.episodes)
    request = {
        "genomes": [g.to_json() for g in genomes[nets]],
        "episodes": chunk.episodes,
        "seeds": np.ascontiguousarray(seeds[nets, eps]),
        "expected_steps": (None if expected_steps is None
                           else np.asarray(expected_steps)[nets]),
        "observe": None if observe is None else np.ascontiguousarray(observe[nets, eps]),
    }
    if self._normalization is not None and w["normalization"] != self._normalization[0]:
      request["normalization"] = self._normalization
      w["normalization"] = self._normalization[0]
    extra = 0
    if self._center is not None and w["center"] != self._center[0]:
      request["center"] = (self._center[0], self._center[2])
      w["center"] = self._center[0]
      extra += self._center[1].nbytes  # the actor reads it once from the object store
    if self._remember is not None and w["remember"] != self._remember[0]:
      request["remember"] = self._remember
      w["remember"] = self._remember[0]
    self.bytes_sent += len(pickle.dumps(request)) + extra
    return request

  def evaluate(self, genomes, episodes, seeds, expected_steps=None,
               observe=None) -> evaluators.EvalResult:
    genomes = list(genomes)
    seeds = np.asarray(seeds, np.int64)
    n = len(genomes)
    if seeds.shape != (n, episodes):
      raise ValueError(f"seeds must be [{n}, {episodes}], got {list(seeds.shape)}.")
    start = time.time()
    returns = np.zeros((n, episodes), np.float64)
    lengths = np.zeros((n, episodes), np.int64)
    observed = []   # each chunk's observation sums, keyed by the whole call's rows
    target = max(1, len(self._workers)) * self.config.chunks_per_worker
    queue = collections.deque(make_chunks(n, episodes, target, expected_steps))
    running: Dict[object, tuple] = {}   # task ref -> (worker id, chunk)
    no_worker_since = None
    while queue or running:
      if self._stop.is_set():
        raise evaluators.Stopped("evaluation stopped; its results are dropped")
      busy = {wid for wid, _ in running.values()}
      for wid, w in list(self._workers.items()):
        if queue and w["alive"] and wid not in busy:
          chunk = queue.popleft()
          request = self._request(wid, chunk, genomes, seeds, expected_steps, observe)
          running[w["actor"].evaluate.remote(request)] = (wid, chunk)
      starting = {w["ready"]: wid for wid, w in self._workers.items() if w["ready"]}
      if not running:
        if not starting:
          raise WorkersLost(f"all Ray workers were lost ({self.lost} lost, "
                            f"{self.restarts} restarts used of "
                            f"{self.config.max_worker_restarts})")
        no_worker_since = no_worker_since or time.time()
        if time.time() - no_worker_since > self.config.worker_start_timeout:
          raise WorkersLost(f"all Ray workers were lost and no replacement started "
                            f"within {self.config.worker_start_timeout:g} s")
      else:
        no_worker_since = None
      done, _ = self._ray.wait(list(running) + list(starting), num_returns=1,
                               timeout=0.2)
      for ref in done:
        if ref in starting:
          self._on_ready(starting[ref])
          continue
        wid, chunk = running.pop(ref)
        try:
          out = self._ray.get(ref)
        except (self._ray.exceptions.RayActorError,
                self._ray.exceptions.ActorUnavailableError) as e:
          queue.appendleft(chunk)
          self.log(f"[ray] chunk {chunk.index} (networks {chunk.first}.."
                   f"{chunk.first + chunk.count - 1}) re-dealt: worker {wid} died")
          self._lose(wid, f"lost ({_reason(e)})")
          continue
        except self._ray.exceptions.RayTaskError as e:
          raise _task_error(e) from None
        self.bytes_received += len(pickle.dumps(out))
        self.worker_seconds += out["seconds"]
        nets = slice(chunk.first, chunk.first + chunk.count)
        eps = slice(chunk.episode, chunk.episode + chunk.episodes)
        returns[nets, eps] = out["returns"]
        lengths[nets, eps] = out["lengths"]
        if out.get("observations") is not None:
          observed.append(out["observations"].shifted(chunk.first, chunk.episode))
    steps = int(lengths.sum())
    sums = None
    if observe is not None:
      sums = normalization.EpisodeSums.concat(observed, self.spec.observation_shape[0])
    return evaluators.EvalResult(returns, lengths, steps * self.frames_per_step, steps,
                                 time.time() - start, sums)

  def stop(self) -> None:
    self._stop.set()

  def close(self) -> None:
    """Ends every actor of the run (and the Ray instance it started)."""
    for w in list(self._workers.values()):
      try:
        self._ray.kill(w["actor"], no_restart=True)
      except Exception:  # pylint: disable=broad-except
        pass
    self._workers.clear()
    ray_cluster.disconnect(self._ray, self._started_ray)

  def describe(self) -> str:
    return (f"ray: {self.workers_alive} workers x {self.spec.num_envs} slots in "
            f"{self.spec.slot_groups} groups, {self.config.worker_cpus:g} CPUs each")


def _task_error(error) -> BaseException:
  """A worker's bad-input error (ValueError: e.g. a NaN observation) as one line;
  any other error of a task as it is."""
  cause = getattr(error, "cause", None)
  if isinstance(cause, ValueError):
    return ValueError(_reason(cause))
  return error


def _reason(error: BaseException) -> str:
  return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__


def _object_store_bytes(spec: worker_lib.WorkerSpec) -> int:
  """A small object store for a local instance: the noise table twice, and room."""
  return max(256 << 20, 2 * 4 * spec.noise_size + (64 << 20))
