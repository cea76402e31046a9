"""The life of a training run, the same for every algorithm (GA3C, TD3, GA / ES / random search).

Each algorithm module offers one `build(config)` that returns a `Job`: how to
make the algorithm, its checkpoint store and its `RunOptions`. Then

    summary = run_loop.run(system.build(config), flags_text=FLAGS.flags_into_string())

does, in this order:

    hold <logdir>/run.lock                             (tfrl.logdir_lock)
    refuse a fresh run over a checkpoint; report one that cannot be read
    algorithm = job.make()
    --resume: check the checkpoint is this run's, restore it, say from where
    write <logdir>/flags.txt                           (flags_text, if given)
    until a signal or algorithm.finished():            (tfrl.stopping)
      line = algorithm.step()                          # summaries: <logdir>'s writer
      checkpoint, export when due                      (options.checkpoint_every, export_every)
      print algorithm.saved(line, their seconds)
    final save (a second signal abandons it):
      algorithm.end(reason); checkpoint; export; <logdir>/summary.json

An algorithm plugs in by subclassing `Algorithm` (one step, when to stop, what
to export, what its summary says) and picking a `CheckpointStore`: TF
checkpoints (`tfrl.tf_checkpoints.RunCheckpoints`, GA3C and TD3) or a JSON
state with an .npz of arrays (`tfrl.neuroevolution.checkpoint.Store`). The
guarantees of docs/reliability.md live here, once for all of them:

  * one run per logdir; a fresh run never writes over a checkpoint; --resume
    refuses another run's checkpoint and says when there is none; the flags
    file is written only for a run whose checkpoint was accepted;
  * a checkpoint is written only when the algorithm's count moved since the
    last one, so none is ever written twice under one number;
  * the first SIGINT / SIGTERM ends the loop after the step under way (a step
    abandoned half-way, `Interrupted`, goes back to the last checkpoint); the
    final checkpoint, export and summary follow, and the run exits 0. A second
    signal abandons the final save in one line (exit 1), the previous
    checkpoint intact;
  * an error in the loop (a bug, a full disk) ends the run without a final
    save: the last complete checkpoint stays the latest.
"""

import abc
import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional, Tuple

from absl import logging

from tfrl import atomic_files
from tfrl import errors
from tfrl import logdir_lock
from tfrl import resume
from tfrl import stopping

FLAGS_FILE = "flags.txt"
SUMMARY_FILE = "summary.json"
REQUESTED = "requested"  # the stop reason of a signal or of Algorithm.request_stop


class Interrupted(Exception):
  """Raised by a step that a stop request abandoned half-way: its state may be
  half-updated, so the run goes back to its last checkpoint and ends."""


@dataclasses.dataclass(frozen=True)
class Every:
  """A cadence: whenever the algorithm's count crosses a multiple of `steps`, or
  `seconds` after the last time (0: not by that measure; both 0: never)."""
  steps: int = 0
  seconds: float = 0.0


