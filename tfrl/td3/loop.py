"""The TD3 training loop: a Python actor loop over a gymnasium env, training
phases in one tf.function call, checkpoints, TensorBoard and export.

    summary = train(TD3Config(protocol=EnvProtocol(env="Pendulum-v1")), plan,
                    reward_config, logdir)

Reward-aware pruning: each finished training episode's return goes to the
`RewardAwareController`, which is consulted every `plan.default.frequency`
training iterations between `begin_step` and `end_step` (see
`tfrl/layers/gst.py` for the rule). The compression ratio is recorded after
every training phase and averaged over all training iterations.
On `resume`, the latest checkpoint (networks, optimizers, controller,
compression tracker, counters, training seconds) and the replay buffer saved
with it (`checkpoints/replay-<step>.npz`) are restored; the environment
starts a new episode. A checkpoint without its replay buffer is refused
unless `resume_without_replay` (the buffer then starts empty). A fresh run
refuses a logdir with checkpoints, a resume refuses another run's (see
`tfrl.tf_checkpoints`).

Crash safety: each checkpoint writes its replay buffer first (to a temporary
name, renamed), then the TF checkpoint, and only then removes the buffer of
the previous one, so the latest checkpoint always has its own buffer.

SIGINT (Ctrl-C) or SIGTERM stops the loop after the current step: the
checkpoint, replay buffer and policies are written, the summary says
`"completed": false`, and `--resume` carries on from there.
"""

import glob
import os
import time
from typing import Callable, Optional

from absl import logging
import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl import atomic_files
from tfrl import cli
from tfrl import export as export_lib
from tfrl import layers as tl
from tfrl import resume as resume_lib
from tfrl import stopping
from tfrl import tf_checkpoints
from tfrl.envs.episodes import play_episodes
from tfrl.envs.gym_env import make_gymnasium
from tfrl.envs.protocol import make_env
from tfrl.layers import gst
from tfrl.layers import spec as spec_lib
from tfrl.td3 import config as config_lib
from tfrl.td3 import learner as learner_lib
from tfrl.td3 import networks
from tfrl.td3 import replay as replay_lib


def continuous_env(protocol):
  """The training env: one gymnasium env of `protocol`, with a Box action space."""
  env = make_gymnasium(protocol.env, protocol.max_episode_steps)
  if not isinstance(env.action_space, gym.spaces.Box):
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


def _dir_bytes(path):
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def export_policies(learner: learner_lib.TD3Learner, plan, export_dir: str,
                    env_protocol=None) -> dict:
  """Writes `export_dir/policy` (live actor) and `export_dir/policy_compressed`
  (a packed copy: circulant vectors, bitmask + non-zeros). Returns sizes."""
  spec = tf.TensorSpec([None, learner.obs_dim], tf.float32)
  live_dir = export_lib.export_policy(networks.DeterministicPolicy(learner.actor), spec,
                                      os.path.join(export_dir, "policy"), env_protocol)
  low, high = learner.action_low.numpy(), learner.action_high.numpy()
  copy = networks.Actor(low, high, learner.config.hidden_sizes, plan, name="actor")
  copy(tf.zeros([1, learner.obs_dim]))
  tl.copy_variables(learner.actor, copy)
  tl.pack(copy)
  packed_dir = export_lib.export_policy(networks.DeterministicPolicy(copy), spec,
                                        os.path.join(export_dir, "policy_compressed"),
                                        env_protocol)
  return {"policy_bytes": _dir_bytes(os.path.join(live_dir, "variables")),
          "policy_compressed_bytes": _dir_bytes(os.path.join(packed_dir, "variables"))}


LEGACY_REPLAY_FILE = "replay.npz"  # one buffer for every checkpoint, before replay-<step>


def replay_path(checkpoint_path: str) -> str:
  """The replay buffer saved with `<dir>/ckpt-<step>`: `<dir>/replay-<step>.npz`."""
  directory, name = os.path.split(checkpoint_path)
  return os.path.join(directory, "replay-" + name.split("-", 1)[1] + ".npz")


def _remove_other_replays(directory: str, keep: str) -> None:
  for path in glob.glob(os.path.join(directory, "replay*.npz*")):
    if path != keep:
      try:
        os.remove(path)
      except OSError:
        pass


