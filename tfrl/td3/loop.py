"""TD3 as a `run_loop.Algorithm`: training phases of env steps and updates in
one compiled graph each (`tfrl.td3.phase`), evaluation and export.

    summary = run_loop.run(build(TD3Config(protocol=EnvProtocol(env="Pendulum-v1"))))

A step of the run is a span of env steps up to the next event: a training
phase (every `update_every` steps), a log line, an evaluation, a checkpoint
or the end; the span's env steps, and at a multiple of `update_every` (from
`start_steps` on) its `update_every` updates, run in one graph call. The
run's skeleton (`tfrl.run_loop`) does the rest: the logdir, resuming,
checkpoints every `checkpoint_every` steps with their replay buffers
(`tfrl.td3.checkpoints`), signals, the export and `summary.json`.

Reward-aware pruning: each finished training episode's return goes to the
`RewardAwareController`, which is consulted every `plan.default.frequency`
training iterations between `begin_step` and `end_step` (see
`tfrl/layers/gst.py` for the rule). The compression ratio is recorded after
every training phase and averaged over all training iterations.
On resume, the latest checkpoint (networks, optimizers, controller,
compression tracker, counters, training seconds) and its replay buffer are
restored; the environment starts a new episode and the random streams are
reseeded from (seed, step). SIGINT (Ctrl-C) or SIGTERM stops the run after
the current span (at most `update_every` env steps and their updates): the
checkpoint, replay buffer and policies are written, the summary says
`"completed": false`, and `--resume` carries on from there.
"""

import os
import time
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl import export as export_lib
from tfrl import layers as tl
from tfrl import precision
from tfrl import run_loop
from tfrl import tf_checkpoints
from tfrl.envs.episodes import play_episodes
from tfrl.envs.make import make_env
from tfrl.layers import distribution
from tfrl.layers import gst
from tfrl.layers import spec as spec_lib
from tfrl.td3 import checkpoints as checkpoints_lib
from tfrl.td3 import config as config_lib
from tfrl.td3 import learner as learner_lib
from tfrl.td3 import networks
from tfrl.td3 import phase as phase_lib
from tfrl.td3 import replay as replay_lib


def continuous_env(protocol, seed: int = 0):
  """The training env: slot 0 of `protocol`'s batched env (the implementation
  evaluation plays), without auto-reset, with a Box action space."""
  env = make_env(protocol, 1, seed, auto_reset=False)
  if not isinstance(env.action_space, gym.spaces.Box):
    env.close()
    raise ValueError(f"TD3 needs a continuous (Box) action space; {protocol.env} has "
                     f"{env.action_space}.")
  return env


def evaluate(act, env, episodes: int, seed: int) -> float:
  """Mean return of the deterministic policy over `episodes` episodes of a
  one-slot GymEnv, episode e started with seed + e (the shared episode loop)."""
  policy = lambda obs: {"action": act(tf.cast(obs, tf.float32))}
  scores, _, _ = play_episodes(policy, env, episodes,
                               episode_seeds=np.arange(episodes) + seed)
  return float(np.mean(scores))


def dir_bytes(path: str) -> int:
  """Bytes of the files under `path` (a policy's weights on disk)."""
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def export_policies(learner: learner_lib.TD3Learner, plan, export_dir: str,
                    env_protocol=None) -> dict:
  """Writes `export_dir/policy` (live actor) and `export_dir/policy_compressed`
  (a packed copy: circulant vectors, bitmask + non-zeros), both computing in
  the actor's compute dtype. Returns sizes."""
  spec = tf.TensorSpec([None, learner.obs_dim], tf.float32)
  live_dir = export_lib.export_policy(networks.DeterministicPolicy(learner.actor), spec,
                                      os.path.join(export_dir, "policy"), env_protocol)
  low, high = learner.action_low.numpy(), learner.action_high.numpy()
  copy = networks.Actor(low, high, learner.config.hidden_sizes, plan,
                        compute_dtype=learner.actor.compute_dtype, name="actor")
  copy(tf.zeros([1, learner.obs_dim]))
  tl.copy_variables(learner.actor, copy)
  tl.pack(copy)
  packed_dir = export_lib.export_policy(networks.DeterministicPolicy(copy), spec,
                                        os.path.join(export_dir, "policy_compressed"),
                                        env_protocol)
  return {"policy_bytes": dir_bytes(os.path.join(live_dir, "variables")),
          "policy_compressed_bytes": dir_bytes(os.path.join(packed_dir, "variables"))}


