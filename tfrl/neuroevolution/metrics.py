"""The per-generation metrics every algorithm reports, and how NaN returns rank.

A NaN return (an env that reports NaN rewards, say) must neither win a
selection nor poison a statistic: `rankable` turns it into the worst value
before any ranking, and the metrics count it (`nan_returns`) and summarise the
other returns.
"""

import time

import numpy as np


def rankable(fitness: np.ndarray) -> np.ndarray:
  """`fitness` with NaN replaced by -inf, so that every ranking puts it last."""
  fitness = np.asarray(fitness, np.float64)
  return np.where(np.isnan(fitness), -np.inf, fitness)


def generation_metrics(algorithm, fitness: np.ndarray, frames: int, start: float,
                       eval_seconds: float) -> dict:
  """Counts a finished generation on `algorithm` and returns its metrics.

  `algorithm` has `generation`, `frames` and `elite_score`; `start` is the
  generation's time.time() at its start.
  """
  algorithm.generation += 1
  algorithm.frames += frames
  seconds = time.time() - start
  fitness = np.asarray(fitness, np.float64)
  nan = np.isnan(fitness)
  scored = fitness[~nan]
  return {
      "generation": algorithm.generation,
      "best": float(scored.max()) if scored.size else float("nan"),
      "mean": float(scored.mean()) if scored.size else float("nan"),
      "nan_returns": int(nan.sum()),
      "elite": algorithm.elite_score,
      "frames": algorithm.frames,
      "generation_frames": frames,
      "frames_per_second": frames / max(seconds, 1e-9),
      "generation_seconds": seconds,
      "eval_seconds": eval_seconds,
  }
