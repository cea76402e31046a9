"""One TensorBoard profiler trace of a span of a run, under <logdir>/profile.

    trace = profiling.Window(logdir, start=10, end=20, on_written=print)
    if trace.update(count):   # each tick of the run; True when it started the trace
      ...
    trace.stop()              # when the run ends (a trace under way is written)

The trace starts at the first tick whose count is at or past `start` and ends
at the first one at or past `end` (so it spans at least one tick even when
the count jumps), once per run; `on_written(directory)` is called when it is
written. GA3C counts training steps (--profile_steps=START,END), GA / ES /
random search generations (--profile_generation=N: [N - 1, N), from the start
of generation N's step to its checkpoint).
"""

import os
from typing import Callable

import tensorflow as tf


class Window:
  """See the module docstring."""

  def __init__(self, logdir: str, start: int, end: int,
               on_written: Callable[[str], None] = lambda directory: None):
    if not 0 <= start < end:
      raise ValueError(f"a profiler window needs 0 <= start < end, got [{start}, {end}).")
    self.directory = os.path.join(logdir, "profile")
    self.start, self.end = start, end
    self._on_written = on_written
    self._recording = self._done = False

  def update(self, count: int) -> bool:
    """Starts or ends the trace as `count` reaches `start` or `end`; whether it started it."""
    if not self._recording and not self._done and count >= self.start:
      tf.profiler.experimental.start(self.directory)
      self._recording = True
      return True
    if self._recording and count >= self.end:
      self.stop()
    return False

  def stop(self) -> None:
    """Ends and writes the trace if one is recording."""
    if self._recording:
      tf.profiler.experimental.stop()
      self._recording, self._done = False, True
      self._on_written(self.directory)