def _restore_replay(replay, checkpoint_path: str, resume_without_replay: bool) -> None:
  path = replay_path(checkpoint_path)
  if not os.path.exists(path):
    legacy = os.path.join(os.path.dirname(path), LEGACY_REPLAY_FILE)
    path = legacy if os.path.exists(legacy) else None
  if path is None:
    if not resume_without_replay:
      raise ValueError(f"cannot resume from {checkpoint_path}: its replay buffer "
                       f"{replay_path(checkpoint_path)} is missing; pass "
                       f"--resume_without_replay to resume with an empty buffer.")
    logging.warning("Resuming from %s with an empty replay buffer (--resume_without_replay).",
                    checkpoint_path)
    return
  replay.load(path)  # raises resume.CorruptCheckpoint for a bad file


def identity(config: config_lib.TD3Config, learner: learner_lib.TD3Learner) -> dict:
  """What a TD3 checkpoint records and a resume must match."""
  ident = {"algorithm": "td3", **config.protocol.identity(),
           "observation_spec": f"[None, {learner.obs_dim}] float32",
           "actions": learner.action_dim, "hidden_sizes": list(config.hidden_sizes)}
  ident.update(tf_checkpoints.network_identity(learner.networks))
  return ident


def train(config: config_lib.TD3Config, plan=None,
          reward_config: Optional[gst.RewardAwareConfig] = None, logdir: str = "/tmp/tfrl_td3",
          resume: bool = False, export: bool = True,
          resume_without_replay: bool = False,
          on_start: Optional[Callable[[], None]] = None) -> dict:
  """Trains TD3; returns (and writes to `logdir/summary.json`) a summary dict.

  `on_start` is called once the logdir's checkpoint is restored (or there is
  none), before the first step: what it writes survives only accepted runs.
  """
  plan = spec_lib.as_plan(plan)
  os.makedirs(logdir, exist_ok=True)
  checkpoint_dir = os.path.join(logdir, "checkpoints")
  if not resume and tf_checkpoints.has_checkpoint(checkpoint_dir):
    resume_lib.refuse_fresh_run(checkpoint_dir, "checkpoints")  # before building anything
  np.random.seed(config.seed)
  tf.random.set_seed(config.seed)
  env = continuous_env(config.protocol)
  eval_env = make_env(config.protocol, 1, config.seed)
  obs_dim = int(np.prod(env.observation_space.shape))
  low, high = env.action_space.low, env.action_space.high
  learner = learner_lib.TD3Learner(config, obs_dim, low, high, plan)
  replay = replay_lib.ReplayBuffer(obs_dim, learner.action_dim, config.replay_size, config.seed)
  uses_controller = bool(gst.reward_aware_layers(learner.networks))
  controller = gst.RewardAwareController(reward_config or gst.RewardAwareConfig())
  if uses_controller:
    controller.update(learner.networks)  # writes the initial sparsity into the layers.
  tracker = tl.CompressionTracker()
  env_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
  episodes = tf.Variable(0, dtype=tf.int64, trainable=False)
  seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False)  # summed over resumes
  checkpoint = tf.train.Checkpoint(learner=learner, controller=controller, tracker=tracker,
                                   env_steps=env_steps, episodes=episodes, seconds=seconds)
  checkpoints = tf_checkpoints.RunCheckpoints(checkpoint, checkpoint_dir,
                                              identity(config, learner), max_to_keep=2,
                                              resume_run=resume)
  restored = checkpoints.restore_latest()
  if restored:
    _restore_replay(replay, restored, resume_without_replay)
    logging.info("Resumed from %s at step %d.", restored, int(env_steps))
  elif resume:
    logging.warning(resume_lib.nothing_to_resume(logdir))
  if on_start is not None:
    on_start()
  writer = tf.summary.create_file_writer(logdir)
  rng = np.random.default_rng(config.seed + int(env_steps))
  spec = plan.default
  scale = (high - low) / 2.0

  def save_checkpoint():
    seconds.assign(seconds0 + time.time() - start)
    number = int(env_steps)
    if checkpoints.latest_number == number:
      # Saved at this step already (the final save after a checkpoint step, or a
      # stop right after a resume): nothing but the seconds changed, and saving
      # again would rewrite the latest checkpoint in place.
      return
    # The buffer first: the checkpoint that names it exists only once it is whole.
    buffer_name = f"replay-{number}.npz"

    def write_replay(directory):
      path = os.path.join(directory, buffer_name)
      try:
        replay.save(path)
      except OSError as e:
        raise cli.RunFailed(f"cannot write the replay buffer {path}: {e.strerror or e}; "
                            f"the latest complete checkpoint is {checkpoints.latest}") from e

    checkpoints.save(number, write_extras=write_replay)
    buffer_path = os.path.join(checkpoint_dir, buffer_name)
    _remove_other_replays(checkpoint_dir, keep=buffer_path)

  obs, _ = env.reset(seed=config.seed + int(episodes))
  episode_return, recent = 0.0, []
  metrics = {}
  eval_return = None
  t0, steps0 = time.time(), int(env_steps)
  start, seconds0 = time.time(), float(seconds)
  with writer.as_default(), stopping.on_signals() as stop:
    t = int(env_steps)
    while t < config.total_steps and not stop.is_set():
      if t < config.start_steps:
        action = env.action_space.sample()
      else:
        action = learner.act(obs[None].astype(np.float32))[0].numpy()
        action = np.clip(action + rng.normal(size=action.shape) * config.exploration_noise
                         * scale, low, high)
      next_obs, reward, terminated, truncated, _ = env.step(action)
      replay.add(obs, action, reward, next_obs, terminated)
      episode_return += float(reward)
      obs = next_obs
      t = int(env_steps.assign_add(1))
      if terminated or truncated:
        episodes.assign_add(1)
        recent = (recent + [episode_return])[-10:]
        controller.record_return(episode_return)
        tf.summary.scalar("train/episode_return", episode_return, step=t)
        obs, _ = env.reset(seed=config.seed + int(episodes))
        episode_return = 0.0
      if t >= config.start_steps and t % config.update_every == 0:
        before = int(learner.num_updates)
        metrics = learner.update(*replay.sample(config.update_every, config.batch_size))
        after = int(learner.num_updates)
        if uses_controller and controller.decision_due(spec, before, after):
          decision = controller.update(learner.networks)
          tf.summary.scalar("gst/target_sparsity", controller.sparsity, step=t)
          if decision != "wait":
            logging.info("step %d: reward-aware %s -> sparsity %.3f", t, decision,
                         float(controller.sparsity))
        tracker.record(after, learner.networks)
      if t % config.log_every == 0:
        report = tl.compression_report(learner.networks)
        sps = (t - steps0) / max(time.time() - t0, 1e-6)
        t0, steps0 = time.time(), t
        tf.summary.scalar("compression/ratio", report["total"]["compression_ratio"], step=t)
        tf.summary.scalar("compression/average_ratio", tracker.average(), step=t)
        tf.summary.scalar("compression/stored_params", report["total"]["stored_params"], step=t)
        tf.summary.scalar("compression/bytes", report["total"]["bytes"], step=t)
        for name, stats in report["layers"].items():
          tf.summary.scalar(f"compression_layers/{name}", stats["compression_ratio"], step=t)
        for key, value in metrics.items():
          tf.summary.scalar(f"train/{key}", value, step=t)
        tf.summary.scalar("perf/steps_per_sec", sps, step=t)
        logging.info("step %d: return(last10) %.1f ratio %.3f avg %.3f %.0f steps/s", t,
                     np.mean(recent) if recent else float("nan"),
                     report["total"]["compression_ratio"], tracker.average(), sps)
      if config.eval_every and t % config.eval_every == 0:
        eval_return = evaluate(learner.act, eval_env, config.eval_episodes, 10_000 + t)
        tf.summary.scalar("eval/return", eval_return, step=t)
      if t % config.checkpoint_every == 0:
        save_checkpoint()
    if stop.is_set():
      logging.info("Stopped by a signal at step %d; writing the checkpoint.", t)
    elif eval_return is None or not config.eval_every or t % config.eval_every:
      eval_return = evaluate(learner.act, eval_env, config.eval_episodes, 10_000 + t)
      tf.summary.scalar("eval/return", eval_return, step=t)
  with stopping.final_save(logdir):
    save_checkpoint()
    writer.flush()
    report = tl.compression_report(learner.networks)
    summary = {
        "env": config.protocol.env, "env_steps": t, "completed": t >= config.total_steps,
        "training_iterations": int(learner.num_updates),
        "eval_return": eval_return,
        "train_return_last10": float(np.mean(recent)) if recent else None,
        "final_compression_ratio": report["total"]["compression_ratio"],
        "average_compression_ratio": tracker.average(),
        "dense_params": report["total"]["dense_params"],
        "stored_params": report["total"]["stored_params"],
        "stored_bytes": report["total"]["bytes"],
        "layers": report["layers"],
        "wall_seconds": float(seconds),
    }
    if export:
      summary.update(export_policies(learner, plan, logdir, config.protocol))
    atomic_files.write_json(os.path.join(logdir, "summary.json"), summary, indent=1)
  env.close()
  eval_env.close()
  return summary
