"""Plays a SavedModel policy (tfrl.export format) and reports its scores.

  python -m tfrl.evaluate --policy=/tmp/tfrl_ga3c/saved_model --episodes=10
  python -m tfrl.evaluate --policy=DIR --repeat_action_probability=0.25 [--record=pong.mp4]
  python -m tfrl.evaluate --policy=DIR --env=CartPole-v1 --episodes=20

The env is made as the policy's exported env protocol says (game or
gymnasium id, frame skip, sticky actions, no-op starts, frame cap; see
`tfrl.envs.EnvProtocol`), so a policy is evaluated the way it was trained.
A protocol flag given on the command line overrides the policy's value and
is reported (`--repeat_action_probability=0.25 overrides the policy's 0.0`);
a policy without a protocol (an older export) needs --game or --env, and the
flags are its protocol. Episodic life is a training signal: evaluation plays
whole games unless --episodic_life is given.

Episodes are spread over `--num_envs` slots played as one batch; slot i plays
episodes i, i+n, ... Prints mean / std / min / max and writes a JSON report
(with the protocol it played and the command line). `--record=FILE.gif|.mp4`
saves slot 0's first episode (see `tfrl.recording`).
"""

import dataclasses
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

from absl import flags
from absl import logging
import numpy as np

from tfrl import atomic_files
from tfrl import cli
from tfrl import flagconfig
from tfrl import recording
from tfrl.envs import episodes as episodes_lib
from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol

# What tests and scripts used from here before the recording moved out.
RECORD_FORMATS, VIDEO_EXTRA = recording.RECORD_FORMATS, recording.VIDEO_EXTRA
Viewer, observation_frame = recording.Viewer, recording.observation_frame
mp4_backend, check_record_path = recording.mp4_backend, recording.check_record_path
save_video = recording.save_video
evaluate = episodes_lib.play_episodes


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """The settings of one evaluation; each field made with `flagconfig.field` is
  the flag of its name. `protocol`: the env's, from the policy and the flags."""
  policy: Optional[str] = flagconfig.field(
      None, "SavedModel policy directory (e.g. <logdir>/saved_model).")
  episodes: int = flagconfig.field(10, "Episodes to play.")
  num_envs: int = flagconfig.field(
      0, "Slots played as one batch; 0 = min(episodes, 8).")
  greedy: bool = flagconfig.field(
      True, "Take the policy's `action` (greedy); --nogreedy samples from `probs`.")
  seed: int = flagconfig.field(0, "Seed of the env slots and sampling.")
  output: Optional[str] = flagconfig.field(
      None, "JSON report path; default: eval_<game or env>.json next to --policy.")
  record: Optional[str] = flagconfig.field(
      None, "Save the first episode of slot 0 as this video, .gif or .mp4 (by "
      "the extension; its folder is created). Frames: the first screen and the "
      "one after each step.")
  record_view: str = flagconfig.field(
      "screen", "What --record shows: screen (the game as a player sees it: "
      "Atari's native 210x160 RGB screen, a gymnasium env's rgb_array render) "
      "or agent (the policy's observation, e.g. 84x84 grey, upscaled 2x).",
      choices=("screen", "agent"))
  record_fps: int = flagconfig.field(30, "Frames/s of the recording.")
  protocol: Optional[EnvProtocol] = None

  def __post_init__(self):
    if self.episodes < 1:
      raise ValueError(f"--episodes must be >= 1, got {self.episodes}.")
    if self.num_envs < 0:
      raise ValueError(f"--num_envs must be >= 0, got {self.num_envs}.")
    if self.record:
      if os.path.splitext(self.record)[1].lower() not in RECORD_FORMATS:
        raise ValueError(f"--record={self.record}: the file must end in .gif or "
                         ".mp4 (the format is chosen by the extension).")
      if self.record_fps < 1:
        raise ValueError(f"--record_fps must be >= 1, got {self.record_fps}.")


flagconfig.define(EvalConfig)
flagconfig.define(EnvProtocol)
for _name in (*flagconfig.flag_names(EvalConfig), *flagconfig.flag_names(EnvProtocol)):
  flags.declare_key_flag(_name)  # listed by --help


def _fail(message: str):
  """Bad input: one readable line on stderr, exit status 2 (as every tfrl CLI)."""
  cli.fail("tfrl.evaluate", message)


