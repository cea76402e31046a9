"""GA3C's Python threads: each calls one tf.function until stopped or its queues close.

    pool = WorkerPool({"agents": 4, "trainers": 2}, make_worker)
    pool.resize("agents", 3)     # starts or stops workers so that 3 run
    pool.stop_all()              # after the queues are closed: joins every thread
"""

import threading
from typing import Callable, Dict, List, Optional

from absl import logging

from tfrl.ga3c.queues import QUEUE_CLOSED_ERRORS


class Worker:
  """A thread calling `fn` (and `on_result` with what it returns) until its
  `stop_event` is set, `stopping()` is true or the queues close. Any other
  error goes to `on_error`, unless the system is stopping anyway."""

  def __init__(self, name: str, fn: Callable, stopping: Callable[[], bool],
               on_error: Callable[[BaseException], None],
               on_result: Optional[Callable] = None):
    self.name = name
    self.stop_event = threading.Event()
    self._fn = fn
    self._stopping = stopping
    self._on_error = on_error
    self._on_result = on_result
    self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

  @property
  def running(self) -> bool:
    return not self.stop_event.is_set()

  def _loop(self):
    try:
      while not self.stop_event.is_set() and not self._stopping():
        result = self._fn()
        if self._on_result is not None:
          self._on_result(result)
    except QUEUE_CLOSED_ERRORS:
      pass
    except Exception as e:  # pylint: disable=broad-except
      if not self._stopping():
        logging.exception("GA3C worker %s failed", self.name)
        self._on_error(e)


class WorkerPool:
  """Up to `limits[kind]` workers of each kind, made by `make(kind, index)`."""

  def __init__(self, limits: Dict[str, int], make: Callable[[str, int], Worker]):
    self._workers: Dict[str, List[Optional[Worker]]] = {
        kind: [None] * n for kind, n in limits.items()}
    self._make = make

  def counts(self) -> Dict[str, int]:
    """How many workers of each kind run."""
    return {kind: sum(1 for w in ws if w is not None and w.running)
            for kind, ws in self._workers.items()}

  def resize(self, kind: str, n: int) -> None:
    """Starts or stops workers of one kind so that `n` of them (1 to its limit) run."""
    workers = self._workers[kind]
    n = max(1, min(n, len(workers)))
    for i, w in enumerate(workers):
      running = w is not None and w.running
      if i < n and not running:
        if w is not None:  # A stopping worker must finish before its slots
          w.thread.join(timeout=30)  # are reused.
          if w.thread.is_alive():
            logging.warning("%s did not stop; not restarting it.", w.name)
            continue
        worker = self._make(kind, i)
        workers[i] = worker
        worker.thread.start()
      elif i >= n and running:
        w.stop_event.set()

  def stop_all(self, report_every: float = 10.0) -> None:
    """Stops every worker and joins its thread (close the queues first: a
    worker blocked on a queue only returns then).

    Waits as long as a worker's call takes: a trainer can be inside an
    optimizer step of many seconds on a slow CPU, and the final checkpoint
    must not be written while it changes the weights, nor may the process
    exit with a thread inside TensorFlow (it crashes at exit). Every
    `report_every` seconds it says who it waits for; a second Ctrl-C during
    the final save still ends the process at once.
    """
    started = [w for ws in self._workers.values() for w in ws if w is not None]
    for w in started:
      w.stop_event.set()
    for w in started:
      w.thread.join(timeout=report_every)
      while w.thread.is_alive():
        logging.info("Waiting for %s to finish its call.", w.name)
        w.thread.join(timeout=report_every)
