"""GA3C training: `python -m tfrl.ga3c --game=PongNoFrameskip-v4`.

Presets: `--flagfile=flags/ga3c_pong.flags`, `--flagfile=flags/ga3c_cartpole.flags`.
Layer variants: `--dense_layer=circulant` etc. (tfrl.layers.flags).
The flags of a run are written to `<logdir>/flags.txt`; replay a run with
`--flagfile=<logdir>/flags.txt`. Ctrl-C or SIGTERM stops cleanly with a final
checkpoint and SavedModel (`<logdir>/saved_model`).
"""

import os

from absl import app
from absl import flags
from absl import logging

from tfrl import atomic_files
from tfrl import cli
from tfrl import logdir_lock

from tfrl.layers import flags as layer_flags

_GAME = flags.DEFINE_string(
    "game", "PongNoFrameskip-v4",
    "Atari game for the ALE op env (e.g. Pong or PongNoFrameskip-v4).")
_ENV = flags.DEFINE_string(
    "env", None,
    "A gymnasium env id (e.g. CartPole-v1) instead of --game; uses GymEnv.")
_LOGDIR = flags.DEFINE_string(
    "logdir", "/tmp/tfrl_ga3c",
    "Directory for checkpoints, TensorBoard summaries, the SavedModel policy "
    "and profiler traces.")
_MAX_FRAMES = flags.DEFINE_integer(
    "max_frames", 0,
    "Stop after this many emulator frames (env steps x frame skip); 0 trains "
    "until stopped.")
_MAX_SECONDS = flags.DEFINE_float(
    "max_seconds", 0, "Stop after this many seconds of training; 0: no limit.")
_TARGET_SCORE = flags.DEFINE_float(
    "target_score", None,
    "Stop once the rolling score over --score_window episodes reaches this.")
_SEED = flags.DEFINE_integer("seed", 0, "Random seed (envs, sampling).")
_AGENTS = flags.DEFINE_integer("agents", 16, "Number of agents (NA) at start.")
_PREDICTORS = flags.DEFINE_integer(
    "predictors", 1, "Number of predictor loops (NP) at start.")
_TRAINERS = flags.DEFINE_integer(
    "trainers", 1, "Number of trainer loops (NT) at start.")
_MAX_AGENTS = flags.DEFINE_integer(
    "max_agents", 32,
    "Most agents the dynamic adjustment may run (env slots are created for "
    "max_agents x envs_per_agent).")
_MAX_PREDICTORS = flags.DEFINE_integer(
    "max_predictors", 4, "Most predictors the dynamic adjustment may run.")
_MAX_TRAINERS = flags.DEFINE_integer(
    "max_trainers", 4, "Most trainers the dynamic adjustment may run.")
_ENVS_PER_AGENT = flags.DEFINE_integer(
    "envs_per_agent", 1,
    "Env slots each agent steps together (1 = the paper's one env per agent).")
_DYNAMIC_ADJUSTMENT = flags.DEFINE_bool(
    "dynamic_adjustment", False,
    "Hill-climb NA/NP/NT at run time on the training rate (GA3C, sec. 4.2).")
_ADJUSTMENT_PERIOD = flags.DEFINE_float(
    "adjustment_period", 10.0, "Seconds per dynamic-adjustment trial.")
_PREDICTION_BATCH_SIZE = flags.DEFINE_integer(
    "prediction_batch_size", 128,
    "Most prediction requests a predictor takes per forward pass.")
_TRAINING_MIN_BATCH_SIZE = flags.DEFINE_integer(
    "training_min_batch_size", 0,
    "Samples a trainer waits for before an update (rounded up to whole "
    "t_max segments); 0 = one segment.")
_TRAINING_MAX_BATCH_SIZE = flags.DEFINE_integer(
    "training_max_batch_size", 0,
    "Most samples per update when more are waiting; 0 = 4x the minimum.")
_PREDICTION_QUEUE_SIZE = flags.DEFINE_integer(
    "prediction_queue_size", 128, "Capacity of the prediction queue.")
_TRAINING_QUEUE_SIZE = flags.DEFINE_integer(
    "training_queue_size", 64, "Capacity of the training queue (segments).")