def load_policy(path: str):
  """Loads a tfrl SavedModel policy; returns (serving fn, obs TensorSpec)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if not path:
    _fail("--policy is required (a SavedModel directory).")
  if not os.path.isfile(os.path.join(path, "saved_model.pb")):
    _fail(f"--policy={path} is not a SavedModel directory (no saved_model.pb).")
  try:
    loaded = tf.saved_model.load(path)
  except Exception as e:  # pylint: disable=broad-except
    # Truncated or half-copied SavedModels fail in many ways (protobuf
    # DecodeError, TF DataLoss / NotFound / InvalidArgument, ValueError):
    # each is this bad --policy, not a bug of the evaluator.
    from tfrl import resume  # pylint: disable=import-outside-toplevel
    _fail(f"--policy={path} cannot be loaded ({type(e).__name__}: "
          f"{resume.first_line(e)[:300]}); is it complete?")
  if "serving_default" not in loaded.signatures:
    _fail(f"--policy={path} has no serving_default signature.")
  serve = loaded.signatures["serving_default"]
  spec = next(iter(serve.structured_input_signature[1].values()))
  return loaded, serve, spec


def _given(fv: flags.FlagValues) -> Dict[str, Tuple[str, object]]:
  """{field: (flag as typed, value)} of the protocol flags set on the command line."""
  given = {}
  for flag, name in flagconfig.flag_names(EnvProtocol).items():
    if not fv[flag].using_default_value and fv[flag].value not in (None, ""):
      given[name] = (fv[flag].serialize(), fv[flag].value)
  return given


def resolve_protocol(saved: Optional[EnvProtocol], fv: flags.FlagValues = flags.FLAGS
                     ) -> Tuple[EnvProtocol, List[str]]:
  """The protocol to evaluate on: the policy's (`saved`), with the protocol flags
  given on the command line overriding it; and one note per override.

  Without a saved protocol (an older export) the flags are the protocol.
  ValueError for a bad combination (e.g. both --game and --env).
  """
  given = _given(fv)
  if saved is None:
    if "game" not in given and "env" not in given:
      raise ValueError("the policy records no env protocol (an older export): give "
                       "--game (Atari) or --env (gymnasium id) and its protocol flags.")
    return flagconfig.build(EnvProtocol, fv=fv), [
        "the policy records no env protocol (an older export): playing the flags' one"]
  values, notes = saved.to_json(), []
  if "env" in given:
    values["game"] = None
  elif "game" in given:
    values["env"] = None
  if values["episodic_life"] and "episodic_life" not in given:
    values["episodic_life"] = False
    notes.append("the policy trained with episodic life (a lost life ended an episode); "
                 "evaluation plays whole games (--episodic_life to keep it)")
  for name, (typed, value) in given.items():
    if value != values.get(name):
      shown = "(its default)" if values.get(name) is None else repr(values.get(name))
      notes.append(f"{typed} overrides the policy's {shown}")
    values[name] = value
  return EnvProtocol(**values), notes


def make_viewer(config: EvalConfig) -> Viewer:
  """The `recording.Viewer` of `config.record_view` for `config`'s env."""
  return recording.make_viewer(config.protocol, config.seed, config.record_view)


def _read_saved_protocol(path: str) -> Optional[EnvProtocol]:
  from tfrl import export  # pylint: disable=import-outside-toplevel
  try:
    return export.read_env_protocol(path)
  except ValueError as e:
    _fail(f"--policy={path}: {e}")


def config_from_flags(fv: flags.FlagValues = flags.FLAGS) -> EvalConfig:
  try:
    return flagconfig.build(EvalConfig, fv=fv)
  except ValueError as e:
    _fail(e)


def _report(config: EvalConfig, scores, lengths, num_envs: int, notes, seconds) -> dict:
  return {
      "policy": os.path.abspath(config.policy),
      "env": config.protocol.name,
      "episodes": len(scores),
      "mean": float(np.mean(scores)), "std": float(np.std(scores)),
      "min": float(np.min(scores)), "max": float(np.max(scores)),
      "scores": scores, "lengths": lengths,
      # The env protocol played (the game id's defaults written out), and how
      # the actions were chosen.
      "protocol": {**config.protocol.resolved().to_json(), "greedy": config.greedy,
                   "seed": config.seed, "num_envs": num_envs},
      "protocol_notes": notes,
      "command": [os.path.basename(sys.executable), "-m", "tfrl.evaluate", *sys.argv[1:]],
      "seconds": seconds,
  }


def _prepare(fv: flags.FlagValues):
  """(config with its protocol, serving fn, notes): bad input ends here in one line."""
  config = config_from_flags(fv)
  if config.record:
    try:  # before the episodes: a bad path must not cost the evaluation
      check_record_path(config.record)
    except (ValueError, ImportError) as e:
      _fail(e)
  _, serve, spec = load_policy(config.policy)
  try:
    protocol, notes = resolve_protocol(_read_saved_protocol(config.policy), fv)
  except ValueError as e:
    _fail(e)
  return dataclasses.replace(config, protocol=protocol), serve, spec, notes


def main(argv):
  if len(argv) > 1:
    _fail(f"unexpected arguments: {' '.join(argv[1:])}")
  config, serve, spec, notes = _prepare(flags.FLAGS)
  num_envs = config.num_envs or min(config.episodes, 8)
  try:
    env = make_env(config.protocol, num_envs, config.seed)
  except ValueError as e:
    _fail(e)
  expected = tuple(spec.shape[1:])
  if tuple(env.observation_shape) != expected:
    _fail(f"the policy takes observations of shape {expected}, the env gives "
          f"{tuple(env.observation_shape)}.")
  for note in notes:
    print(f"protocol: {note}")
  viewer = make_viewer(config) if config.record else None
  start = time.time()
  scores, lengths, frames = evaluate(serve, env, config.episodes, greedy=config.greedy,
                                     seed=config.seed, viewer=viewer)
  report = _report(config, scores, lengths, num_envs, notes, time.time() - start)
  if viewer is not None:
    report["record"] = {
        "path": os.path.abspath(config.record), "view": viewer.view,
        "frames": len(frames), "fps": config.record_fps,
        "frame_shape": list(frames[0].shape), "diverged_at": viewer.diverged_at}
    viewer.close()
  name = config.protocol.name
  output = config.output or os.path.join(
      os.path.dirname(os.path.abspath(config.policy)),
      "eval_" + name.replace("/", "_") + ".json")
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  atomic_files.write_json(output, report, indent=1)
  if config.record:
    save_video(frames, config.record, config.record_fps)
  print(f"{name}: {len(scores)} episodes  mean {report['mean']:.2f}  "
        f"std {report['std']:.2f}  min {report['min']:.2f}  "
        f"max {report['max']:.2f}  ({report['seconds']:.1f} s)")
  print(f"report: {output}" + (f"  recording: {config.record} "
                                f"({len(frames)} frames)" if config.record else ""))
  logging.info("Evaluation report written to %s", output)


def run():
  cli.run(main, "tfrl.evaluate")


if __name__ == "__main__":
  run()