class _Due:
  """When `Every` falls due, from the count and time of the last time it did."""

  def __init__(self, every: Every, count: int):
    self._every = every
    self.done(count)

  def __call__(self, count: int) -> bool:
    steps, seconds = self._every.steps, self._every.seconds
    return ((steps > 0 and count // steps > self._count // steps) or
            (seconds > 0 and time.time() - self._time >= seconds))

  def done(self, count: int) -> None:
    self._count, self._time = count, time.time()


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """How the skeleton runs an algorithm (each algorithm's `build` makes it from its config).

  Attributes:
    logdir: checkpoints, TensorBoard, flags, summary and policy go here.
    resume: continue from the checkpoint in `logdir` (else one there is refused).
    checkpoint_every: periodic checkpoints (the final one is always written).
    export: write the policy at the end (and every `export_every`).
    export_every: periodic exports, as `checkpoint_every`.
  """
  logdir: str
  resume: bool = False
  checkpoint_every: Every = Every()
  export: bool = True
  export_every: Every = Every()


class Console:
  """Where a run's lines go: absl logging, as sentences ("Resumed from X at step
  60."), or with `print_fn` printed as they are, messages after a "[name] "
  prefix ("[ga] resumed from X at generation 1 (64 frames)")."""

  def __init__(self, name: str = "", print_fn: Optional[Callable[[str], None]] = None):
    self._name = name
    self._print = print_fn

  def line(self, text: str) -> None:
    """A progress line, as the algorithm wrote it."""
    if self._print is not None:
      self._print(text)
    else:
      logging.info("%s", text)

  def say(self, message: str, warning: bool = False) -> None:
    """A message of the run (resumed, stopped, ...)."""
    if self._print is not None:
      self._print(f"[{self._name}] {message}")
      return
    sentence = message[:1].upper() + message[1:]
    sentence += "" if sentence.endswith(".") else "."
    (logging.warning if warning else logging.info)("%s", sentence)


class Algorithm(abc.ABC):
  """What an algorithm supplies to `run`. The skeleton calls, in order:

      identity(), progress()       when it resumes (and for its messages)
      begin()                      once, signals handled from here on
      finished(), step()           until finished() gives a reason or a signal comes
      count()                      after each step, for the checkpoint cadence
      saved(line, seconds)         after the step's checkpoint and export, if due
      request_stop()               from the signal handler
      end(reason), export(), results()   in the final save
      close()                      always, last

  `checkpoint` (TF stores) or `state()` / `restore()` (the JSON + npz store)
  is what its `CheckpointStore` saves. A failure met outside the loop (a
  worker thread's) goes to `error`: the run then ends as if stopped, saves,
  and raises it.
  """

  name = "run"
  console = Console()
  error: Optional[BaseException] = None

  @abc.abstractmethod
  def identity(self) -> Dict[str, Any]:
    """What a checkpoint records and a resume must match (a flat dict of JSON values)."""

  @abc.abstractmethod
  def count(self) -> int:
    """The algorithm's own progress (env steps, generations): checkpoints are
    numbered by it, `Every.steps` counts in it, and a checkpoint is written
    only when it moved."""

  @abc.abstractmethod
  def progress(self) -> str:
    """The count in words, e.g. "step 200" ("Resumed from X at step 200.")."""

  def begin(self) -> None:
    """Called once before the first step (e.g. starts threads)."""

  @abc.abstractmethod
  def step(self) -> Optional[str]:
    """One unit of work; a console line, or None. Raises `Interrupted` when a
    stop request abandoned it half-way."""

  def saved(self, line: Optional[str], seconds: Dict[str, float]) -> Optional[str]:
    """The step's console line, once its checkpoint and export (those that
    were due) are written; `seconds` holds the seconds each took ("checkpoint",
    "export"). By default `line`, as `step` gave it."""
    del seconds
    return line

  @abc.abstractmethod
  def finished(self) -> Optional[str]:
    """Why the run should end now (e.g. "max_frames"), or None to go on."""

  def request_stop(self) -> None:
    """Asks the step under way to end soon (called from a signal handler)."""

  def end(self, reason: str) -> None:
    """The loop has ended, for `reason`; called before the final checkpoint."""

  def export(self) -> Dict[str, Any]:
    """Writes the policy; entries for the summary (e.g. its path)."""
    return {}

  @abc.abstractmethod
  def results(self) -> Dict[str, Any]:
    """What `summary.json` says about the run (the skeleton adds stop_reason,
    checkpoint, seconds and the export's entries)."""

  def close(self) -> None:
    """Frees what the algorithm holds (threads, envs, workers); called on every exit."""


class CheckpointStore(abc.ABC):
  """A run's checkpoints in one format. Messages name `directory` and `description`
  ("<directory> already holds <description> of an earlier run")."""

  directory: str
  description = "checkpoints"

  @abc.abstractmethod
  def exists(self) -> bool:
    """Whether a checkpoint is there, readable or not."""

  @abc.abstractmethod
  def check(self) -> None:
    """Raises `resume.CorruptCheckpoint` for what is unreadable on disk (before
    the algorithm is built)."""

  @abc.abstractmethod
  def saved_identity(self) -> Optional[Dict[str, Any]]:
    """The identity the latest checkpoint recorded."""

  @property
  @abc.abstractmethod
  def latest(self) -> Optional[str]:
    """The path of the latest checkpoint (None: there is none)."""

  @abc.abstractmethod
  def restore(self, algorithm: Algorithm) -> str:
    """Loads the latest checkpoint into `algorithm`; the path it names."""

  @abc.abstractmethod
  def save(self, algorithm: Algorithm, number: int, identity: Dict[str, Any]) -> str:
    """Writes checkpoint `number` of `algorithm`; `errors.RunFailed` if it cannot
    (the previous checkpoint then stays the latest)."""


@dataclasses.dataclass(frozen=True)
class Job:
  """What `run` runs: each algorithm's `build(config)` returns one.

  Attributes:
    make: makes the algorithm; called once the logdir is locked and its
      checkpoint accepted (so a refused run starts no env, thread or worker).
    store: the run's checkpoints.
    options: how the skeleton runs it.
  """
  make: Callable[[], Algorithm]
  store: CheckpointStore
  options: RunOptions

  def then(self, made: Callable[[Algorithm], None]) -> "Job":
    """This job, calling `made(algorithm)` once `make` has made it, before its
    restore and first step (for a caller that watches the run: a test, a
    benchmark's meter)."""
    def make() -> Algorithm:
      algorithm = self.make()
      made(algorithm)
      return algorithm
    return dataclasses.replace(self, make=make)


class Run:
  """The phases of `run`, for a caller that looks in between (e.g. a test that
  restores a checkpoint without training):

      with Run(job) as phases:              # the lock; refuses a fresh run over a checkpoint
        algorithm = job.make()
        phases.restore(algorithm)           # --resume: phases.restored_from
        summary = phases.train(algorithm)
  """

  def __init__(self, job: Job, flags_text: Optional[str] = None):
    self.store = job.store
    self.options = job.options
    self.restored_from: Optional[str] = None
    self._flags_text = flags_text
    self._lock: Optional[logdir_lock.Lock] = None
    self._identity: Dict[str, Any] = {}
    self._saved_count: Optional[int] = None

  def __enter__(self) -> "Run":
    self._lock = logdir_lock.acquire(self.options.logdir)
    try:
      if self.store.exists():
        if not self.options.resume:
          resume.refuse_fresh_run(self.store.directory, self.store.description)
        self.store.check()
    except BaseException:
      self._lock.release()
      raise
    return self

  def __exit__(self, *exc_info) -> None:
    self._lock.release()

  def restore(self, algorithm: Algorithm) -> Optional[str]:
    """Restores the checkpoint of a resumed run after checking it is this run's."""
    if not self.store.exists():
      if self.options.resume:
        algorithm.console.say(resume.nothing_to_resume(self.options.logdir), warning=True)
      return None
    resume.check_same_run(self.store.saved_identity(), algorithm.identity(),
                          self.store.directory)
    self.restored_from = self.store.restore(algorithm)
    algorithm.console.say(f"resumed from {self.restored_from} at {algorithm.progress()}")
    return self.restored_from

  def train(self, algorithm: Algorithm) -> Dict[str, Any]:
    """The loop and the final save; returns the summary (also in summary.json)."""
    options = self.options
    started = time.time()
    self._identity = resume.as_json(algorithm.identity())
    self._saved_count = algorithm.count()
    if self._flags_text is not None:
      atomic_files.write_text(os.path.join(options.logdir, FLAGS_FILE), self._flags_text)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    writer = tf.summary.create_file_writer(options.logdir)
    try:
      with writer.as_default():
        reason, signalled = self._loop(algorithm, writer)
        summary = self._final_save(algorithm, reason, started)
    finally:
      writer.close()
    if signalled:
      algorithm.console.say(f"stopped by a signal; {self._kept(algorithm)}; resume with "
                            f"--resume")
    return summary

  def _loop(self, algorithm: Algorithm, writer) -> Tuple[str, bool]:
    """Steps until done; (why it ended, whether a signal ended it)."""
    checkpoints = _Due(self.options.checkpoint_every, algorithm.count())
    exports = _Due(self.options.export_every, algorithm.count())
    with stopping.on_signals(algorithm.request_stop) as signalled:
      algorithm.begin()
      while True:
        reason = REQUESTED if signalled.is_set() else algorithm.finished()
        if reason is not None:
          break
        try:
          line = algorithm.step()
        except Interrupted:
          if self.store.exists():
            self.store.restore(algorithm)
          reason = REQUESTED
          break
        seconds = {}
        count = algorithm.count()
        if checkpoints(count):
          checkpoints.done(count)
          seconds["checkpoint"] = _timed(self._save, algorithm)
        if self.options.export and exports(count):
          exports.done(count)
          seconds["export"] = _timed(self._export, algorithm)
        line = algorithm.saved(line, seconds)
        writer.flush()
        if line:
          algorithm.console.line(line)
    return reason, signalled.is_set()

  def _final_save(self, algorithm: Algorithm, reason: str, started: float) -> Dict[str, Any]:
    with stopping.final_save(self.options.logdir):
      algorithm.end(reason)
      self._save(algorithm)
      exported = self._export(algorithm) if self.options.export else {}
      if algorithm.error is not None:
        raise algorithm.error
      summary = dict(algorithm.results(), stop_reason=reason, checkpoint=self.store.latest,
                     **exported)
      summary["seconds"] = time.time() - started
      path = os.path.join(self.options.logdir, SUMMARY_FILE)
      atomic_files.write_json(path, summary, indent=1)
      logging.info("Summary written to %s", path)
    return summary

  def _save(self, algorithm: Algorithm) -> None:
    count = algorithm.count()
    if count != self._saved_count:  # else nothing moved since the last checkpoint
      self.store.save(algorithm, count, self._identity)
      self._saved_count = count

  def _export(self, algorithm: Algorithm) -> Dict[str, Any]:
    # Imported here: the skeleton itself needs no TensorFlow (an entry point's
    # flags are checked before it is loaded); the algorithm has loaded it by now.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
      return algorithm.export()
    except (OSError, tf.errors.OpError) as e:
      raise errors.RunFailed(f"cannot export the policy to {self.options.logdir}: "
                          f"{resume.first_line(e)}; {self._kept(algorithm)}") from e

  def _kept(self, algorithm: Algorithm) -> str:
    if self.store.latest is None:
      return f"no checkpoint was written in {self.options.logdir}"
    return f"the checkpoint in {self.options.logdir} holds {algorithm.progress()}"


def _timed(function: Callable[[Algorithm], Any], algorithm: Algorithm) -> float:
  """The seconds `function(algorithm)` took."""
  started = time.perf_counter()
  function(algorithm)
  return time.perf_counter() - started


def run(job: Job, flags_text: Optional[str] = None) -> Dict[str, Any]:
  """A whole run (see the module docstring); returns its summary. `flags_text`
  (an entry point's flags) goes to <logdir>/flags.txt once the checkpoint is accepted."""
  with Run(job, flags_text) as phases:
    algorithm = job.make()
    try:
      phases.restore(algorithm)
      return phases.train(algorithm)
    finally:
      algorithm.close()
