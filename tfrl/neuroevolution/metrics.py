"""The per-generation metrics every algorithm reports."""

import time

import numpy as np


def generation_metrics(algorithm, fitness: np.ndarray, frames: int, start: float,
                       eval_seconds: float) -> dict:
  """Counts a finished generation on `algorithm` and returns its metrics.

  `algorithm` has `generation`, `frames` and `elite_score`; `start` is the
  generation's time.time() at its start.
  """
  algorithm.generation += 1
  algorithm.frames += frames
  seconds = time.time() - start
  return {
      "generation": algorithm.generation,
      "best": float(fitness.max()),
      "mean": float(fitness.mean()),
      "elite": algorithm.elite_score,
      "frames": algorithm.frames,
      "generation_frames": frames,
      "frames_per_second": frames / max(seconds, 1e-9),
      "generation_seconds": seconds,
      "eval_seconds": eval_seconds,
  }
