"""Tests for `python -m tfrl.evaluate` on saved policies."""

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from unittest import mock

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import evaluate
from tfrl import flagconfig
from tfrl import export
from tfrl import networks
from tfrl.envs import EnvProtocol, GymEnv, make_env

FLAGS = flags.FLAGS
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
  path = os.pathsep.join(p for p in (_REPO, os.environ.get("PYTHONPATH")) if p)
  env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, "-m", "tfrl.evaluate", *args],
                        capture_output=True, text=True, env=env, cwd=_REPO,
                        timeout=240, check=False)


class _Continuous(tf.Module):
  """Pendulum-like: obs [B, 3] -> action [B, 1] in [-2, 2]."""

  def __init__(self):
    super().__init__()
    self.w = tf.Variable([[1.0], [0.5], [-0.3]])

  def __call__(self, obs):
    return {"action": 2.0 * tf.tanh(tf.matmul(obs, self.w))}


def _export_discrete(directory, obs_shape, dtype, num_actions, torso):
  net = networks.ActorCritic(num_actions, torso)
  policy = export.DiscretePolicy(net)
  return export.export_policy(
      policy, tf.TensorSpec((None,) + tuple(obs_shape), dtype), directory)


def _gif_frames(path):
  """(frame size (w, h), total duration in ms) of a GIF."""
  from PIL import Image, ImageSequence  # pylint: disable=import-outside-toplevel
  with Image.open(path) as image:
    durations = [frame.info["duration"] for frame in ImageSequence.Iterator(image)]
    return image.size, sum(durations)


def _mp4_frames(path):
  """The decoded RGB frames of an MP4 (OpenCV decodes both encoders' output)."""
  import cv2  # pylint: disable=import-outside-toplevel  # the test extra: opencv-python-headless
  capture = cv2.VideoCapture(path)
  frames = []
  while True:
    ok, frame = capture.read()
    if not ok:
      break
    frames.append(frame[..., ::-1])
  capture.release()
  return frames


def _need_mp4(test):
  test.assertIsNotNone(evaluate.mp4_backend(), f"no MP4 encoder installed: {evaluate.VIDEO_EXTRA}")


