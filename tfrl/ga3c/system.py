"""GA3C's system: env, network, queues and the threads of its loops, as a
`run_loop.Algorithm` (the skeleton owns the logdir, checkpoints, signals,
export and summary). `build` is the one way to run it:

    summary = run_loop.run(build(config))   # until max_frames, SIGINT or SIGTERM

Python threads only start, balance and stop the loops; each loop iteration is
one call of a `tf.function` (agent segment, predictor batch, trainer step).
Closing the queues ends every loop: no thread stays blocked. A step of the
run is one monitoring tick: stats, the profiler, GST's controller, the
dynamic adjustment of the worker counts.
"""

import os
import threading
import time
from typing import Dict, Optional

from absl import logging
import tensorflow as tf

from tfrl import export
from tfrl import layers as tl
from tfrl import networks
from tfrl import optimizers
from tfrl import precision
from tfrl import profiling
from tfrl import run_loop
from tfrl import tf_checkpoints
from tfrl.envs.make import make_env
from tfrl.ga3c.acting import acting_loops
from tfrl.ga3c.adjuster import Bounds, DynamicAdjuster
from tfrl.ga3c.config import GA3CConfig
from tfrl.ga3c.learner import Learner
from tfrl.ga3c.network import make_network
from tfrl.ga3c.remote_feed import RemoteFeed
from tfrl.ga3c.stats import Stats
from tfrl.ga3c.trainer import Trainer
from tfrl.ga3c.workers import Worker, WorkerPool
from tfrl.layers import gst

COUNTERS = ("env_steps", "episodes", "train_steps", "train_samples",
            "predictions", "prediction_batches")


def make_optimizer(config: GA3CConfig, learning_rate=None):
  """RMSProp (GA3C) or Adam; `learning_rate` may be a tf.Variable (a schedule)."""
  learning_rate = config.learning_rate if learning_rate is None else learning_rate
  if config.optimizer == "adam":
    return optimizers.Adam(learning_rate, epsilon=config.adam_epsilon)
  return optimizers.RMSProp(learning_rate, decay=config.rmsprop_decay,
                            epsilon=config.rmsprop_epsilon)


def build(config: GA3CConfig) -> run_loop.Job:
  """A GA3C run for `run_loop.run`: checkpoints in `<logdir>/checkpoints` (the
  last 3), a checkpoint and an export every `checkpoint_every` seconds."""
  every = run_loop.Every(seconds=config.checkpoint_every)
  return run_loop.Job(
      make=lambda: GA3C(config),
      store=tf_checkpoints.RunCheckpoints(os.path.join(config.logdir, "checkpoints"),
                                          max_to_keep=3),
      options=run_loop.RunOptions(logdir=config.logdir, resume=config.resume,
                                  checkpoint_every=every, export_every=every))


