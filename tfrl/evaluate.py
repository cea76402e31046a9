"""Plays a SavedModel policy (tfrl.export format) and reports its scores.

  python -m tfrl.evaluate --policy=/tmp/tfrl_ga3c/saved_model \
      --game=PongNoFrameskip-v4 --episodes=10 [--record=pong.mp4]
  python -m tfrl.evaluate --policy=DIR --env=CartPole-v1 --episodes=20

Atari games run on `tfrl.envs.AtariEnv` with the protocol set by flags
(no-op starts, sticky actions, frame cap, greedy or sampled actions); any
gymnasium env runs on `tfrl.envs.GymEnv`. Episodes are spread over
`--num_envs` slots played as one batch; slot i plays episodes i, i+n, ...
Prints mean / std / min / max and writes a JSON report.

`--record=FILE.gif|.mp4` saves slot 0's first episode as the game's own
screen (Atari: the native 210x160 RGB screen, the last emulator frame of each
step, as gymnasium's `render()`; gymnasium envs: their rgb_array render), or
with `--record_view=agent` as the policy's observation. See `Viewer`.
"""

import dataclasses
import os
import re
import time
from typing import Optional

from absl import flags
from absl import logging
import numpy as np

from tfrl import atomic_files
from tfrl import cli
from tfrl import flagconfig

RECORD_FORMATS = (".gif", ".mp4")
VIDEO_EXTRA = "pip install 'tfrl[video]' (imageio-ffmpeg)"


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """The settings of one evaluation; each field is the flag of its name."""
  policy: Optional[str] = flagconfig.field(
      None, "SavedModel policy directory (e.g. <logdir>/saved_model).")
  game: Optional[str] = flagconfig.field(
      None, "Atari game (e.g. PongNoFrameskip-v4), played on AtariEnv.")
  env: Optional[str] = flagconfig.field(
      None, "A gymnasium env id (e.g. CartPole-v1), played on GymEnv.")
  episodes: int = flagconfig.field(10, "Episodes to play.")
  num_envs: int = flagconfig.field(
      0, "Slots played as one batch; 0 = min(episodes, 8).")
  greedy: bool = flagconfig.field(
      True, "Take the policy's `action` (greedy); --nogreedy samples from `probs`.")
  noop_max: int = flagconfig.field(
      30, "Atari: up to this many no-op frames at episode start.")
  repeat_action_probability: Optional[float] = flagconfig.field(
      None, "Atari: sticky-action probability; default: the game id's (v4: 0, "
      "v5: 0.25).")
  frame_skip: int = flagconfig.field(4, "Atari: frames per step.")
  max_episode_frames: int = flagconfig.field(
      108000,
      "Frame cap per episode (Atari emulator frames; gymnasium env steps); an "
      "episode hitting it ends truncated. 0 disables (Atari) / uses the env's "
      "own limit (gymnasium).")
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

  def __post_init__(self):
    if bool(self.game) == bool(self.env):
      raise ValueError("Give exactly one of --game (Atari) or --env (gymnasium id).")
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
for _field in dataclasses.fields(EvalConfig):  # listed by --help
  flags.declare_key_flag(flagconfig.flag_name(_field))


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


def make_env(config: EvalConfig, num_envs: int, **overrides):
  """AtariEnv for a game (with the protocol flags) or GymEnv for an env id.

  `overrides` are the env's own settings (e.g. `auto_reset`, and for Atari the
  screen settings) on top of the config's protocol.
  """
  game, env_id = config.game, config.env
  if game:
    # Imported here: it needs the compiled ALE ops, whose ImportError (how to
    # build them) cli.run reports in one line.
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    try:
      return AtariEnv(game, num_envs, frame_skip=config.frame_skip,
                      noop_max=config.noop_max,
                      repeat_action_probability=config.repeat_action_probability,
                      max_episode_frames=config.max_episode_frames,
                      seed=config.seed, **overrides)
    except (ValueError, RuntimeError) as e:
      _fail(f"unknown or unusable --game={game}: {str(e).splitlines()[0]}")
    except Exception as e:  # pylint: disable=broad-except
      # The op reports a missing ROM as a TF error.
      message = getattr(e, "message", str(e)).splitlines()[0]
      message = re.sub(r"^\{\{[^}]*\}\}\s*", "", message)
      message = message.split("; available")[0]
      _fail(f"unknown or unusable --game={game}: {message[:300]}")
  from tfrl.envs import GymEnv  # pylint: disable=import-outside-toplevel
  try:
    return GymEnv(env_id, num_envs, seed=config.seed, **overrides)
  except ValueError as e:
    _fail(f"unknown or unusable --env={env_id}: {str(e).splitlines()[0]}")


