"""Frames per second of a stepping function, measured the same way on every side.

Used by benchmarks/env_throughput.py in tfrl's venv and by
benchmarks/peers/envpool_atari.py in envpool's; standard library only, so that
either venv can import it.
"""

import time


def timed(step_fn, seconds):
  """Runs step_fn (returns frames done) for about `seconds`; frames/s."""
  step_fn()  # Warm up (tracing, thread start).
  frames, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    frames += step_fn()
  return frames / (time.perf_counter() - start)
