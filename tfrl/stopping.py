"""Ctrl-C / SIGTERM as a request to stop cleanly (checkpoint, export, exit 0).

    with stopping.on_signals(evaluator.stop) as stop:
      while not stop.is_set():
        ...  # one unit of work; the loop ends, then the caller saves.

Handlers are installed only from the main thread (signal's rule) and the
previous ones come back on exit, so a second Ctrl-C during the final save
gets Python's default behaviour.
"""

import contextlib
import signal
import threading
from typing import Callable, Iterator, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_signals(callback: Optional[Callable[[], None]] = None) -> Iterator[threading.Event]:
  """Yields an Event set by SIGINT/SIGTERM, which also call `callback`."""
  stop = threading.Event()

  def handle(*_):
    stop.set()
    if callback is not None:
      callback()

  previous = {}
  if threading.current_thread() is threading.main_thread():
    for sig in SIGNALS:
      previous[sig] = signal.signal(sig, handle)
  try:
    yield stop
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