def observation_frame(obs):
  """An RGB uint8 picture of one observation (the agent's view)."""
  obs = np.asarray(obs)
  if obs.ndim == 1:
    return _bars(obs)
  if obs.ndim == 3:
    frame = obs[..., -1] if obs.shape[-1] not in (3,) else obs
    if frame.ndim == 2:
      frame = np.repeat(frame[..., None], 3, axis=-1)
    return np.kron(frame, np.ones((2, 2, 1), np.uint8))  # 2x upscale.
  return None


def _bars(vector, height=96, bar=24):
  """A bar chart of an observation vector (for envs without a renderer)."""
  x = np.tanh(np.asarray(vector, np.float64))
  frame = np.full((height, bar * len(x), 3), 255, np.uint8)
  mid = height // 2
  for i, v in enumerate(x):
    top, bottom = sorted((mid, int(mid - v * (mid - 2))))
    frame[top:bottom + 1, i * bar + 2:(i + 1) * bar - 2] = (40, 90, 200)
  frame[mid, :] = 0
  return frame


class Viewer:
  """Plays slot 0's first episode again on a one-slot env and draws it.

  The envs are deterministic given their seed: slot 0 of a one-slot env made
  with the same game, protocol and seed starts the same game (Atari: the
  slot seed (seed, 0) draws the no-op start, the sticky actions and the
  power-on RAM; gymnasium: the same reset seed), and given slot 0's actions it
  plays the same episode. Only what it shows differs (Atari `screen`: RGB,
  native size, no max-pool, one frame), and it does not auto-reset, so the
  recording ends on the episode's last screen: `steps + 1` frames. Each
  step's reward and end flags are checked against slot 0's; should they ever
  differ, the recording stops there (`diverged_at`) rather than show another
  game.
  """

  def __init__(self, env, view: str, frame_fn, render=None):
    self.env = env
    self.view = view
    self._frame_fn = frame_fn  # observation -> RGB frame
    self._render = render      # () -> RGB frame of the env's screen, if any
    self.frames = []
    self.diverged_at = None    # the step whose outcome differed from slot 0's

  def _frame(self, obs):
    if self._render is not None:
      return np.asarray(self._render(), np.uint8)
    return self._frame_fn(obs)

  def start(self):
    obs = self.env.reset().numpy()
    if self._render is not None:
      try:
        self._render()
      except Exception as e:  # pylint: disable=broad-except
        # e.g. pygame missing for the classic-control envs: draw the
        # observation instead.
        logging.warning("the env cannot render (%s: %s); recording the agent's "
                        "view instead.", type(e).__name__, str(e).split("\n")[0])
        self._render, self.view = None, "agent"
    self.frames.append(self._frame(obs[0]))

  def step(self, action, reward, terminated, truncated) -> bool:
    """Steps the copy with slot 0's action; False if it no longer matches."""
    obs, r, term, trunc = (t.numpy() for t in self.env.step(np.asarray(action)[None]))
    if (not np.isclose(r[0], reward, rtol=1e-6, atol=1e-6)
        or bool(term[0]) != bool(terminated) or bool(trunc[0]) != bool(truncated)):
      self.diverged_at = len(self.frames)
      logging.warning("the recording's env diverged from slot 0 at step %d "
                      "(reward %s vs %s); the recording stops there.",
                      self.diverged_at, r[0], reward)
      return False
    self.frames.append(self._frame(obs[0]))
    return True

  def close(self):
    self.env.close()


def make_viewer(config: EvalConfig) -> Viewer:
  """The `Viewer` of `config.record_view` for `config`'s env."""
  view = config.record_view
  if config.game and view == "screen":
    # The raw last frame of each step, as gymnasium's render() shows it (the
    # agent's max over two frames would show moving sprites twice).
    env = make_env(config, 1, auto_reset=False, max_pool=False,
                   grayscale=False, screen_size=None, stack=1)
    return Viewer(env, view, lambda obs: obs)
  if view == "agent":
    return Viewer(make_env(config, 1, auto_reset=False), view, observation_frame)
  env = make_env(config, 1, auto_reset=False, render_mode="rgb_array")
  return Viewer(env, view, observation_frame, render=lambda: env.render(0))


