"""How GA, ES and random search get their networks played: one interface.

    evaluator.set_center(theta)                 # ES: the root of CENTER chains
    evaluator.set_normalization(mean, std)      # with --obs_norm: this generation's
    evaluator.remember(parents)                 # chains whose children come next
    evaluator.prepare(next_population)          # may build their weights ahead
    result = evaluator.evaluate(genomes, episodes, seeds, expected_steps, observe)
    # or: first's, second's and the followup's genomes' results, played together
    results = evaluator.evaluate_overlapped(first, second, followup)

Networks are named by seed chains (`genome.Genome`), never by weights, so the
same call can be played in this process (`LocalEvaluator`) or dealt to Ray
actors on other machines (`ray_evaluator.RayEvaluator`). Each episode starts
from its own seed (`episode_seeds`: a function of the run's seed, the
generation, the phase and the job), so a result does not depend on the slot,
thread, worker or machine that played it.
"""

import abc
from concurrent import futures
import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from tfrl import errors
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import genome as genome_lib

EvalResult = evaluation.EvalResult
Stopped = evaluation.Stopped


class WorkersLost(errors.RunFailed):
  """Every worker of a distributed evaluator is gone and none could be started."""


def episode_seeds(run_seed: int, generation: int, phase: int, count: int,
                  episodes: int) -> np.ndarray:
  """[count, episodes] reset seeds in [0, 2^31) of one evaluation call.

  Seed (i, e) is drawn from SeedSequence([run_seed, generation, phase, i, e]):
  job i's episode e in the call numbered `phase` of `generation`.
  """
  out = np.empty((count, episodes), np.int64)
  for i in range(count):
    for e in range(episodes):
      state = np.random.SeedSequence([run_seed, generation, phase, i, e]).generate_state(1)
      out[i, e] = int(state[0]) & 0x7FFFFFFF
  return out


@dataclasses.dataclass(frozen=True)
class Request:
  """`evaluate`'s arguments: each genome plays `episodes` episodes, (i, e) from seeds[i, e]."""
  genomes: Sequence[genome_lib.Genome]
  episodes: int
  seeds: np.ndarray
  expected_steps: Optional[Sequence[float]] = None


@dataclasses.dataclass(frozen=True)
class Followup:
  """`count` genomes chosen among a first request's by its result:
  `choose(result)` gives their indices in that request's genomes."""
  choose: Callable[[EvalResult], Sequence[int]]
  count: int
  episodes: int
  seeds: np.ndarray


def join_rows(results: Sequence[EvalResult]) -> EvalResult:
  """The results' rows, one after the other, as one result (of the first's call)."""
  return EvalResult(np.concatenate([r.returns for r in results]),
                    np.concatenate([r.lengths for r in results]),
                    sum(r.frames for r in results), sum(r.steps for r in results),
                    results[0].seconds, None, results[0].timing)


class Evaluator(abc.ABC):
  """Plays networks given as seed chains; see the module docstring."""

  @property
  @abc.abstractmethod
  def capacity(self) -> int:
    """The most networks one `evaluate` call takes."""

  @abc.abstractmethod
  def evaluate(self, genomes: Sequence[genome_lib.Genome], episodes: int,
               seeds: np.ndarray, expected_steps: Optional[Sequence[float]] = None,
               observe: Optional[np.ndarray] = None) -> EvalResult:
    """Plays `episodes` episodes of each genome, episode (i, e) from seeds[i, e].

    `expected_steps` (one per genome, optional) only orders the work: the
    result is the same without it. `observe` ([genomes, episodes] bool,
    optional; needs observation normalization): the result's `observations`
    holds those episodes' observation sums. Rows of the result follow
    `genomes`. Raises `Stopped` after `stop()`.
    """

  def can_overlap(self, count: int) -> bool:
    """Whether `evaluate_overlapped` can play `count` genomes in one call."""
    del count
    return False

  def evaluate_overlapped(self, first: Request, second: Request,
                          followup: Optional[Followup] = None):
    """Plays `first`, `second` and the genomes that `followup` chooses by
    first's result, in one call: second's episodes fill the slots that
    first's leave idle, and the followup's start as soon as first's last
    episode ends. Returns their three results (None for no followup), each
    as `evaluate` gives it. Only where `can_overlap`."""
    raise NotImplementedError(f"{type(self).__name__} does not overlap calls.")

  def set_center(self, center: np.ndarray) -> None:
    """The root of CENTER chains from now on (ES's theta)."""
    raise NotImplementedError(f"{type(self).__name__} does not take a centre.")

  def set_normalization(self, mean: np.ndarray, std: np.ndarray) -> None:
    """The observation statistics every network plays with from now on."""
    raise NotImplementedError(f"{type(self).__name__} does not normalize observations.")

  def remember(self, genomes: Sequence[genome_lib.Genome]) -> None:
    """A hint: the next genomes descend from these (keep their weights)."""

  def prepare(self, genomes: Sequence[Optional[genome_lib.Genome]]) -> None:
    """A hint: the next `evaluate` plays these (None: not known yet)."""

  @abc.abstractmethod
  def stop(self) -> None:
    """Makes the running (and every later) `evaluate` raise `Stopped`."""

  def close(self) -> None:
    """Frees what the evaluator holds (envs, workers)."""

  def describe(self) -> str:
    return type(self).__name__


