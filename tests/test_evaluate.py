"""Tests for `python -m tfrl.evaluate` on saved policies."""

import contextlib
import io
import json
import os
import subprocess
import sys

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import evaluate
from tfrl import export
from tfrl import networks
from tfrl.envs import GymEnv

FLAGS = flags.FLAGS
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
  env = dict(os.environ, PYTHONPATH=_REPO, TF_CPP_MIN_LOG_LEVEL="3")
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
    gif = os.path.join(tmp, "pong.gif")
    result = _run(f"--policy={policy}", "--game=PongNoFrameskip-v4",
                  "--episodes=2", "--max_episode_frames=400", "--noop_max=5",
                  "--repeat_action_probability=0.25",
                  f"--output={report_path}", f"--record={gif}")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with open(report_path) as f:
      report = json.load(f)
    self.assertEqual(report["episodes"], 2)
    self.assertEqual(report["protocol"]["repeat_action_probability"], 0.25)
    # The frame cap truncates: 400 frames (no-op start frames included) is at
    # most 100 steps of 4 frames; a random policy loses no Pong game so fast.
    self.assertTrue(all(90 <= l <= 100 for l in report["lengths"]), str(report))
    self.assertTrue(os.path.isfile(gif))

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
    scores, lengths, frames = evaluate.evaluate(
        lambda obs: policy(obs), env, 2, step_cap=30, record=True)
    self.assertEqual(lengths, [30, 30])
    self.assertTrue(all(s < 0 for s in scores))  # Pendulum costs are < 0.
    self.assertLen(frames, 30)


if __name__ == "__main__":
  tf.test.main()
