"""GA3C statistics: rates, queue sizes and the rolling score for the console
line and TensorBoard (the summaries go to the default writer: the run's)."""

import collections
import time
from typing import Dict, Optional

import numpy as np
import tensorflow as tf


class Stats:
  """Rolling score, rates and queue sizes; summaries and the console line.

  Args:
    score_window: episodes in the rolling score.
    frames_per_step: emulator frames per env step (frame skip).
  """

  def __init__(self, score_window: int = 100, frames_per_step: int = 1):
    self.scores = collections.deque(maxlen=score_window)
    # The window's scores as a checkpoint saves them, so that a resumed run's
    # rolling score (and --target_score) goes on from the same episodes.
    self.saved_scores = tf.Variable(tf.zeros([0]), shape=tf.TensorShape([None]),
                                    trainable=False, name="recent_scores")
    self.frames_per_step = frames_per_step
    self._last_time = time.time()
    self._last = None
    self.rates: Dict[str, float] = {}
    self.history = []  # (frames, episodes, rolling score) per line.

  @property
  def rolling_score(self) -> float:
    return float(np.mean(self.scores)) if self.scores else float("nan")

  def add_episodes(self, scores, lengths, frames: int) -> None:
    if len(scores) == 0:
      return
    self.scores.extend(float(s) for s in scores)
    self.saved_scores.assign(np.asarray(self.scores, np.float32))
    tf.summary.histogram("episode/score", np.asarray(scores, np.float32), step=frames)
    tf.summary.scalar("episode/mean_length", float(np.mean(lengths)), step=frames)

  def restore_scores(self) -> None:
    """Refills the window from `saved_scores` (after a checkpoint's restore)."""
    self.scores.clear()
    self.scores.extend(float(s) for s in self.saved_scores.numpy())

  def report(self, counters: Dict[str, int], queue_sizes: Dict[str, int],
             workers: Dict[str, int], metrics: Optional[Dict[str, float]] = None,
             learning_rate: Optional[float] = None) -> Dict:
    """Computes rates since the last call and writes summaries; the row (see `line`)."""
    now = time.time()
    dt = max(now - self._last_time, 1e-6)
    last = self._last or counters
    rate = lambda k: (counters[k] - last[k]) / dt
    frames = counters["env_steps"] * self.frames_per_step
    self.rates = {
        "fps": rate("env_steps") * self.frames_per_step,
        "pps": rate("predictions"),
        "tps": rate("train_steps"),
        "samples_per_second": rate("train_samples"),
    }
    self._last, self._last_time = dict(counters), now
    row = {"frames": frames, "episodes": counters["episodes"],
           "train_steps": counters["train_steps"],
           "rolling_score": self.rolling_score, **self.rates,
           **{f"queue/{k}": v for k, v in queue_sizes.items()},
           **{f"workers/{k}": v for k, v in workers.items()}}
    self.history.append(row)
    scalars = {"counters/episodes": counters["episodes"],
               "counters/train_steps": counters["train_steps"],
               **{f"rates/{k}": v for k, v in self.rates.items()},
               **{f"queues/{k}": v for k, v in queue_sizes.items()},
               **{f"workers/{k}": v for k, v in workers.items()},
               **{f"loss/{k}": v for k, v in (metrics or {}).items()}}
    if self.scores:
      scalars["episode/rolling_score"] = self.rolling_score
    if learning_rate is not None:
      scalars["loss/learning_rate"] = learning_rate
    for name, value in scalars.items():
      tf.summary.scalar(name, value, step=frames)
    return row

  def line(self, row: Dict, metrics: Optional[Dict[str, float]] = None) -> str:
    """The console line of a `report` row."""
    text = (f"frames {row['frames']} | episodes {row['episodes']} | score "
            f"{row['rolling_score']:.2f} (last {len(self.scores)}) | FPS {row['fps']:.0f} | "
            f"PPS {row['pps']:.0f} | TPS {row['tps']:.1f} | queues P "
            f"{row.get('queue/prediction', 0)} T {row.get('queue/training', 0)} | NA "
            f"{row.get('workers/agents', 0)} NP {row.get('workers/predictors', 0)} NT "
            f"{row.get('workers/trainers', 0)}")
    if metrics:
      text += (f" | loss {metrics.get('loss', float('nan')):.3f} entropy "
               f"{metrics.get('entropy', float('nan')):.3f}")
      if "lag_mean" in metrics:
        text += f" | lag {metrics['lag_mean']:.1f} (max {metrics['lag_max']:.0f})"
    return text

  def scalar(self, name: str, value: float, frames: int) -> None:
    """One TensorBoard scalar at `frames`."""
    tf.summary.scalar(name, value, step=frames)

  def text(self, name: str, value: str, frames: int) -> None:
    """One TensorBoard text summary at `frames`."""
    tf.summary.text(name, value, step=frames)
