"""Tests for tfrl.export: one SavedModel policy format, loadable without tfrl."""

import json
import os
import subprocess
import sys
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import export
from tfrl.envs import EnvProtocol


class _TinyActorCritic(tf.Module):
  """Stand-in network: uint8 obs -> (logits, value)."""

  def __init__(self, obs_size, num_actions):
    super().__init__()
    init = tf.random.stateless_normal([obs_size, num_actions + 1], seed=[1, 2])
    self.w = tf.Variable(init * 0.1)

  def __call__(self, obs):
    x = tf.reshape(tf.cast(obs, tf.float32) / 255.0, [tf.shape(obs)[0], -1])
    out = tf.matmul(x, self.w)
    return out[:, :-1], out[:, -1]


class _Continuous(tf.Module):

  def __init__(self):
    super().__init__()
    self.w = tf.Variable([[0.5, -0.25], [1.0, 2.0], [0.0, 1.0]])

  def __call__(self, obs):
    return {"action": tf.tanh(tf.matmul(obs, self.w))}


_LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
export_dir, obs_path = sys.argv[1], sys.argv[2]
policy = tf.saved_model.load(export_dir)
obs = np.load(obs_path)
out = policy.signatures["serving_default"](obs=tf.constant(obs))
called = policy(tf.constant(obs))
assert sorted(out) == sorted(called), (sorted(out), sorted(called))
assert "tfrl" not in sys.modules, "tfrl was imported"
print(json.dumps({k: np.asarray(v).tolist() for k, v in out.items()}))
"""


def _load_in_subprocess(export_dir, obs, tmp):
  obs_path = os.path.join(tmp, "obs.npy")
  np.save(obs_path, obs)
  env = dict(os.environ)
  env.pop("PYTHONPATH", None)  # tfrl must not even be importable.
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  result = subprocess.run(
      [sys.executable, "-c", _LOADER, export_dir, obs_path],
      capture_output=True, text=True, env=env, cwd=tmp, timeout=120,
      check=False)
  if result.returncode != 0:
    raise AssertionError(result.stderr[-3000:])
  return json.loads(result.stdout.strip().splitlines()[-1])


class ExportTest(tf.test.TestCase, parameterized.TestCase):
  test_session = None  # tf.test's deprecated helper; pytest would skip it.

  def test_discrete_policy_loads_without_tfrl_and_matches(self):
    net = _TinyActorCritic(obs_size=6 * 6 * 4, num_actions=3)
    policy = export.DiscretePolicy(net)
    spec = tf.TensorSpec([None, 6, 6, 4], tf.uint8)
    tmp = self.get_temp_dir()
    export_dir = export.export_policy(policy, spec, os.path.join(tmp, "sm"))
    obs = np.random.RandomState(0).randint(0, 256, [5, 6, 6, 4]).astype(
        np.uint8)
    live = policy(tf.constant(obs))
    loaded = _load_in_subprocess(export_dir, obs, tmp)
    self.assertEqual(sorted(loaded), ["action", "probs", "value"])
    self.assertAllClose(loaded["probs"], live["probs"], atol=1e-6)
    self.assertAllClose(loaded["value"], live["value"], atol=1e-6)
    self.assertAllEqual(loaded["action"], live["action"])

  def test_continuous_policy_returns_only_action(self):
    policy = _Continuous()
    spec = tf.TensorSpec([None, 3], tf.float32)
    export_dir = export.export_policy(
        policy, spec, os.path.join(self.get_temp_dir(), "cont"))
    loaded = tf.saved_model.load(export_dir)
    obs = np.array([[0.1, 0.2, 0.3]], np.float32)
    out = loaded.signatures["serving_default"](obs=tf.constant(obs))
    self.assertEqual(sorted(out), ["action"])
    self.assertAllClose(out["action"], policy(obs)["action"])

  def test_env_protocol_travels_with_the_policy(self):
    protocol = EnvProtocol(game="ALE/Pong-v5", max_episode_frames=20000)
    export_dir = export.export_policy(
        _Continuous(), tf.TensorSpec([None, 3], tf.float32),
        os.path.join(self.get_temp_dir(), "with_protocol"), env_protocol=protocol)
    # A JSON file any program reads, without TensorFlow; the game id's sticky
    # actions written out.
    with open(os.path.join(export_dir, "assets.extra", "tfrl_policy.json")) as f:
      metadata = json.load(f)
    self.assertEqual(metadata["format"], "tfrl_policy")
    self.assertEqual(metadata["env_protocol"]["repeat_action_probability"], 0.25)
    self.assertEqual(metadata["env_protocol"]["max_episode_frames"], 20000)
    self.assertEqual(export.read_env_protocol(export_dir), protocol.resolved())
    # The SavedModel still loads and serves as before.
    loaded = tf.saved_model.load(export_dir)
    self.assertEqual(sorted(loaded.signatures), ["serving_default"])
    older = export.export_policy(_Continuous(), tf.TensorSpec([None, 3], tf.float32),
                                 os.path.join(self.get_temp_dir(), "without"))
    self.assertIsNone(export.read_env_protocol(older))
    with open(os.path.join(export_dir, "assets.extra", "tfrl_policy.json"), "w") as f:
      f.write('{"format": "tfrl_policy", "env_protocol": {"game": "pong", "sticky": 1}}')
    with self.assertRaisesRegex(ValueError, "env protocol in .* is not valid: unknown"):
      export.read_env_protocol(export_dir)

  def test_reexport_replaces_and_tracks_new_weights(self):
    net = _TinyActorCritic(obs_size=4, num_actions=2)
    policy = export.DiscretePolicy(net)
    spec = tf.TensorSpec([None, 4], tf.uint8)
    export_dir = os.path.join(self.get_temp_dir(), "re")
    export.export_policy(policy, spec, export_dir)
    net.w.assign(net.w * 3.0)
    export.export_policy(policy, spec, export_dir)
    obs = tf.constant([[1, 2, 3, 4]], tf.uint8)
    loaded = tf.saved_model.load(export_dir)
    self.assertAllClose(loaded(obs)["value"], policy(obs)["value"])
    self.assertFalse(os.path.exists(export_dir + ".tmp"))
    self.assertFalse(os.path.exists(export_dir + ".old"))

  def test_failed_export_keeps_the_previous_policy(self):
    net = _TinyActorCritic(obs_size=4, num_actions=2)
    policy = export.DiscretePolicy(net)
    spec = tf.TensorSpec([None, 4], tf.uint8)
    export_dir = os.path.join(self.get_temp_dir(), "kept")
    export.export_policy(policy, spec, export_dir)
    obs = tf.constant([[1, 2, 3, 4]], tf.uint8)
    before = policy(obs)["value"].numpy()
    net.w.assign(net.w * 3.0)
    save = tf.saved_model.save

    def full_disk(obj, directory, signatures=None):
      save(obj, directory, signatures=signatures)  # half a policy is on disk,
      raise OSError(28, "No space left on device")  # then the disk fills.

    with mock.patch.object(tf.saved_model, "save", full_disk):
      with self.assertRaisesRegex(OSError, "No space left"):
        export.export_policy(policy, spec, export_dir)
    self.assertAllClose(tf.saved_model.load(export_dir)(obs)["value"], before)
    self.assertEqual(sorted(os.listdir(self.get_temp_dir())), ["kept"])

  def test_export_killed_between_its_renames_is_recovered(self):
    net = _TinyActorCritic(obs_size=4, num_actions=2)
    policy = export.DiscretePolicy(net)
    spec = tf.TensorSpec([None, 4], tf.uint8)
    export_dir = os.path.join(self.get_temp_dir(), "policy")
    export.export_policy(policy, spec, export_dir)
    os.rename(export_dir, export_dir + ".old")  # the kill: only the old copy remains
    obs = tf.constant([[1, 2, 3, 4]], tf.uint8)
    before = policy(obs)["value"].numpy()
    net.w.assign(net.w * 3.0)
    with mock.patch.object(tf.saved_model, "save", side_effect=OSError(28, "full")):
      with self.assertRaises(OSError):
        export.export_policy(policy, spec, export_dir)
    # The complete old policy is back under its name, not deleted as a leftover.
    self.assertAllClose(tf.saved_model.load(export_dir)(obs)["value"], before)
    self.assertFalse(os.path.exists(export_dir + ".old"))

  @parameterized.parameters(
      ({"logits": 1.0},),
      ({"probs": 1.0},),
  )
  def test_rejects_bad_outputs(self, outputs):

    class Bad(tf.Module):

      def __call__(self, obs):
        return {k: tf.fill([tf.shape(obs)[0]], v) for k, v in outputs.items()}

    with self.assertRaisesRegex(ValueError, "action"):
      export.export_policy(Bad(), tf.TensorSpec([None, 2], tf.float32),
                           os.path.join(self.get_temp_dir(), "bad"))

  def test_rejects_non_spec(self):
    with self.assertRaisesRegex(TypeError, "TensorSpec"):
      export.export_policy(_Continuous(), [None, 3], self.get_temp_dir())


if __name__ == "__main__":
  tf.test.main()