_T_MAX = flags.DEFINE_integer("t_max", 5, "n of the n-step returns.")
_DISCOUNT = flags.DEFINE_float("discount", 0.99, "Discount gamma.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 3e-4, "RMSProp step size.")
_RMSPROP_DECAY = flags.DEFINE_float("rmsprop_decay", 0.99, "RMSProp decay.")
_RMSPROP_EPSILON = flags.DEFINE_float(
    "rmsprop_epsilon", 0.1, "RMSProp epsilon (GA3C: 0.1).")
_ENTROPY_BETA = flags.DEFINE_float(
    "entropy_beta", 0.01, "Weight of the entropy bonus.")
_VALUE_COEF = flags.DEFINE_float(
    "value_coef", 0.5, "Weight of the squared value error.")
_LOG_EPSILON = flags.DEFINE_float(
    "log_epsilon", 1e-6,
    "Probabilities are clipped below at this inside logs (policy-lag guard).")
_REWARD_CLIP = flags.DEFINE_float(
    "reward_clip", 1.0, "Clip training rewards to [-c, c]; 0 disables.")
_LOSS_REDUCTION = flags.DEFINE_enum(
    "loss_reduction", "sum", ["sum", "mean"],
    "Sum (GA3C) or average the loss over the samples of a batch.")
_GRAD_CLIP_NORM = flags.DEFINE_float(
    "grad_clip_norm", 0.0, "Clip gradients to this global norm; 0 disables.")
_HIDDEN_SIZES = flags.DEFINE_list(
    "hidden_sizes", ["64", "64"], "MLP torso sizes for non-image envs.")
_EPISODIC_LIFE = flags.DEFINE_bool(
    "episodic_life", False, "Atari: a lost life ends a training episode.")
_STICKY = flags.DEFINE_float(
    "repeat_action_probability", 0.0, "Atari sticky-action probability.")
_CHECKPOINT_EVERY = flags.DEFINE_float(
    "checkpoint_every", 600.0,
    "Seconds between checkpoints (each also exports the SavedModel); 0: only "
    "at the end.")
_RESUME = flags.DEFINE_bool(
    "resume", False,
    "Continue from the latest checkpoint in --logdir (weights, optimizer, "
    "frame/episode counters).")
_PROFILE_STEPS = flags.DEFINE_string(
    "profile_steps", None,
    "START,END training steps between which a TensorBoard profiler trace is "
    "recorded under <logdir>/profile.")
_STATS_EVERY = flags.DEFINE_float(
    "stats_every", 5.0, "Seconds between console/TensorBoard stats lines.")
_SCORE_WINDOW = flags.DEFINE_integer(
    "score_window", 100, "Episodes in the rolling score.")

layer_flags.define_layer_flags()


def _parse_profile_steps(text):
  if not text:
    return None
  try:
    start, end = (int(x) for x in text.split(","))
  except ValueError:
    raise app.UsageError(
        f"--profile_steps must be START,END (two integers), got {text!r}.")
  return start, end


def config_from_flags():
  """Converts the flags into a typed GA3CConfig."""
  from tfrl.ga3c.config import GA3CConfig
  env = _ENV.value
  try:
    return GA3CConfig(
        game=None if env else _GAME.value, env=env, seed=_SEED.value,
        envs_per_agent=_ENVS_PER_AGENT.value,
        episodic_life=_EPISODIC_LIFE.value,
        repeat_action_probability=_STICKY.value,
        agents=_AGENTS.value, predictors=_PREDICTORS.value,
        trainers=_TRAINERS.value, max_agents=_MAX_AGENTS.value,
        max_predictors=_MAX_PREDICTORS.value, max_trainers=_MAX_TRAINERS.value,
        dynamic_adjustment=_DYNAMIC_ADJUSTMENT.value,
        adjustment_period=_ADJUSTMENT_PERIOD.value,
        prediction_batch_size=_PREDICTION_BATCH_SIZE.value,
        training_min_batch_size=_TRAINING_MIN_BATCH_SIZE.value,
        training_max_batch_size=_TRAINING_MAX_BATCH_SIZE.value,
        prediction_queue_size=_PREDICTION_QUEUE_SIZE.value,
        training_queue_size=_TRAINING_QUEUE_SIZE.value,
        t_max=_T_MAX.value, discount=_DISCOUNT.value,
        learning_rate=_LEARNING_RATE.value,
        rmsprop_decay=_RMSPROP_DECAY.value,
        rmsprop_epsilon=_RMSPROP_EPSILON.value,
        entropy_beta=_ENTROPY_BETA.value, value_coef=_VALUE_COEF.value,
        log_epsilon=_LOG_EPSILON.value, reward_clip=_REWARD_CLIP.value,
        loss_reduction=_LOSS_REDUCTION.value,
        grad_clip_norm=_GRAD_CLIP_NORM.value,
        hidden_sizes=tuple(int(h) for h in _HIDDEN_SIZES.value),
        layer_plan=layer_flags.layer_plan_from_flags(flags.FLAGS),
        reward_aware=layer_flags.reward_aware_config_from_flags(flags.FLAGS),
        logdir=_LOGDIR.value, max_frames=_MAX_FRAMES.value,
        max_seconds=_MAX_SECONDS.value,
        checkpoint_every=_CHECKPOINT_EVERY.value, resume=_RESUME.value,
        profile_steps=_parse_profile_steps(_PROFILE_STEPS.value),
        stats_every=_STATS_EVERY.value, score_window=_SCORE_WINDOW.value,
        target_score=_TARGET_SCORE.value)
  except ValueError as e:
    raise app.UsageError(str(e))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  config = config_from_flags()
  with logdir_lock.hold(config.logdir):
    from tfrl.ga3c.system import GA3C
    try:
      system = GA3C(config)  # refuses a fresh run over checkpoints, bad ones
    except (ValueError, ImportError) as e:
      raise app.UsageError(str(e))
    atomic_files.write_text(os.path.join(config.logdir, "flags.txt"),
                            flags.FLAGS.flags_into_string())
    summary = system.run()
    path = os.path.join(config.logdir, "summary.json")
    atomic_files.write_json(path, summary, indent=1)
    logging.info("Summary written to %s", path)


if __name__ == "__main__":
  cli.run(main, "tfrl.ga3c")