class LocalEvaluator(Evaluator):
  """Builds the weights here and plays them on a `PipelinedEvaluator`.

  Genomes still loaded from the last call are played in place (e.g. the
  GA's elite candidates, just evaluated); `prepare` builds and stages the
  next population's weights in a thread while the current call plays.

  Args:
    pipelined: the `evaluation.PipelinedEvaluator` (its env and network).
    builder: the `genome.ParamBuilder` (noise table and parent cache).
  """

  def __init__(self, pipelined: evaluation.PipelinedEvaluator,
               builder: genome_lib.ParamBuilder):
    self.pipelined = pipelined
    self.builder = builder
    self.network = pipelined.network
    self.env = pipelined.env
    self.normalizer = None        # e.g. ES's VirtualBatchNorm, applied after loads
    self.last_statistics = None   # what `normalizer.apply` returned for the last load
    self._rows: Dict[genome_lib.Genome, int] = {}
    self._build_lock = threading.Lock()
    self._pool = futures.ThreadPoolExecutor(max_workers=1)
    self._prepared = None  # (genomes, future of StagedWeights)
    self.overlapped_calls = 0  # evaluate_overlapped calls played as one call
    self._staged = None  # the weights loaded last

  @property
  def capacity(self) -> int:
    return self.network.capacity

  def set_center(self, center: np.ndarray) -> None:
    with self._build_lock:
      self.builder.set_center(center)
    self._rows = {g: i for g, i in self._rows.items() if g.init != genome_lib.CENTER}

  def remember(self, genomes) -> None:
    with self._build_lock:
      self.builder.remember(genomes)

  def prepare(self, genomes) -> None:
    genomes = list(genomes)
    if len(genomes) > self.capacity:
      raise ValueError(f"{len(genomes)} genomes exceed the capacity {self.capacity}.")

    # Started by the next call once its own weights are loaded, so that it
    # never waits for this build (random search loads its elite candidates).
    self._prepared = (genomes, None)

  def _start_prepared(self) -> None:
    if self._prepared is None or self._prepared[1] is not None:
      return
    genomes = self._prepared[0]

    def stage():
      staged = None
      with self._build_lock:
        for start, run in _known_runs(genomes):
          staged = self.network.stage(self.builder.build_many(run), staged,
                                      first_row=start)
      return staged

    self._prepared = (genomes, self._pool.submit(stage))

  def _staged_for(self, genomes):
    staged, known = None, []
    # Prepared weights are for a later call (e.g. the GA's next population,
    # prepared before its elite candidates play): a call that asks for none
    # of them (random search's candidates, with the last elite, are loaded
    # anew) leaves them for that later call.
    if self._prepared is not None and any(
        k is not None and k == g for k, g in zip(self._prepared[0], genomes)):
      self._start_prepared()
      known, pending = self._prepared
      self._prepared = None
      staged = pending.result()
    with self._build_lock:
      for i, g in enumerate(genomes):
        if staged is not None and i < len(known) and known[i] == g:
          continue
        staged = self.network.stage(self.builder.build(g, cache=False)[None], staged,
                                    first_row=i)
    staged.loaded = len(genomes)
    return staged

  def load(self, genomes) -> None:
    """Loads `genomes` into rows 0.. (normalized when a normalizer is set)."""
    genomes = list(genomes)
    if not 1 <= len(genomes) <= self.capacity:
      raise ValueError(f"need 1..{self.capacity} genomes, got {len(genomes)}.")
    self._load_staged(self._staged_for(genomes), genomes)

  def _load_staged(self, staged, genomes) -> None:
    self.network.load(staged)
    self._staged = staged  # TF's now: read (rows kept by `_load_keeping`), never written
    self._rows = {g: i for i, g in enumerate(genomes)}
    self.last_statistics = (self.normalizer.apply(len(genomes))
                            if self.normalizer is not None else None)

  def set_normalization(self, mean: np.ndarray, std: np.ndarray) -> None:
    self.pipelined.set_normalization(mean, std)

  def evaluate(self, genomes, episodes, seeds, expected_steps=None,
               observe=None) -> EvalResult:
    started = time.perf_counter()
    genomes = list(genomes)
    if genomes and all(g in self._rows for g in genomes):
      rows = [self._rows[g] for g in genomes]
    else:
      self.load(genomes)
      rows = len(genomes)
    self._start_prepared()  # builds the next call's weights while these play
    result = self.pipelined.evaluate(rows, episodes, expected_steps, seeds, observe)
    if result.timing is not None:  # the weights' building and loading, too
      result.timing = result.timing.with_load(time.perf_counter() - started)
    return result

  def can_overlap(self, count: int) -> bool:
    # A weight normalizer (VBN) computes its statistics per load.
    return self.normalizer is None and count <= self.capacity

  def evaluate_overlapped(self, first, second, followup=None):
    genomes = list(second.genomes) + list(first.genomes)
    if not self.can_overlap(len(genomes)):
      raise ValueError(f"{len(genomes)} genomes cannot play in one call (capacity "
                       f"{self.capacity}{', weight normalizer' if self.normalizer else ''}).")
    started = time.perf_counter()
    self._load_keeping(second.genomes, first.genomes)
    self.overlapped_calls += 1
    offset = len(second.genomes)
    parts = [evaluation.Part(range(offset, len(genomes)), first.episodes, first.seeds,
                             first.expected_steps),
             evaluation.Part(range(offset), second.episodes, second.seeds,
                             second.expected_steps)]
    late = None
    if followup is not None:
      late = evaluation.LatePart(
          0, lambda result: [offset + int(i) for i in followup.choose(result)],
          followup.count, followup.episodes, followup.seeds)
    results = self.pipelined.evaluate_parts(parts, late)
    if results[0].timing is not None:
      timing = results[0].timing.with_load(time.perf_counter() - started)
      results = [dataclasses.replace(r, timing=timing) for r in results]
    return results[0], results[1], results[2] if late is not None else None

  def _load_keeping(self, new, kept) -> None:
    """Loads `new` into rows 0.. and `kept` after them, copying the weights of
    those loaded now (e.g. the GA's elite candidates) instead of building them."""
    new, kept = list(new), list(kept)
    if (self._staged is None or not new or None in new
        or any(g not in self._rows for g in kept)):
      self.load(new + kept)
      return
    self._prepared = None  # the prepared population is one of `new` now
    staged = None
    with self._build_lock:
      for start, run in _known_runs(new):
        staged = self.network.stage(self.builder.build_many(run), staged, first_row=start)
    rows = [self._rows[g] for g in kept]
    at = slice(len(new), len(new) + len(kept))
    for arrays, loaded in ((staged.kernels, self._staged.kernels),
                           (staged.biases, self._staged.biases)):
      for array, loaded_array in zip(arrays, loaded):
        array[at] = loaded_array[rows]
    staged.loaded = len(new) + len(kept)
    self._load_staged(staged, new + kept)

  def stop(self) -> None:
    self.pipelined.stop()

  def close(self) -> None:
    self._pool.shutdown(wait=True)
    self.env.close()

  def describe(self) -> str:
    groups = len(self.pipelined.groups)
    return (f"local: {self.env.num_envs} slots ({type(self.env).__name__}) in {groups} "
            f"groups | op {'compiled' if self.network.use_op else 'reference'}")


def _known_runs(genomes: List[Optional[genome_lib.Genome]]):
  """(start, run) for each run of consecutive genomes that are not None."""
  start = None
  for i, g in enumerate(genomes + [None]):
    if g is not None and start is None:
      start = i
    elif g is None and start is not None:
      yield start, genomes[start:i]
      start = None
