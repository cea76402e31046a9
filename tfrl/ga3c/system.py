"""A whole GA3C run: env, network, queues, loops, stats, checkpoints, export.

    system = GA3C(config)
    summary = system.run()      # until max_frames / stop(), SIGINT or SIGTERM

Python threads only start, balance and stop the loops; each loop iteration is
one call of a `tf.function` (agent segment, predictor batch, trainer step).
Closing the queues ends every loop: no thread stays blocked.
"""

import math
import os
import threading
import time
from typing import Dict, List, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from tfrl import cli
from tfrl import export
from tfrl import layers as tl
from tfrl import networks
from tfrl import optimizers
from tfrl import precision
from tfrl import resume
from tfrl import stopping
from tfrl import tf_checkpoints
from tfrl.envs.protocol import make_env
from tfrl.ga3c.adjuster import Bounds, DynamicAdjuster
from tfrl.ga3c.agents import AgentPool
from tfrl.ga3c.config import GA3CConfig
from tfrl.ga3c.learner import Learner, LearnerConfig
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import QUEUE_CLOSED_ERRORS, Queues
from tfrl.ga3c.stats import Stats
from tfrl.ga3c.trainer import Trainer
from tfrl.layers import gst

COUNTERS = ("env_steps", "episodes", "train_steps", "train_samples",
            "predictions", "prediction_batches")


def make_network(config: GA3CConfig, num_actions: int, observation_shape,
                 compute_dtype=tf.float32):
  """The paper's conv net for image observations, an MLP otherwise."""
  kwargs = {}
  if config.layer_plan is not None:
    kwargs["plan"] = config.layer_plan
  if len(observation_shape) == 3:
    torso = networks.AtariTorso(compute_dtype=compute_dtype, **kwargs)
  else:
    torso = networks.MLPTorso(list(config.hidden_sizes), compute_dtype=compute_dtype,
                              **kwargs)
  return networks.ActorCritic(num_actions, torso, **kwargs)


def make_optimizer(config: GA3CConfig):
  return optimizers.RMSProp(config.learning_rate, decay=config.rmsprop_decay,
                            epsilon=config.rmsprop_epsilon)


class _Worker:
  """A Python thread calling one tf.function until stopped or queues close."""

  def __init__(self, name, fn, system, on_result=None):
    self.name = name
    self.stop_event = threading.Event()
    self._fn = fn
    self._system = system
    self._on_result = on_result
    self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

  def _loop(self):
    try:
      while not self.stop_event.is_set() and not self._system.stopping:
        result = self._fn()
        if self._on_result is not None:
          self._on_result(result)
    except QUEUE_CLOSED_ERRORS:
      pass
    except Exception as e:  # pylint: disable=broad-except
      if not self._system.stopping:
        logging.exception("GA3C worker %s failed", self.name)
        self._system.fail(e)