class EvaluateCLITest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  def test_cartpole_report_and_gif(self):
    tmp = self.get_temp_dir()
    policy = _export_discrete(os.path.join(tmp, "cartpole"), (4,), tf.float32,
                              2, networks.MLPTorso([16]))
    report_path = os.path.join(tmp, "report.json")
    gif = os.path.join(tmp, "episode.gif")
    result = _run(f"--policy={policy}", "--env=CartPole-v1", "--episodes=5",
                  "--num_envs=2", "--nogreedy", f"--output={report_path}",
                  f"--record={gif}")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("mean", result.stdout)
    with open(report_path) as f:
      report = json.load(f)
    self.assertEqual(report["episodes"], 5)
    self.assertLen(report["scores"], 5)
    self.assertAllClose(report["mean"], np.mean(report["scores"]))
    for key in ("std", "min", "max", "protocol", "lengths"):
      self.assertIn(key, report)
    self.assertFalse(report["protocol"]["greedy"])
    from PIL import Image
    with Image.open(gif) as image:
      self.assertGreater(image.n_frames, 5)

  def test_atari_policy_on_op_env_with_protocol_flags(self):
    tmp = self.get_temp_dir()
    policy = _export_discrete(os.path.join(tmp, "pong"), (84, 84, 4),
                              tf.uint8, 6, networks.AtariTorso())
    report_path = os.path.join(tmp, "pong.json")
    gif = os.path.join(tmp, "new", "folder", "pong.gif")  # folders are created
    result = _run(f"--policy={policy}", "--game=PongNoFrameskip-v4",
                  "--episodes=2", "--max_episode_frames=400", "--noop_max=5",
                  "--repeat_action_probability=0.25",
                  f"--output={report_path}", f"--record={gif}", "--record_fps=25")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with open(report_path) as f:
      report = json.load(f)
    self.assertEqual(report["episodes"], 2)
    self.assertEqual(report["protocol"]["repeat_action_probability"], 0.25)
    # The frame cap truncates: 400 frames (no-op start frames included) is at
    # most 100 steps of 4 frames; a random policy loses no Pong game so fast.
    self.assertTrue(all(90 <= l <= 100 for l in report["lengths"]), str(report))
    # By default the native RGB screen: the first one and one per step of
    # slot 0's first episode.
    record = report["record"]
    self.assertEqual((record["view"], record["frame_shape"], record["diverged_at"]),
                     ("screen", [210, 160, 3], None))
    # (Either slot may finish first: their no-op starts differ.)
    self.assertIn(record["frames"] - 1, report["lengths"])
    size, duration = _gif_frames(gif)
    self.assertEqual(size, (160, 210))
    # GIF merges identical frames in a row, adding up their durations.
    self.assertEqual(duration, record["frames"] * 40)
    self.assertIn(f"recording: {gif} ({record['frames']} frames)", result.stdout)

  @parameterized.named_parameters(
      ("mp4_screen", ".mp4", "screen", (210, 160)),
      ("mp4_agent", ".mp4", "agent", (168, 168)),
      ("gif_agent", ".gif", "agent", (168, 168)),
  )
  def test_atari_recording(self, extension, view, shape):
    if extension == ".mp4":
      _need_mp4(self)
    tmp = self.get_temp_dir()
    policy = os.path.join(tmp, "pong_policy")
    if not os.path.exists(policy):
      _export_discrete(policy, (84, 84, 4), tf.uint8, 6, networks.AtariTorso())
    report_path = os.path.join(tmp, f"{view}{extension}.json")
    video = os.path.join(tmp, f"pong_{view}{extension.upper()}")  # any case
    result = _run(f"--policy={policy}", "--game=PongNoFrameskip-v4",
                  "--episodes=1", "--max_episode_frames=240", "--seed=3",
                  f"--output={report_path}", f"--record={video}",
                  f"--record_view={view}")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with open(report_path) as f:
      report = json.load(f)
    record = report["record"]
    self.assertEqual(record["frames"], report["lengths"][0] + 1)
    self.assertEqual(record["frame_shape"], [*shape, 3])
    self.assertFalse(os.path.exists(video[:-4] + ".tmp" + extension.upper()))
    if extension == ".gif":
      self.assertEqual(_gif_frames(video)[0], shape[::-1])
      return
    frames = _mp4_frames(video)
    self.assertLen(frames, record["frames"])
    self.assertEqual(frames[0].shape, (*shape, 3))

  def test_missing_policy_is_one_readable_line(self):
    result = _run("--policy=/nonexistent/policy", "--env=CartPole-v1")
    self.assertEqual(result.returncode, 2)
    self.assertNotIn("Traceback", result.stderr)
    errors = [l for l in result.stderr.splitlines() if "tfrl.evaluate" in l]
    self.assertLen(errors, 1, result.stderr[-2000:])
    self.assertIn("not a SavedModel", errors[0])

  @parameterized.named_parameters(
      ("unknown_game", {"game": "NoSuchGameNoFrameskip-v4"}, "NoSuchGame"),
      ("unknown_env", {"env": "NoSuchEnv-v0"}, "NoSuchEnv"),
      ("both", {"env": "CartPole-v1", "game": "Pong"}, "exactly one"),
      ("shape", {"game": "PongNoFrameskip-v4"}, "shape"),
      ("record_extension", {"env": "CartPole-v1", "record": "episode.avi"},
       "--record=episode.avi: the file must end in .gif or .mp4"),
      ("record_no_extension", {"env": "CartPole-v1", "record": "episode"},
       "must end in .gif or .mp4"),
      ("record_fps", {"env": "CartPole-v1", "record": "e.gif", "record_fps": 0},
       "--record_fps must be >= 1"),
      ("num_envs", {"env": "CartPole-v1", "num_envs": -1}, "--num_envs must be >= 0"),
  )
  def test_bad_input_in_process(self, flag_values, message):
    policy = os.path.join(self.get_temp_dir(), "bad_input_policy")
    if not os.path.exists(policy):
      _export_discrete(policy, (4,), tf.float32, 2, networks.MLPTorso([4]))
    if not FLAGS.is_parsed():
      FLAGS.mark_as_parsed()
    values = {"policy": policy, "game": None, "env": None, **flag_values}
    stderr = io.StringIO()
    with flagsaver.flagsaver(**values), contextlib.redirect_stderr(stderr):
      with self.assertRaises(SystemExit) as cm:
        evaluate.main(["evaluate"])
    self.assertEqual(cm.exception.code, 2)
    lines = stderr.getvalue().strip().splitlines()
    self.assertLen(lines, 1)
    self.assertIn(message, lines[0])


  def _main_error(self, **flag_values):
    """The one stderr line and exit code of main() with these flags."""
    policy = os.path.join(self.get_temp_dir(), "bad_input_policy")
    if not os.path.exists(policy):
      _export_discrete(policy, (4,), tf.float32, 2, networks.MLPTorso([4]))
    if not FLAGS.is_parsed():
      FLAGS.mark_as_parsed()
    values = {"policy": policy, "game": None, "env": "CartPole-v1", **flag_values}
    stderr = io.StringIO()
    with flagsaver.flagsaver(**values), contextlib.redirect_stderr(stderr):
      with self.assertRaises(SystemExit) as cm:
        evaluate.main(["evaluate"])
    lines = stderr.getvalue().strip().splitlines()
    self.assertLen(lines, 1, stderr.getvalue())
    return cm.exception.code, lines[0]

  def test_mp4_without_an_encoder_says_what_to_install(self):
    # As if neither imageio-ffmpeg nor OpenCV were installed.
    with mock.patch.dict(sys.modules, {"imageio_ffmpeg": None, "cv2": None}):
      code, line = self._main_error(record=os.path.join(self.get_temp_dir(), "e.mp4"))
    self.assertEqual(code, 2)
    self.assertIn("writing .mp4 needs a video encoder: pip install 'tfrl[video]'", line)

  def test_record_folder_that_cannot_be_made(self):
    blocker = os.path.join(self.get_temp_dir(), "a_file")
    with open(blocker, "w") as f:
      f.write("x")
    code, line = self._main_error(record=os.path.join(blocker, "sub", "e.gif"))
    self.assertEqual(code, 2)
    self.assertIn("cannot create its folder", line)
    folder = os.path.join(self.get_temp_dir(), "a_folder.gif")
    os.makedirs(folder, exist_ok=True)
    code, line = self._main_error(record=folder)
    self.assertEqual(code, 2)
    self.assertIn("is a folder; give a file name", line)

  def test_bad_extension_exits_non_zero_in_a_process(self):
    result = _run("--policy=/nonexistent/policy", "--env=CartPole-v1",
                  "--record=episode.webm")
    self.assertEqual(result.returncode, 2)
    self.assertNotIn("Traceback", result.stderr)
    errors = [l for l in result.stderr.splitlines() if "tfrl.evaluate" in l]
    self.assertLen(errors, 1, result.stderr[-2000:])
    self.assertIn("must end in .gif or .mp4", errors[0])


