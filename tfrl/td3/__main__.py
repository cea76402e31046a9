"""`python -m tfrl.td3 --env=Pendulum-v1 --logdir=/tmp/td3` (flags below and
the shared layer flags of `tfrl.layers.flags`; presets in `flags/td3_*.flags`)."""

import json
import os

from absl import app
from absl import flags

from tfrl import atomic_files
from tfrl import cli
from tfrl import logdir_lock

from tfrl.layers import flags as layer_flags
from tfrl.td3 import config as config_lib
from tfrl.td3 import loop as train_lib

_DEFAULT = config_lib.TD3Config()

flags.DEFINE_string("env", _DEFAULT.env, "Gymnasium continuous-control environment id.")
flags.DEFINE_string("logdir", "/tmp/tfrl_td3", "Checkpoints, TensorBoard, summary, export.")
flags.DEFINE_bool("resume", False, "Resume from the latest checkpoint in --logdir.")
flags.DEFINE_bool("resume_without_replay", False,
                  "With --resume: accept a checkpoint whose replay buffer is missing and "
                  "start with an empty buffer (else such a resume is refused).")
flags.DEFINE_bool("export", True, "Export SavedModel policies (live and compressed).")
flags.DEFINE_integer("total_steps", _DEFAULT.total_steps, "Environment steps.")
flags.DEFINE_integer("start_steps", _DEFAULT.start_steps, "Initial random-action steps.")
flags.DEFINE_integer("batch_size", _DEFAULT.batch_size, "Batch size.")
flags.DEFINE_integer("replay_size", _DEFAULT.replay_size, "Replay capacity.")
flags.DEFINE_list("hidden_sizes", [str(h) for h in _DEFAULT.hidden_sizes], "MLP widths.")
flags.DEFINE_float("discount", _DEFAULT.discount, "Discount.")
flags.DEFINE_float("tau", _DEFAULT.tau, "Target Polyak rate.")
flags.DEFINE_float("policy_noise", _DEFAULT.policy_noise, "Target smoothing noise std.")
flags.DEFINE_float("noise_clip", _DEFAULT.noise_clip, "Target smoothing noise clip.")
flags.DEFINE_integer("policy_delay", _DEFAULT.policy_delay, "Critic updates per actor update.")
flags.DEFINE_float("exploration_noise", _DEFAULT.exploration_noise, "Action noise std.")
flags.DEFINE_float("actor_lr", _DEFAULT.actor_lr, "Actor Adam learning rate.")
flags.DEFINE_float("critic_lr", _DEFAULT.critic_lr, "Critic Adam learning rate.")
flags.DEFINE_integer("update_every", _DEFAULT.update_every, "Env steps per training phase.")
flags.DEFINE_integer("eval_every", _DEFAULT.eval_every, "Env steps between evaluations.")
flags.DEFINE_integer("eval_episodes", _DEFAULT.eval_episodes, "Episodes per evaluation.")
flags.DEFINE_integer("checkpoint_every", _DEFAULT.checkpoint_every, "Env steps per checkpoint.")
flags.DEFINE_integer("log_every", _DEFAULT.log_every, "Env steps per log line.")
flags.DEFINE_integer("seed", _DEFAULT.seed, "Random seed.")
flags.DEFINE_bool("jit_compile", _DEFAULT.jit_compile, "Compile training phases with XLA.")
layer_flags.define_layer_flags()

FLAGS = flags.FLAGS


def config_from_flags(fv=FLAGS) -> config_lib.TD3Config:
  return config_lib.TD3Config(
      env=fv.env, total_steps=fv.total_steps, start_steps=fv.start_steps,
      batch_size=fv.batch_size, replay_size=fv.replay_size,
      hidden_sizes=tuple(int(h) for h in fv.hidden_sizes), discount=fv.discount, tau=fv.tau,
      policy_noise=fv.policy_noise, noise_clip=fv.noise_clip, policy_delay=fv.policy_delay,
      exploration_noise=fv.exploration_noise, actor_lr=fv.actor_lr, critic_lr=fv.critic_lr,
      update_every=fv.update_every, eval_every=fv.eval_every, eval_episodes=fv.eval_episodes,
      checkpoint_every=fv.checkpoint_every, log_every=fv.log_every, seed=fv.seed,
      jit_compile=fv.jit_compile)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  config = config_from_flags()
  plan = layer_flags.layer_plan_from_flags(FLAGS)
  reward_config = layer_flags.reward_aware_config_from_flags(FLAGS)
  flags_text = FLAGS.flags_into_string()

  def write_flags():  # once the checkpoint is restored or refused: never the refused run's
    atomic_files.write_text(os.path.join(FLAGS.logdir, "flags.txt"), flags_text)

  with logdir_lock.hold(FLAGS.logdir):
    summary = train_lib.train(config, plan, reward_config, FLAGS.logdir, resume=FLAGS.resume,
                              export=FLAGS.export,
                              resume_without_replay=FLAGS.resume_without_replay,
                              on_start=write_flags)
  summary = {k: v for k, v in summary.items() if k != "layers"}
  print(json.dumps(summary))


if __name__ == "__main__":
  cli.run(main, "tfrl.td3")
