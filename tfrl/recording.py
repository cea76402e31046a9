"""Recordings of an evaluation: slot 0's first episode as a GIF or MP4.

`python -m tfrl.evaluate --record=FILE.gif|.mp4` saves slot 0's first
episode as the game's own screen (Atari: the native 210x160 RGB screen, the
last emulator frame of each step, as gymnasium's `render()`; gymnasium envs:
their rgb_array render; MuJoCo tasks are replayed and rendered in a child
process without TensorFlow, `tfrl.render_worker`, off-screen through EGL on
a machine without a display unless MUJOCO_GL says otherwise), or with
`--record_view=agent` as the policy's observation. See `Viewer`.
"""

import os
import pickle
import subprocess
import sys

from absl import logging
import numpy as np

from tfrl import atomic_files
from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol

RECORD_FORMATS = (".gif", ".mp4")
VIDEO_EXTRA = "pip install 'tfrl[video]' (imageio-ffmpeg)"


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
    obs = np.asarray(self.env.reset())
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
    obs, r, term, trunc = (np.asarray(t) for t in self.env.step(np.asarray(action)[None]))
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


def make_viewer(protocol: EnvProtocol, seed: int, view: str) -> Viewer:
  """The `Viewer` of `view` ("screen" or "agent") for the env of `protocol`."""
  if protocol.is_atari and view == "screen":
    # The raw last frame of each step, as gymnasium's render() shows it (the
    # agent's max over two frames would show moving sprites twice).
    env = make_env(protocol, 1, seed, auto_reset=False, max_pool=False,
                   grayscale=False, screen_size=None, stack=1)
    return Viewer(env, view, lambda obs: obs)
  if view == "agent":
    return Viewer(make_env(protocol, 1, seed, auto_reset=False), view, observation_frame)
  if _is_mujoco(protocol.env):
    from tfrl.envs import gym_batch  # pylint: disable=import-outside-toplevel
    env = RemoteEnv(protocol.env, protocol.max_episode_steps, gym_batch.slot_seed(seed, 0))
    return Viewer(env, view, observation_frame, render=env.render)
  env = make_env(protocol, 1, seed, auto_reset=False, render_mode="rgb_array")
  return Viewer(env, view, observation_frame, render=lambda: env.render(0))


def _is_mujoco(env_id: str) -> bool:
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  try:
    entry_point = gym.spec(env_id).entry_point
  except gym.error.Error:
    return False
  return isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.mujoco")


class RemoteEnv:
  """A one-slot gymnasium env played in a `tfrl.render_worker` child process.

  What `Viewer` uses of a batched env (`reset`, `step`, `render`, `close`),
  with numpy arrays; its episode starts from `reset_seed` (the seed of the
  slot it replays).
  """

  def __init__(self, env_id: str, max_episode_steps, reset_seed: int):
    env = dict(os.environ)
    if "MUJOCO_GL" not in env and not env.get("DISPLAY"):
      env["MUJOCO_GL"] = "egl"  # gymnasium would try GLFW first, which needs a display
    self._proc = subprocess.Popen(
        [sys.executable, "-m", "tfrl.render_worker", env_id, str(max_episode_steps or 0)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    self._reset_seed = int(reset_seed)
    self.num_envs = 1
    self.auto_reset = False

  def _call(self, command: str, argument=None):
    try:
      pickle.dump((command, argument), self._proc.stdin)
      self._proc.stdin.flush()
      status, result = pickle.load(self._proc.stdout)
    except (EOFError, BrokenPipeError, OSError) as e:
      raise RuntimeError(f"the renderer process ended ({type(e).__name__}, exit code "
                         f"{self._proc.poll()})") from None
    if status != "ok":
      raise RuntimeError(result)
    return result

  def reset(self):
    return np.asarray(self._call("reset", self._reset_seed))[None]

  def step(self, actions):
    obs, reward, terminated, truncated = self._call("step", np.asarray(actions)[0])
    return (np.asarray(obs)[None], np.array([reward], np.float32), np.array([terminated]),
            np.array([truncated]))

  def render(self):
    return self._call("render")

  def close(self):
    try:
      pickle.dump(("close", None), self._proc.stdin)
      self._proc.stdin.close()
    except OSError:
      pass  # already gone
    try:
      self._proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self._proc.kill()
      self._proc.wait()


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