class PolicyProtocolTest(tf.test.TestCase):
  """A policy exported with its env protocol is evaluated on it by default."""
  test_session = None

  def test_cartpole_policy_needs_no_env_flags(self):
    tmp = self.get_temp_dir()
    net = networks.ActorCritic(2, networks.MLPTorso([8]))
    policy = export.export_policy(
        export.DiscretePolicy(net), tf.TensorSpec([None, 4], tf.float32),
        os.path.join(tmp, "cartpole"),
        env_protocol=EnvProtocol(env="CartPole-v1", max_episode_frames=20))
    report_path = os.path.join(tmp, "cartpole.json")
    result = _run(f"--policy={policy}", "--episodes=4", f"--output={report_path}")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertNotIn("overrides", result.stdout)
    with open(report_path) as f:
      report = json.load(f)
    self.assertEqual((report["env"], report["protocol"]["max_episode_frames"]),
                     ("CartPole-v1", 20))
    self.assertTrue(all(l <= 20 for l in report["lengths"]), report["lengths"])
    self.assertEqual(report["command"][-2:], ["--episodes=4", f"--output={report_path}"])

  def test_atari_flags_override_the_policys_protocol_and_say_so(self):
    tmp = self.get_temp_dir()
    policy = export.export_policy(
        export.DiscretePolicy(networks.ActorCritic(6, networks.AtariTorso())),
        tf.TensorSpec([None, 84, 84, 4], tf.uint8), os.path.join(tmp, "pong"),
        env_protocol=EnvProtocol(game="pong", repeat_action_probability=0.0, noop_max=5,
                                 max_episode_frames=400, episodic_life=True))
    report_path = os.path.join(tmp, "pong.json")
    result = _run(f"--policy={policy}", "--episodes=2", "--repeat_action_probability=0.25",
                  "--max_episode_frames=200", f"--output={report_path}")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("--repeat_action_probability=0.25 overrides the policy's 0.0",
                  result.stdout)
    self.assertIn("--max_episode_frames=200 overrides the policy's 400", result.stdout)
    self.assertIn("evaluation plays whole games", result.stdout)
    with open(report_path) as f:
      report = json.load(f)
    protocol = report["protocol"]
    self.assertEqual((protocol["game"], protocol["repeat_action_probability"],
                      protocol["noop_max"], protocol["max_episode_frames"],
                      protocol["episodic_life"]), ("pong", 0.25, 5, 200, False))
    self.assertLen(report["protocol_notes"], 3)
    # 200 frames of play: 50 steps of 4 frames (a random policy loses no Pong
    # game so fast).
    self.assertEqual(report["lengths"], [50, 50])

  def test_resolve_protocol(self):
    saved = EnvProtocol(game="pong", repeat_action_probability=0.0)
    fv = flags.FlagValues()
    flagconfig.define(EnvProtocol, fv=fv)
    fv(["prog"])
    self.assertEqual(evaluate.resolve_protocol(saved, fv), (saved, []))
    fv(["prog", "--env=CartPole-v1"])  # another env: the game is dropped
    protocol, notes = evaluate.resolve_protocol(saved, fv)
    self.assertEqual(protocol, EnvProtocol(env="CartPole-v1"))
    self.assertEqual(notes, ["--env=CartPole-v1 overrides the policy's (its default)"])
    fv = flags.FlagValues()
    flagconfig.define(EnvProtocol, fv=fv)
    fv(["prog", "--noop_max=3"])
    with self.assertRaisesRegex(ValueError, "records no env protocol"):
      evaluate.resolve_protocol(None, fv)