def identity(config: config_lib.TD3Config, learner: learner_lib.TD3Learner) -> dict:
  """What a TD3 checkpoint records and a resume must match."""
  ident = {"algorithm": "td3", **config.protocol.identity(),
           "observation_spec": f"[None, {learner.obs_dim}] float32",
           "actions": learner.action_dim, "hidden_sizes": list(config.hidden_sizes)}
  ident.update(tf_checkpoints.network_identity(learner.networks))
  return ident



def _next_multiple(t: int, every: int) -> int:
  return (t // every + 1) * every


class TD3Run(run_loop.Algorithm):
  """One TD3 run (see the module docstring); `run_loop` drives it."""

  name = "td3"

  def __init__(self, config: config_lib.TD3Config):
    self.config = config
    self.logdir = config.run.logdir
    np.random.seed(config.seed)
    tf.random.set_seed(config.seed)
    self.env = continuous_env(config.protocol, config.seed)
    self.eval_env = make_env(config.protocol, 1, config.seed)
    obs_dim = int(np.prod(self.env.observation_space.shape))
    self.low, self.high = self.env.action_space.low, self.env.action_space.high
    self.plan = distribution.resolve(
        spec_lib.as_plan(config.layer_plan),
        networks.layer_shapes(obs_dim, len(self.low), config.hidden_sizes))
    self.learner = learner_lib.TD3Learner(config, obs_dim, self.low, self.high, self.plan)
    self.replay = replay_lib.ReplayBuffer(obs_dim, self.learner.action_dim, config.replay_size)
    self.uses_controller = bool(gst.reward_aware_layers(self.learner.networks))
    self.controller = gst.RewardAwareController(config.reward_aware or gst.RewardAwareConfig())
    if self.uses_controller:
      self.controller.update(self.learner.networks)  # the initial sparsity
    self.tracker = tl.CompressionTracker()
    self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.episodes = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False)  # summed over resumes
    self.checkpoint = tf.train.Checkpoint(
        learner=self.learner, controller=self.controller, tracker=self.tracker,
        env_steps=self.env_steps, episodes=self.episodes, seconds=self.seconds)
    self.phase = phase_lib.TrainingPhase(self.env, self.learner, self.replay, config,
                                         self.env_steps, self.episodes)
    self.eval_return: Optional[float] = None
    self.recent = []  # the last 10 training episodes' returns
    self.metrics = {}
    self._evaluated_at = None  # the step of this process's last evaluation

  # -- run_loop.Algorithm ----------------------------------------------------

  def identity(self) -> dict:
    return identity(self.config, self.learner)

  def count(self) -> int:
    return int(self.env_steps)

  def progress(self) -> str:
    return f"step {self.count()}"

  def begin(self) -> None:
    config, t = self.config, self.count()
    self.phase.reseed(config.seed, t)
    self.phase.start_episode(config.seed + int(self.episodes))
    self._start, self._seconds0 = time.time(), float(self.seconds)
    self._log_time, self._log_steps = time.time(), t

  def finished(self) -> Optional[str]:
    t = self.count()
    if t >= self.config.total_steps and self._evaluated_at == t:
      return "total_steps"
    return None

  def step(self) -> Optional[str]:
    """Env steps up to the next event, in one graph call with the training phase
    that falls due there; that event; the final evaluation at the end."""
    config, t = self.config, self.count()
    if t >= config.total_steps:
      self._evaluate(t)
      return None
    events = [config.update_every, config.log_every, config.checkpoint_every]
    end = min([_next_multiple(t, e) for e in events + [config.eval_every] if e] +
              [config.total_steps])
    train = end >= config.start_steps and end % config.update_every == 0
    before = int(self.learner.num_updates)
    out = self.phase.run(tf.constant(end - t, tf.int32), train)
    self._episodes_ended(t, out)
    if train:
      self._after_phase(end, before, out)
    line = self._log(end) if end % config.log_every == 0 else None
    if config.eval_every and end % config.eval_every == 0:
      self._evaluate(end)
    self.seconds.assign(self._seconds0 + time.time() - self._start)
    return line

  def end(self, reason: str) -> None:
    self.seconds.assign(self._seconds0 + time.time() - self._start)

  def export(self) -> dict:
    return export_policies(self.learner, self.plan, self.logdir, self.config.protocol)

  def results(self) -> dict:
    t = self.count()
    report = tl.compression_report(self.learner.networks)
    return {
        "env": self.config.protocol.env, "env_steps": t, "completed": t >= self.config.total_steps,
        "training_iterations": int(self.learner.num_updates),
        "eval_return": self.eval_return,
        "train_return_last10": float(np.mean(self.recent)) if self.recent else None,
        "final_compression_ratio": report["total"]["compression_ratio"],
        "average_compression_ratio": self.tracker.average(),
        "dense_params": report["total"]["dense_params"],
        "stored_params": report["total"]["stored_params"],
        "stored_bytes": report["total"]["bytes"],
        "layers": report["layers"],
        "wall_seconds": float(self.seconds),
        # The dtype the traced update's matmuls hold, not only the one asked for.
        "precision": precision.report(
            self.learner.precision, train=self.learner.update.get_concrete_function()),
    }

  def close(self) -> None:
    self.env.close()
    self.eval_env.close()

  # -- TD3 -------------------------------------------------------------------

  def _episodes_ended(self, t: int, out) -> None:
    """The episodes a span of env steps from `t` ended: their returns to the
    last-10 list, the controller and TensorBoard."""
    for i in np.flatnonzero(out["ended"].numpy()):
      episode_return = float(out["returns"][i])
      self.recent = (self.recent + [episode_return])[-10:]
      self.controller.record_return(episode_return)
      tf.summary.scalar("train/episode_return", episode_return, step=t + int(i) + 1)

  def _after_phase(self, t: int, before: int, out) -> None:
    """After a training phase: its metrics, the controller when due, the tracker."""
    learner = self.learner
    self.metrics = {k: v for k, v in out.items() if k not in ("ended", "returns")}
    after = int(learner.num_updates)
    if self.uses_controller and self.controller.decision_due(self.plan.default, before, after):
      decision = self.controller.update(learner.networks)
      tf.summary.scalar("gst/target_sparsity", self.controller.sparsity, step=t)
      if decision != "wait":
        self.console.line(f"step {t}: reward-aware {decision} -> sparsity "
                          f"{float(self.controller.sparsity):.3f}")
    self.tracker.record(after, learner.networks)

  def _log(self, t: int) -> str:
    """Compression and training summaries; the console line."""
    report = tl.compression_report(self.learner.networks)
    sps = (t - self._log_steps) / max(time.time() - self._log_time, 1e-6)
    self._log_time, self._log_steps = time.time(), t
    total = report["total"]
    tf.summary.scalar("compression/ratio", total["compression_ratio"], step=t)
    tf.summary.scalar("compression/average_ratio", self.tracker.average(), step=t)
    tf.summary.scalar("compression/stored_params", total["stored_params"], step=t)
    tf.summary.scalar("compression/bytes", total["bytes"], step=t)
    for name, stats in report["layers"].items():
      tf.summary.scalar(f"compression_layers/{name}", stats["compression_ratio"], step=t)
    for key, value in self.metrics.items():
      tf.summary.scalar(f"train/{key}", value, step=t)
    tf.summary.scalar("perf/steps_per_sec", sps, step=t)
    recent = np.mean(self.recent) if self.recent else float("nan")
    return (f"step {t}: return(last10) {recent:.1f} ratio {total['compression_ratio']:.3f} "
            f"avg {self.tracker.average():.3f} {sps:.0f} steps/s")

  def _evaluate(self, t: int) -> None:
    self.eval_return = evaluate(self.learner.act, self.eval_env, self.config.eval_episodes,
                                10_000 + t)
    self._evaluated_at = t
    tf.summary.scalar("eval/return", self.eval_return, step=t)


def build(config: config_lib.TD3Config) -> run_loop.Job:
  """A TD3 run for `run_loop.run`: a checkpoint (with its replay buffer,
  `tfrl.td3.checkpoints`) every `config.checkpoint_every` env steps."""
  run = config.run
  return run_loop.Job(
      make=lambda: TD3Run(config),
      store=checkpoints_lib.ReplayCheckpoints(os.path.join(run.logdir, "checkpoints"),
                                              run.resume_without_replay),
      options=run_loop.RunOptions(
          logdir=run.logdir, resume=run.resume, export=run.export,
          checkpoint_every=run_loop.Every(steps=config.checkpoint_every)))