def mp4_backend():
  """'imageio_ffmpeg' (H.264) or 'cv2' (MPEG-4 part 2), whichever is installed."""
  for name in ("imageio_ffmpeg", "cv2"):
    try:
      __import__(name)
    except ImportError:
      continue
    return name
  return None


def check_record_path(path: str) -> None:
  """Before the episodes are played: the format can be written, the folder exists."""
  if path.lower().endswith(".mp4") and mp4_backend() is None:
    raise ImportError(f"--record={path}: writing .mp4 needs a video encoder: "
                      f"{VIDEO_EXTRA}; or record a .gif.")
  folder = os.path.dirname(os.path.abspath(path))
  try:
    os.makedirs(folder, exist_ok=True)
  except OSError as e:
    raise ValueError(f"--record={path}: cannot create its folder {folder} "
                     f"({e.strerror}).") from None
  if os.path.isdir(path):
    raise ValueError(f"--record={path} is a folder; give a file name.")


def _even(frame):
  """Pads a frame to even height and width (H.264's 4:2:0 needs them)."""
  h, w = frame.shape[:2]
  return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")


def save_video(frames, path, fps):
  """Writes RGB uint8 frames as a GIF or MP4 (by `path`'s extension), whole
  or not at all (a temporary file renamed over `path`)."""
  frames = [np.asarray(f, np.uint8) for f in frames if f is not None]
  if not frames:
    raise ValueError("no frames to record")
  root, ext = os.path.splitext(path)
  if ext.lower() == ".gif":
    from PIL import Image  # pylint: disable=import-outside-toplevel
    images = [Image.fromarray(f) for f in frames]
    with atomic_files.replacing(path) as f:
      # Identical frames in a row become one, shown for their total duration.
      images[0].save(f, format="GIF", save_all=True, append_images=images[1:],
                     duration=max(1, int(1000 / fps)), loop=0)
    return
  frames = [_even(f) for f in frames]
  height, width = frames[0].shape[:2]
  tmp = f"{root}.tmp{ext}"  # the encoders pick the container by extension
  try:
    if mp4_backend() == "imageio_ffmpeg":
      import imageio_ffmpeg  # pylint: disable=import-outside-toplevel
      writer = imageio_ffmpeg.write_frames(
          tmp, (width, height), fps=fps, codec="libx264", pix_fmt_out="yuv420p",
          macro_block_size=2, ffmpeg_log_level="error")
      writer.send(None)
      for frame in frames:
        writer.send(np.ascontiguousarray(frame).tobytes())
      writer.close()
    else:
      import cv2  # pylint: disable=import-outside-toplevel
      writer = cv2.VideoWriter(tmp, cv2.VideoWriter_fourcc(*"mp4v"), fps,
                               (width, height))
      if not writer.isOpened():
        raise ImportError(f"OpenCV cannot write {path}: {VIDEO_EXTRA}.")
      for frame in frames:
        writer.write(np.ascontiguousarray(frame[..., ::-1]))  # RGB -> BGR
      writer.release()
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def evaluate(serve, env, episodes, *, greedy=True, seed=0, step_cap=0,
             viewer: Optional[Viewer] = None):
  """Plays `episodes` episodes; returns (scores, lengths, recorded frames).

  Args:
    serve: the policy's serving function, `serve(obs=batch) -> dict`.
    env: a batched tfrl env (AtariEnv or GymEnv).
    episodes: how many episodes.
    greedy: use `action` (else sample from `probs` when present).
    step_cap: end an episode after this many env steps (0: no cap here).
    viewer: plays slot 0's first episode again and draws it (`Viewer`): its
      frames are returned, `lengths[0] + 1` of them (fewer if it diverged).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  n = env.num_envs
  rng = np.random.RandomState(seed)
  quota = np.array([len(range(i, episodes, n)) for i in range(n)])
  returns = np.zeros(n)
  steps = np.zeros(n, np.int64)
  scores, lengths = [], []
  obs = env.reset().numpy()
  recording = viewer is not None
  if recording:
    viewer.start()
  while quota.sum() > 0:
    active = np.nonzero(quota > 0)[0].astype(np.int32)
    out = serve(obs=tf.constant(obs[active]))
    if not greedy and "probs" in out:
      probs = out["probs"].numpy().astype(np.float64)
      probs /= probs.sum(axis=1, keepdims=True)
      actions = np.array([rng.choice(len(p), p=p) for p in probs], np.int32)
    else:
      actions = out["action"].numpy()
    new_obs, reward, terminated, truncated = (
        t.numpy() for t in env.step(actions, active))
    if recording and active[0] == 0:
      recording = viewer.step(actions[0], reward[0], terminated[0], truncated[0])
    obs[active] = new_obs
    returns[active] += reward
    steps[active] += 1
    done = terminated | truncated
    if step_cap:
      done |= steps[active] >= step_cap
    for j in np.nonzero(done)[0]:
      i = active[j]
      scores.append(float(returns[i]))
      lengths.append(int(steps[i]))
      returns[i], steps[i] = 0.0, 0
      quota[i] -= 1
      if i == 0:
        recording = False
      if not (terminated[j] or truncated[j]):  # Our own cap: start anew.
        obs[i] = env.reset(np.array([i], np.int32)).numpy()[0]
  return scores, lengths, viewer.frames if viewer is not None else []


def config_from_flags(fv: flags.FlagValues = flags.FLAGS) -> EvalConfig:
  try:
    return flagconfig.build(EvalConfig, fv=fv)
  except ValueError as e:
    _fail(e)


def main(argv):
  if len(argv) > 1:
    _fail(f"unexpected arguments: {' '.join(argv[1:])}")
  config = config_from_flags()
  if config.record:
    try:  # before the episodes: a bad path must not cost the evaluation
      check_record_path(config.record)
    except (ValueError, ImportError) as e:
      _fail(e)
  _, serve, spec = load_policy(config.policy)
  num_envs = config.num_envs or min(config.episodes, 8)
  env = make_env(config, num_envs)
  expected = tuple(spec.shape[1:])
  if tuple(env.observation_shape) != expected:
    _fail(f"the policy takes observations of shape {expected}, the env gives "
          f"{tuple(env.observation_shape)}.")
  viewer = make_viewer(config) if config.record else None
  step_cap = 0 if config.game else config.max_episode_frames
  start = time.time()
  scores, lengths, frames = evaluate(
      serve, env, config.episodes, greedy=config.greedy, seed=config.seed,
      step_cap=step_cap, viewer=viewer)
  seconds = time.time() - start
  name = config.game or config.env
  report = {
      "policy": os.path.abspath(config.policy),
      "env": name,
      "episodes": len(scores),
      "mean": float(np.mean(scores)), "std": float(np.std(scores)),
      "min": float(np.min(scores)), "max": float(np.max(scores)),
      "scores": scores, "lengths": lengths,
      "protocol": {
          "greedy": config.greedy,
          "noop_max": config.noop_max if config.game else None,
          "repeat_action_probability": config.repeat_action_probability,
          "frame_skip": config.frame_skip if config.game else None,
          "max_episode_frames": config.max_episode_frames,
          "seed": config.seed, "num_envs": num_envs},
      "seconds": seconds,
  }
  if viewer is not None:
    report["record"] = {
        "path": os.path.abspath(config.record), "view": viewer.view,
        "frames": len(frames), "fps": config.record_fps,
        "frame_shape": list(frames[0].shape), "diverged_at": viewer.diverged_at}
    viewer.close()
  output = config.output or os.path.join(
      os.path.dirname(os.path.abspath(config.policy)),
      "eval_" + name.replace("/", "_") + ".json")
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  atomic_files.write_json(output, report, indent=1)
  if config.record:
    save_video(frames, config.record, config.record_fps)
  print(f"{name}: {len(scores)} episodes  mean {report['mean']:.2f}  "
        f"std {report['std']:.2f}  min {report['min']:.2f}  "
        f"max {report['max']:.2f}  ({seconds:.1f} s)")
  print(f"report: {output}" + (f"  recording: {config.record} "
                                f"({len(frames)} frames)" if config.record else ""))
  logging.info("Evaluation report written to %s", output)


def run():
  cli.run(main, "tfrl.evaluate")


if __name__ == "__main__":
  run()