class TruncatedPolicyTest(tf.test.TestCase, parameterized.TestCase):
  """A SavedModel cut short (a full disk, a half copy) is one line, exit 2."""
  test_session = None

  @parameterized.named_parameters(
      ("saved_model_pb", "saved_model.pb", 100),
      ("saved_model_pb_empty", "saved_model.pb", 0),
      ("variables_index", "variables/variables.index", 20),
      ("variables_data", "variables/variables.data-00000-of-00001", 10),
  )
  def test_truncated_file(self, name, size):
    policy = _export_discrete(os.path.join(self.get_temp_dir(), "policy"), (4,),
                              tf.float32, 2, networks.MLPTorso([4]))
    path = os.path.join(policy, name)
    with open(path, "rb") as f:
      data = f.read()
    with open(path, "wb") as f:
      f.write(data[:size])
    if not FLAGS.is_parsed():
      FLAGS.mark_as_parsed()
    stderr = io.StringIO()
    with flagsaver.flagsaver(policy=policy, env="CartPole-v1", game=None, episodes=1), \
        contextlib.redirect_stderr(stderr):
      with self.assertRaises(SystemExit) as cm:
        evaluate.main(["evaluate"])
    self.assertEqual(cm.exception.code, 2)
    lines = stderr.getvalue().strip().splitlines()
    self.assertLen(lines, 1, stderr.getvalue())
    self.assertStartsWith(lines[0], f"tfrl.evaluate: error: --policy={policy} cannot be "
                                    "loaded (")
    self.assertEndsWith(lines[0], "); is it complete?")