class GA3C:
  """One GA3C training run (see module docstring)."""

  def __init__(self, config: GA3CConfig, env=None, network=None):
    self.config = config
    cfg = config
    self.env = env if env is not None else make_env(cfg.protocol, cfg.num_env_slots, cfg.seed)
    if self.env.num_actions is None:
      raise ValueError("GA3C needs a discrete action space.")
    self.num_actions = self.env.num_actions
    self.observation_shape = tuple(self.env.observation_shape)
    self.observation_dtype = self.env.observation_dtype
    self.frames_per_step = cfg.protocol.frames_per_step
    tf.random.set_seed(cfg.seed)

    self.precision = precision.resolve(
        cfg.precision, image_network=len(self.observation_shape) == 3)
    self.network = network if network is not None else make_network(
        cfg, self.num_actions, self.observation_shape, self.precision.dtype)
    self.network(tf.zeros((1,) + self.observation_shape,
                          self.observation_dtype))  # Create the variables.
    self.optimizer = make_optimizer(cfg)
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
    self.checkpoint = tf.train.Checkpoint(**checkpointed)
    # Refuses a fresh run over checkpoints, a resume of another run's and
    # unreadable ones, each in one line (see tfrl.tf_checkpoints).
    self.checkpoints = tf_checkpoints.RunCheckpoints(
        self.checkpoint, os.path.join(cfg.logdir, "checkpoints"), self.identity(),
        max_to_keep=3, resume_run=cfg.resume)
    self.restored_from = self.checkpoints.restore_latest()
    if cfg.resume and self.restored_from is None:
      logging.warning(resume.nothing_to_resume(cfg.logdir))
    if self.restored_from:
      logging.info("Resumed from %s at frame %d, episode %d.",
                   self.restored_from, self.frames, int(self.counters["episodes"]))

    self.queues = Queues(
        obs_shape=self.observation_shape, obs_dtype=self.observation_dtype,
        num_agents=cfg.max_agents, envs_per_agent=cfg.envs_per_agent,
        t_max=cfg.t_max,
        prediction_capacity=max(cfg.prediction_queue_size,
                                cfg.num_env_slots),
        training_capacity=max(cfg.training_queue_size,
                              cfg.segments_per_max_batch))
    self.agents = AgentPool(
        self.env, self.queues, num_agents=cfg.max_agents,
        envs_per_agent=cfg.envs_per_agent, t_max=cfg.t_max,
        counters=self.counters)
    self.predictor = Predictor(self.network, self.queues,
                               batch_size=cfg.prediction_batch_size,
                               counters=self.counters,
                               jit_compile=cfg.jit_compile_predict)
    self.learner = Learner(
        self.network, self.optimizer,
        LearnerConfig(discount=cfg.discount, entropy_beta=cfg.entropy_beta,
                      log_epsilon=cfg.log_epsilon, value_coef=cfg.value_coef,
                      reward_clip=cfg.reward_clip,
                      loss_reduction=cfg.loss_reduction,
                      grad_clip_norm=cfg.grad_clip_norm),
        after_update=tl.after_update, jit_compile=cfg.jit_compile_train)
    self.trainer = Trainer(self.learner, self.queues,
                           min_segments=cfg.segments_per_min_batch,
                           max_segments=cfg.segments_per_max_batch,
                           counters=self.counters)
    self.policy = export.DiscretePolicy(self.network)
    self.stats = Stats(cfg.logdir, cfg.score_window, self.frames_per_step)
    self.adjuster = DynamicAdjuster(
        (cfg.agents, cfg.predictors, cfg.trainers),
        Bounds(cfg.max_agents, cfg.max_predictors, cfg.max_trainers),
        seed=cfg.seed) if cfg.dynamic_adjustment else None

    self._workers: Dict[str, List[Optional[_Worker]]] = {
        "agents": [None] * cfg.max_agents,
        "predictors": [None] * cfg.max_predictors,
        "trainers": [None] * cfg.max_trainers}
    self._stop_requested = threading.Event()
    self._stopping = False
    self._stop = ("error", float("nan"))  # (reason, rolling score) when the loop ends.
    self._error: Optional[BaseException] = None
    self._last_metrics = None
    self._profiling = False
    self._profile_done = False
    self.profile_dir = None
    self._adjust_last = None  # (trained samples, time) at the last trial.
    self._controller_steps = int(self.counters["train_steps"].numpy())
    self.summary: Dict = {}
    self.precision_report: Optional[Dict] = None  # set by run() once traced

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
    self._error = error
    self._stop_requested.set()

  def counter_values(self) -> Dict[str, int]:
    return {k: int(v.numpy()) for k, v in self.counters.items()}

  def worker_counts(self) -> Dict[str, int]:
    return {kind: sum(1 for w in ws if w is not None
                      and not w.stop_event.is_set())
            for kind, ws in self._workers.items()}

  # -- Workers --------------------------------------------------------------

  def _make_worker(self, kind: str, i: int) -> _Worker:
    if kind == "agents":
      agent = tf.constant(i, tf.int32)
      return _Worker(f"agent_{i}", lambda: self.agents.run_segment(agent),
                     self)
    if kind == "predictors":
      return _Worker(f"predictor_{i}", self.predictor.predict, self)
    return _Worker(f"trainer_{i}", self.trainer.train, self,
                   on_result=self._set_metrics)

  def _set_metrics(self, metrics):
    self._last_metrics = metrics

  def set_worker_count(self, kind: str, n: int) -> None:
    """Starts or stops workers of one kind so that `n` of them run."""
    workers = self._workers[kind]
    n = max(1, min(n, len(workers)))
    for i, w in enumerate(workers):
      running = w is not None and not w.stop_event.is_set()
      if i < n and not running:
        if w is not None:  # A stopping worker must finish before its slots
          w.thread.join(timeout=30)  # are reused.
          if w.thread.is_alive():
            logging.warning("%s did not stop; not restarting it.", w.name)
            continue
        worker = self._make_worker(kind, i)
        workers[i] = worker
        worker.thread.start()
      elif i >= n and running:
        w.stop_event.set()

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

  def save(self) -> str:
    """Checkpoint, then SavedModel; cli.RunFailed if either cannot be written."""
    path = self.checkpoints.save(int(self.counters["train_steps"].numpy()))
    try:
      self.export()
    except (OSError, tf.errors.OpError) as e:
      raise cli.RunFailed(f"cannot export the policy to "
                          f"{os.path.join(self.config.logdir, 'saved_model')}: "
                          f"{resume.first_line(e)}; checkpoint {path} is written") from e
    return path

  def export(self) -> str:
    spec = tf.TensorSpec((None,) + self.observation_shape,
                         self.observation_dtype)
    return export.export_policy(
        self.policy, spec, os.path.join(self.config.logdir, "saved_model"),
        env_protocol=self.config.protocol,
        extra_metadata={"precision": self.precision_report} if self.precision_report else None)

  def _maybe_profile(self) -> None:
    if self.config.profile_steps is None or self._profile_done:
      return
    start, end = self.config.profile_steps
    steps = int(self.counters["train_steps"].numpy())
    if not self._profiling and steps >= start:
      self.profile_dir = os.path.join(self.config.logdir, "profile")
      tf.profiler.experimental.start(self.profile_dir)
      self._profiling = True
      logging.info("Profiler started at training step %d.", steps)
    elif self._profiling and steps >= end:
      self._stop_profiler()

  def _stop_profiler(self) -> None:
    if self._profiling:
      tf.profiler.experimental.stop()
      self._profiling = False
      self._profile_done = True
      logging.info("Profiler trace written under %s.", self.profile_dir)

  # -- Main loop ------------------------------------------------------------

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

  def _report(self, log=True) -> Dict:
    self._drain_episodes()
    counters = self.counter_values()
    metrics = None
    if self._last_metrics is not None:
      metrics = {k: float(v) for k, v in self._last_metrics.items()}
    sizes = {"prediction": int(self.queues.prediction.size()),
             "training": int(self.queues.training.size())}
    return self.stats.report(counters, sizes, self.worker_counts(), metrics,
                             self.config.learning_rate, log=log)

  def _stop_reason(self, start_time: float) -> Optional[str]:
    """Why training should stop now, or None to go on."""
    cfg = self.config
    if self._stop_requested.is_set():
      return "requested"
    if cfg.max_frames and self.frames >= cfg.max_frames:
      return "max_frames"
    if cfg.max_seconds and time.time() - start_time >= cfg.max_seconds:
      return "max_seconds"
    if (cfg.target_score is not None
        and len(self.stats.scores) >= self.stats.scores.maxlen
        and self.stats.rolling_score >= cfg.target_score):
      return "target_score"
    return None

  def run(self) -> Dict:
    """Trains until done; always closes queues, joins threads, saves."""
    cfg = self.config
    # Trace every loop once before the threads race to do it.
    self.agents.run_segment.get_concrete_function()
    self.precision_report = precision.report(
        self.precision, train=self.trainer.train.get_concrete_function(),
        predict=self.predictor.predict.get_concrete_function())
    logging.info("GA3C %s", precision.describe(self.precision_report))
    self.stats.text("run/precision", precision.describe(self.precision_report), self.frames)
    start_time = time.time()
    last_stats = last_ckpt = last_adjust = start_time
    try:
      # Ctrl-C / SIGTERM end the loop; another one during the shutdown and
      # final save abandons the save.
      with stopping.on_signals(self.stop):
        self.set_worker_count("trainers", cfg.trainers)
        self.set_worker_count("predictors", cfg.predictors)
        self.set_worker_count("agents", cfg.agents)
        self._report(log=False)
        while (reason := self._stop_reason(start_time)) is None:
          time.sleep(0.05)
          now = time.time()
          self._maybe_profile()
          if now - last_stats >= cfg.stats_every:
            last_stats = now
            self._report()
          elif cfg.target_score is not None or self.controller is not None:
            # Keep the rolling score (stopping rule) and the controller's
            # returns fresh.
            self._drain_episodes()
          self._update_reward_aware()
          if cfg.checkpoint_every and now - last_ckpt >= cfg.checkpoint_every:
            last_ckpt = now
            self.save()
          if self.adjuster is not None and now - last_adjust >= cfg.adjustment_period:
            last_adjust = now
            rate = self._adjust_rate()
            na, np_, nt = self.adjuster.update(rate)
            self.set_worker_count("agents", na)
            self.set_worker_count("predictors", np_)
            self.set_worker_count("trainers", nt)
        # Episodes that end while the workers shut down still enter the
        # final rolling score, so keep the one the stopping rule saw.
        self._stop = (reason, self.stats.rolling_score)
    finally:
      with stopping.final_save(cfg.logdir):
        self.shutdown()
    if self._error is not None:
      raise self._error
    self.summary["seconds"] = time.time() - start_time
    return self.summary

  def _adjust_rate(self) -> float:
    samples = int(self.counters["train_samples"].numpy())
    now = time.time()
    last = self._adjust_last
    self._adjust_last = (samples, now)
    if last is None:
      return 0.0
    return (samples - last[0]) / max(now - last[1], 1e-6)

  def shutdown(self) -> None:
    """Closes the queues, joins every thread, writes a final checkpoint."""
    if self._stopping:
      return
    self._stopping = True
    self.queues.close()
    for workers in self._workers.values():
      for w in workers:
        if w is not None:
          w.stop_event.set()
    for workers in self._workers.values():
      for w in workers:
        if w is not None:
          w.thread.join(timeout=10)
          if w.thread.is_alive():
            logging.warning("Thread %s still running after close.", w.name)
    self._stop_profiler()
    row = self._report()
    self.summary = {
        "frames": self.frames,
        "episodes": int(self.counters["episodes"].numpy()),
        "train_steps": int(self.counters["train_steps"].numpy()),
        "rolling_score": self.stats.rolling_score,
        "scores_seen": len(self.stats.scores),
        "fps": row.get("fps"),
        # Why the loop ended ("requested": Ctrl-C / stop() / a failed worker;
        # "error": the loop itself raised) and the rolling score then.
        "stop_reason": self._stop[0],
        "stop_rolling_score": self._stop[1],
        "precision": self.precision_report,
    }
    try:
      self.summary["checkpoint"] = self.save()
      self.summary["saved_model"] = os.path.join(self.config.logdir,
                                                 "saved_model")
    finally:
      self.stats.close()
    logging.info("GA3C stopped: %s", self.summary)
