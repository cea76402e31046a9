"""GA3C statistics: a console line every few seconds and TensorBoard summaries."""

import collections
import time
from typing import Dict, Optional

from absl import logging
import numpy as np
import tensorflow as tf


class Stats:
  """Rolling score, rates and queue sizes; logs and writes summaries.

  Args:
    logdir: TensorBoard directory (None: console only).
    score_window: episodes in the rolling score.
    frames_per_step: emulator frames per env step (frame skip).
  """

  def __init__(self, logdir: Optional[str], score_window: int = 100,
               frames_per_step: int = 1):
    self.scores = collections.deque(maxlen=score_window)
    self.frames_per_step = frames_per_step
    self._writer = tf.summary.create_file_writer(logdir) if logdir else None
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
    if self._writer is not None:
      with self._writer.as_default(step=frames):
        tf.summary.histogram("episode/score", np.asarray(scores, np.float32))
        tf.summary.scalar("episode/mean_length", float(np.mean(lengths)))

  def report(self, counters: Dict[str, int], queue_sizes: Dict[str, int],
             workers: Dict[str, int], metrics: Optional[Dict[str, float]] = None,
             learning_rate: Optional[float] = None, log: bool = True) -> Dict:
    """Computes rates since the last call, logs one line, writes summaries."""
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
    if log:
      logging.info(
          "frames %d | episodes %d | score %.2f (last %d) | FPS %.0f | PPS %.0f"
          " | TPS %.1f | queues P %d T %d | NA %d NP %d NT %d%s",
          frames, counters["episodes"], self.rolling_score, len(self.scores),
          self.rates["fps"], self.rates["pps"], self.rates["tps"],
          queue_sizes.get("prediction", 0), queue_sizes.get("training", 0),
          workers.get("agents", 0), workers.get("predictors", 0),
          workers.get("trainers", 0),
          "" if not metrics else " | loss %.3f entropy %.3f" % (
              metrics.get("loss", float("nan")),
              metrics.get("entropy", float("nan"))))
    if self._writer is not None:
      with self._writer.as_default(step=frames):
        if self.scores:
          tf.summary.scalar("episode/rolling_score", self.rolling_score)
        tf.summary.scalar("counters/episodes", counters["episodes"])
        tf.summary.scalar("counters/train_steps", counters["train_steps"])
        for k, v in self.rates.items():
          tf.summary.scalar(f"rates/{k}", v)
        for k, v in queue_sizes.items():
          tf.summary.scalar(f"queues/{k}", v)
        for k, v in workers.items():
          tf.summary.scalar(f"workers/{k}", v)
        for k, v in (metrics or {}).items():
          tf.summary.scalar(f"loss/{k}", v)
        if learning_rate is not None:
          tf.summary.scalar("loss/learning_rate", learning_rate)
      self._writer.flush()
    return row

  def scalar(self, name: str, value: float, frames: int) -> None:
    """One TensorBoard scalar at `frames`."""
    if self._writer is not None:
      with self._writer.as_default(step=frames):
        tf.summary.scalar(name, value)

  def text(self, name: str, value: str, frames: int) -> None:
    """One TensorBoard text summary at `frames`."""
    if self._writer is not None:
      with self._writer.as_default(step=frames):
        tf.summary.text(name, value)
      self._writer.flush()

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