class EvaluateFunctionTest(tf.test.TestCase):
  test_session = None

  def test_episode_quota_per_slot(self):
    net = networks.ActorCritic(2, networks.MLPTorso([8]))
    policy = export.DiscretePolicy(net)
    serve = tf.function(policy, input_signature=[
        tf.TensorSpec([None, 4], tf.float32)])
    env = GymEnv("CartPole-v1", 3, seed=0)
    scores, lengths, _ = evaluate.evaluate(
        lambda obs: serve(obs), env, 7, greedy=True, step_cap=20)
    self.assertLen(scores, 7)
    self.assertTrue(all(0 < l <= 20 for l in lengths))
    self.assertAllEqual(scores, lengths)  # CartPole: reward 1 per step.

  def test_continuous_policy_on_pendulum(self):
    policy = _Continuous()
    env = GymEnv("Pendulum-v1", 2, seed=0)
    viewer = evaluate.make_viewer(evaluate.EvalConfig(
        policy="p", protocol=EnvProtocol(env="Pendulum-v1"), seed=0, record_view="agent"))
    scores, lengths, frames = evaluate.evaluate(
        lambda obs: policy(obs), env, 2, step_cap=30, viewer=viewer)
    self.assertEqual(lengths, [30, 30])
    self.assertTrue(all(s < 0 for s in scores))  # Pendulum costs are < 0.
    # The first observation and one per step: the viewer replayed all 30.
    self.assertLen(frames, 31)
    self.assertIsNone(viewer.diverged_at)
    self.assertEqual(frames[0].shape, (96, 3 * 24, 3))  # bars of the 3 numbers

  def test_gym_screen_view_renders_or_falls_back(self):
    viewer = evaluate.make_viewer(evaluate.EvalConfig(
        policy="p", protocol=EnvProtocol(env="CartPole-v1")))
    viewer.start()
    if viewer.view == "screen":  # pygame installed: gymnasium's own picture
      self.assertEqual(viewer.frames[0].shape, (400, 600, 3))
    else:  # no renderer: the observation, drawn
      self.assertEqual(viewer.frames[0].shape, (96, 4 * 24, 3))
    viewer.close()


