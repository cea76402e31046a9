"""Ctrl-C / SIGTERM as a request to stop cleanly (checkpoint, export, exit 0).

    with stopping.on_signals(evaluator.stop) as stop:
      while not stop.is_set():
        ...  # one unit of work; the loop ends, then the caller saves.
    with stopping.final_save(logdir):
      ...  # the final checkpoint and policy

Handlers are installed only from the main thread (signal's rule) and the
previous ones come back on exit. A signal during the final save abandons
it: the run ends at once with one line (exit 1) instead of a traceback
(SIGINT) or a silent death (SIGTERM), and since every write is atomic the
previous complete checkpoint stays the latest.
"""

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator, NoReturn, Optional

from absl import logging

from tfrl import errors

SIGNALS = (signal.SIGINT, signal.SIGTERM)


# A signal that arrives inside `critical()` takes effect when the block ends.
_critical_depth = 0
_pending: Optional[str] = None


def _abandon(message: str) -> NoReturn:
  """Ends the process now: one line on stderr, exit 1.

  No Python clean-up runs (a raised exception could land in a logging call,
  which swallows it). The lock goes with the process; a temporary file or
  folder left behind is replaced by the next write of that file.
  """
  os.write(2, f"{errors.program()}: error: {message}\n".encode())
  os._exit(1)


@contextlib.contextmanager
def _handlers(handle) -> Iterator[None]:
  previous = {}
  if threading.current_thread() is threading.main_thread():
    for sig in SIGNALS:
      previous[sig] = signal.signal(sig, handle)
  try:
    yield
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)


@contextlib.contextmanager
def on_signals(callback: Optional[Callable[[], None]] = None) -> Iterator[threading.Event]:
  """Yields an Event set by SIGINT/SIGTERM, which also call `callback`."""
  stop = threading.Event()

  def handle(*_):
    stop.set()
    if callback is not None:
      callback()

  with _handlers(handle):
    yield stop


@contextlib.contextmanager
def final_save(logdir: str) -> Iterator[None]:
  """Runs the final save; SIGINT/SIGTERM during it abandon the save and the run."""
  global _pending
  _pending = None

  def handle(signum, _):
    global _pending
    message = (f"{signal.Signals(signum).name} during the final save: abandoned it; "
               f"the latest complete checkpoint in {logdir} is the one before")
    if _critical_depth:
      _pending = message
    else:
      _abandon(message)

  with _handlers(handle):
    logging.info("Writing the final checkpoint to %s (Ctrl-C again abandons it and keeps "
                 "the previous one).", logdir)
    yield


@contextlib.contextmanager
def critical() -> Iterator[None]:
  """A block that an abandoned final save must not split (two renames that
  swap a directory): a signal in it takes effect when the block ends."""
  global _critical_depth, _pending
  _critical_depth += 1
  try:
    yield
  finally:
    _critical_depth -= 1
    if not _critical_depth and _pending is not None:
      message, _pending = _pending, None
      _abandon(message)