class GA3C(run_loop.Algorithm):
  """One GA3C training run, as `build`'s job makes it once the logdir is locked (see
  the module docstring)."""

  name = "ga3c"

  def __init__(self, config: GA3CConfig):
    self.config = config
    cfg = config
    self.env = make_env(cfg.protocol, cfg.num_env_slots, cfg.seed)
    if self.env.num_actions is None:
      raise ValueError("GA3C needs a discrete action space.")
    self.num_actions = self.env.num_actions
    self.observation_shape = tuple(self.env.observation_shape)
    self.observation_dtype = self.env.observation_dtype
    self.frames_per_step = cfg.protocol.frames_per_step
    tf.random.set_seed(cfg.seed)

    self.precision = precision.resolve(
        cfg.precision, image_network=len(self.observation_shape) == 3)
    self.network = make_network(cfg, self.num_actions, self.observation_shape,
                                self.precision.dtype)
    self.network(tf.zeros((1,) + self.observation_shape,
                          self.observation_dtype))  # Create the variables.
    if cfg.init == "orthogonal":
      networks.orthogonal_init(self.network, seed=cfg.seed)
    # A variable, so that the linear schedule can move it (saved with the optimizer).
    self.learning_rate = tf.Variable(cfg.learning_rate, dtype=tf.float32, trainable=False,
                                     name="learning_rate")
    self.optimizer = make_optimizer(cfg, self.learning_rate)
    self.counters = {k: tf.Variable(0, dtype=tf.int64, trainable=False, name=k)
                     for k in COUNTERS}
    checkpointed = dict(network=self.network, optimizer=self.optimizer,
                        counters=self.counters)
    # GST's reward-aware pruned layers get their target sparsity from a
    # controller fed with the episode scores (see _update_reward_aware).
    self.controller = None
    reward_aware = gst.reward_aware_layers(self.network)
    if reward_aware:
      self.controller = gst.RewardAwareController(cfg.reward_aware or gst.RewardAwareConfig())
      self.controller.update(self.network)  # the initial sparsity.
      # Frequency, begin and end of the decisions: the layers' own spec.
      self._reward_aware_spec = reward_aware[0].spec
      checkpointed["controller"] = self.controller
    self.stats = Stats(cfg.score_window, self.frames_per_step)
    checkpointed["recent_scores"] = self.stats.saved_scores
    # What the skeleton's store saves and restores (tfrl.tf_checkpoints);
    # checkpoints written before the rolling score was saved lack it.
    self.checkpoint_entries = checkpointed
    self.optional_checkpoint_entries = ("recent_scores",)
    self.checkpoint = tf.train.Checkpoint(**checkpointed)
    self._build_loops()
    # --ray_address: Ray actors play segments into the same training queue.
    self.feed = RemoteFeed(
        cfg, network=self.network, version=self.optimizer.step, queues=self.queues,
        counters=self.counters, compute_dtype=self.precision.dtype.name,
        stopping=lambda: self._stopping or self._stop_requested.is_set(),
        fail=self.fail) if cfg.ray_address else None
    self.policy = export.DiscretePolicy(self.network)
    self.adjuster = DynamicAdjuster(
        (cfg.agents, cfg.predictors, cfg.trainers),
        Bounds(cfg.max_agents, cfg.max_predictors, cfg.max_trainers),
        seed=cfg.seed) if cfg.dynamic_adjustment else None
    self.workers = WorkerPool({"agents": cfg.local_agents, "predictors": cfg.max_predictors,
                               "trainers": cfg.max_trainers}, self._make_worker)
    self._stop_requested = threading.Event()
    self._stopping = False
    self._stop_score = float("nan")  # the rolling score when the loop ended
    self._final_row: Dict = {}
    self._last_metrics = None
    self.profiler = None  # --profile_steps: a trace of that span of training steps
    if cfg.profile_steps is not None:
      self.profiler = profiling.Window(
          cfg.logdir, *cfg.profile_steps,
          on_written=lambda path: logging.info("Profiler trace written under %s.", path))
    self._adjust_last = None  # (trained samples, time) at the last trial.
    self.precision_report: Optional[Dict] = None  # set by begin() once traced

  def _build_loops(self) -> None:
    """The queues, and the agents, predictor and trainer that their threads call."""
    cfg = self.config
    self.queues, self.agents, self.predictor = acting_loops(
        cfg, self.env, self.network, num_agents=cfg.local_agents,
        training_capacity=max(cfg.training_queue_size, cfg.segments_per_max_batch),
        counters=self.counters, version=self.optimizer.step)
    self.learner = Learner(self.network, self.optimizer, cfg.learner,
                           after_update=tl.after_update, jit_compile=cfg.jit_compile_train)
    self.trainer = Trainer(self.learner, self.queues,
                           min_segments=cfg.segments_per_min_batch,
                           max_segments=cfg.segments_per_max_batch,
                           counters=self.counters)

  # -- State ----------------------------------------------------------------

  @property
  def frames(self) -> int:
    return int(self.counters["env_steps"].numpy()) * self.frames_per_step

  @property
  def stopping(self) -> bool:
    return self._stopping

  def stop(self) -> None:
    """Asks the run to end (thread- and signal-safe)."""
    self._stop_requested.set()

  def fail(self, error: BaseException) -> None:
    """A worker's error: the run ends, saves, then raises it."""
    self.error = error
    self._stop_requested.set()

  def counter_values(self) -> Dict[str, int]:
    return {k: int(v.numpy()) for k, v in self.counters.items()}

  def worker_counts(self) -> Dict[str, int]:
    return self.workers.counts()

  # -- Workers --------------------------------------------------------------

  def _make_worker(self, kind: str, i: int) -> Worker:
    stopping = lambda: self._stopping
    if kind == "agents":
      agent = tf.constant(i, tf.int32)
      return Worker(f"agent_{i}", lambda: self.agents.run_segment(agent), stopping,
                    self.fail)
    if kind == "predictors":
      return Worker(f"predictor_{i}", self.predictor.predict, stopping, self.fail)
    return Worker(f"trainer_{i}", self.trainer.train, stopping, self.fail,
                  on_result=self._set_metrics)

  def _set_metrics(self, metrics):
    self._last_metrics = metrics

  def set_worker_count(self, kind: str, n: int) -> None:
    """Starts or stops workers of one kind so that `n` of them run."""
    self.workers.resize(kind, n)

  # -- Checkpoints, export, profiling ----------------------------------------

  def identity(self) -> Dict:
    """What a checkpoint of this run records and a resume must match."""
    cfg = self.config
    identity = {"algorithm": "ga3c", **cfg.protocol.identity(),
                "observation_spec": f"{[None, *self.observation_shape]} "
                                    f"{tf.as_dtype(self.observation_dtype).name}",
                "actions": int(self.num_actions)}
    if len(self.observation_shape) == 1:  # the MLP torso (Atari's conv net ignores it)
      identity["hidden_sizes"] = list(cfg.hidden_sizes)
    identity.update(tf_checkpoints.network_identity([self.network]))
    return identity

  def export(self) -> Dict:
    spec = tf.TensorSpec((None,) + self.observation_shape,
                         self.observation_dtype)
    return {"saved_model": export.export_policy(
        self.policy, spec, os.path.join(self.config.logdir, "saved_model"),
        env_protocol=self.config.protocol,
        extra_metadata={"precision": self.precision_report} if self.precision_report else None)}

  def _maybe_profile(self) -> None:
    if self.profiler is None:
      return
    steps = int(self.counters["train_steps"].numpy())
    if self.profiler.update(steps):
      logging.info("Profiler started at training step %d.", steps)

  def _stop_profiler(self) -> None:
    if self.profiler is not None:
      self.profiler.stop()

  # -- The run's steps (run_loop.Algorithm) ----------------------------------

  def count(self) -> int:
    """Env steps: checkpoints are numbered by them."""
    return int(self.counters["env_steps"].numpy())

  def progress(self) -> str:
    return f"frame {self.frames}, episode {int(self.counters['episodes'])}"

  def request_stop(self) -> None:
    self.stop()

  def begin(self) -> None:
    """Traces every loop once (before the threads race to do it), starts the threads."""
    cfg = self.config
    self.agents.run_segment.get_concrete_function()
    # What precision the traced steps run in (the policy's metadata and the summary say).
    self.precision_report = precision.report(
        self.precision, train=self.trainer.train.get_concrete_function(),
        predict=self.predictor.predict.get_concrete_function())
    logging.info("GA3C %s", precision.describe(self.precision_report))
    self.stats.text("run/precision", precision.describe(self.precision_report), self.frames)
    self.stats.restore_scores()  # a resumed run's last episodes (none for a fresh one)
    self._start = self._last_stats = self._last_adjust = time.time()
    self._controller_steps = int(self.counters["train_steps"].numpy())
    self.set_worker_count("trainers", cfg.trainers)
    self.set_worker_count("predictors", cfg.predictors)
    if cfg.agents:  # 0: the Ray runners play alone
      self.set_worker_count("agents", cfg.agents)
    if self.feed is not None:
      self.feed.start()
    self._report()  # the start of the rates

  def step(self) -> Optional[str]:
    """One monitoring tick: stats, profiler, GST's controller, adjustment."""
    cfg = self.config
    time.sleep(0.05)
    now = time.time()
    self._maybe_profile()
    self._schedule_learning_rate()
    line = None
    if now - self._last_stats >= cfg.stats_every:
      self._last_stats = now
      line = self._report()
    elif cfg.target_score is not None or self.controller is not None:
      # Keep the rolling score (stopping rule) and the controller's returns fresh.
      self._drain_episodes()
    self._update_reward_aware()
    if self.adjuster is not None and now - self._last_adjust >= cfg.adjustment_period:
      self._last_adjust = now
      na, np_, nt = self.adjuster.update(self._adjust_rate())
      self.set_worker_count("agents", na)
      self.set_worker_count("predictors", np_)
      self.set_worker_count("trainers", nt)
    return line

  def finished(self) -> Optional[str]:
    """Why training should stop now, or None to go on."""
    cfg = self.config
    if self._stop_requested.is_set():
      return run_loop.REQUESTED
    if cfg.max_frames and self.frames >= cfg.max_frames:
      return "max_frames"
    if cfg.max_seconds and time.time() - self._start >= cfg.max_seconds:
      return "max_seconds"
    if (cfg.target_score is not None
        and len(self.stats.scores) >= self.stats.scores.maxlen
        and self.stats.rolling_score >= cfg.target_score):
      return "target_score"
    return None

  def end(self, reason: str) -> None:
    """Joins every thread before the final checkpoint; logs the last stats line."""
    # Episodes that end while the workers shut down still enter the final
    # rolling score, so keep the one the stopping rule saw.
    self._stop_score = self.stats.rolling_score
    self.close()
    self.console.line(self._report())

  def results(self) -> Dict:
    return {
        "frames": self.frames,
        "episodes": int(self.counters["episodes"].numpy()),
        "train_steps": int(self.counters["train_steps"].numpy()),
        "rolling_score": self.stats.rolling_score,
        "scores_seen": len(self.stats.scores),
        "fps": self._final_row.get("fps"),
        # The rolling score when the loop ended (see `end`).
        "stop_rolling_score": self._stop_score,
        "precision": self.precision_report,
        **({"ray": self.feed.summary()} if self.feed is not None else {}),
    }

  def close(self) -> None:
    """Closes the queues and joins every thread (the loops end with them)."""
    if self._stopping:
      return
    self._stopping = True
    self.queues.close()
    self.workers.stop_all()
    if self.feed is not None:
      self.feed.close()
    self._stop_profiler()

  # -- Monitoring -----------------------------------------------------------

  def _drain_episodes(self) -> None:
    scores, lengths = self.queues.drain_episodes()
    self.stats.add_episodes(scores, lengths, self.frames)
    if self.controller is not None:
      for score in scores:
        self.controller.record_return(float(score))

  def _update_reward_aware(self) -> None:
    """Consults the controller when the trainers' optimizer steps have crossed
    a multiple of the pruning frequency within [begin, end] (as TD3 does)."""
    if self.controller is None:
      return
    before = self._controller_steps
    after = self._controller_steps = int(self.counters["train_steps"].numpy())
    if self.controller.decision_due(self._reward_aware_spec, before, after):
      decision = self.controller.update(self.network)
      self.stats.scalar("gst/target_sparsity", float(self.controller.sparsity), self.frames)
      if decision != "wait":
        logging.info("training step %d: reward-aware %s -> sparsity %.3f", after, decision,
                     float(self.controller.sparsity))

  def _report(self) -> str:
    """Summaries of the rates, queues and workers since the last report; its line."""
    self._drain_episodes()
    metrics = None
    if self._last_metrics is not None:
      metrics = {k: float(v) for k, v in self._last_metrics.items()}
    sizes = {"prediction": int(self.queues.prediction.size()),
             "training": int(self.queues.training.size())}
    self._final_row = self.stats.report(self.counter_values(), sizes, self.worker_counts(),
                                        metrics, float(self.learning_rate.numpy()))
    line = self.stats.line(self._final_row, metrics)
    if self.feed is not None:  # the runners' count and lag
      scalars, text = self.feed.report()
      for name, value in scalars.items():
        self.stats.scalar(name, value, self.frames)
      line += text
    return line

  def _schedule_learning_rate(self) -> None:
    """--lr_schedule=linear: the step size falls linearly to 0 at lr_decay_frames."""
    if self.config.lr_schedule != "constant":
      self.learning_rate.assign(self.config.learning_rate_at(self.frames))

  def _adjust_rate(self) -> float:
    samples = int(self.counters["train_samples"].numpy())
    now = time.time()
    last = self._adjust_last
    self._adjust_last = (samples, now)
    if last is None:
      return 0.0
    return (samples - last[0]) / max(now - last[1], 1e-6)