class ViewerTest(tf.test.TestCase):
  """The one-slot viewer plays slot 0's game: the claim --record rests on."""
  test_session = None

  def _config(self, **kwargs):
    return evaluate.EvalConfig(
        policy="p", protocol=EnvProtocol(game="PongNoFrameskip-v4", noop_max=30,
                                         repeat_action_probability=0.25,
                                         max_episode_frames=1200), seed=5, **kwargs)

  def test_viewers_replay_slot_0_of_a_batch(self):
    config = self._config()
    # The evaluated env (84x84 grey, max-pooled, stacked) and, to compare the
    # screens with, the same slots shown as native RGB.
    env = make_env(config.protocol, 3, config.seed)
    rgb = make_env(config.protocol, 3, config.seed, max_pool=False, grayscale=False,
                   screen_size=None, stack=1)
    screen = evaluate.make_viewer(config)
    agent = evaluate.make_viewer(dataclasses.replace(config, record_view="agent"))
    other = evaluate.make_viewer(dataclasses.replace(config, seed=6))  # another game
    obs, rgb_obs = env.reset().numpy(), rgb.reset().numpy()
    for viewer in (screen, agent, other):
      viewer.start()
    self.assertEqual(screen.frames[0].shape, (210, 160, 3))
    self.assertAllEqual(screen.frames[0], rgb_obs[0])
    self.assertAllEqual(agent.frames[0], evaluate.observation_frame(obs[0]))
    rng = np.random.RandomState(0)
    rewards, other_matched = [], True
    import cv2  # pylint: disable=import-outside-toplevel
    for step in range(400):
      actions = rng.randint(env.num_actions, size=3).astype(np.int32)
      obs, reward, terminated, truncated = (t.numpy() for t in env.step(actions))
      rgb_obs, *outcome = (t.numpy() for t in rgb.step(actions))
      for a, b in zip((reward, terminated, truncated), outcome):
        self.assertAllEqual(a, b)  # the display settings change no game
      for viewer in (screen, agent):
        self.assertTrue(viewer.step(actions[0], reward[0], terminated[0], truncated[0]),
                        f"{viewer.view} viewer diverged at step {step}")
      if other_matched:
        other_matched = other.step(actions[0], reward[0], terminated[0], truncated[0])
      rewards.append(reward[0])
      # The agent's own observation, converted back from the screen: grey and
      # area-resized, it differs only where the agent's max over two frames
      # shows a moving sprite twice.
      grey = cv2.resize(cv2.cvtColor(screen.frames[-1], cv2.COLOR_RGB2GRAY), (84, 84),
                        interpolation=cv2.INTER_AREA)
      self.assertLess(np.abs(grey.astype(float) - agent.frames[-1][::2, ::2, 0]).mean(), 2.0)
      if terminated[0] or truncated[0]:
        break
      # Until the end, pixel for pixel: the batch's slot 0 (the end's are
      # the next game's, as the batch auto-resets; the viewers do not).
      self.assertAllEqual(screen.frames[-1], rgb_obs[0])
      self.assertAllEqual(agent.frames[-1], evaluate.observation_frame(obs[0]))
    self.assertTrue(truncated[0])  # the 1200-frame cap, ~300 steps
    self.assertLen(screen.frames, step + 2)
    self.assertLen(agent.frames, step + 2)
    self.assertLess(min(rewards), 0)  # points were scored: the check has teeth
    self.assertIsNotNone(other.diverged_at)  # and it notices another game
    for viewer in (screen, agent, other):
      viewer.close()


class SaveVideoTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None

  def _frames(self, n=7, shape=(21, 15)):
    """A colour gradient with a white square moving across it."""
    h, w = shape
    base = np.zeros((h, w, 3), np.uint8)
    base[..., 0] = np.linspace(0, 255, w)[None, :]
    base[..., 2] = np.linspace(255, 0, h)[:, None]
    frames = []
    for i in range(n):
      frame = base.copy()
      frame[4:10, i:i + 6] = 255
      frames.append(frame)
    return frames

  def test_gif(self):
    path = os.path.join(self.get_temp_dir(), "v.gif")
    evaluate.save_video(self._frames(), path, fps=25)
    self.assertEqual(_gif_frames(path), ((15, 21), 7 * 40))

  @parameterized.named_parameters(("imageio_ffmpeg", "imageio_ffmpeg"), ("cv2", "cv2"))
  def test_mp4(self, backend):
    hidden = {"imageio_ffmpeg": None} if backend == "cv2" else {}
    with mock.patch.dict(sys.modules, hidden):
      self.assertEqual(evaluate.mp4_backend(), backend,
                       f"{backend} is not installed (the test extra has both encoders)")
      path = os.path.join(self.get_temp_dir(), f"{backend}.mp4")
      frames = self._frames(shape=(21, 15))  # odd sizes: padded to even
      evaluate.save_video(frames, path, fps=25)
    decoded = _mp4_frames(path)
    self.assertLen(decoded, 7)
    self.assertEqual(decoded[0].shape, (22, 16, 3))
    # Lossy, but the picture is there.
    self.assertLess(np.abs(decoded[3][:21, :15].astype(float) - frames[3]).mean(), 25)


if __name__ == "__main__":
  tf.test.main()
