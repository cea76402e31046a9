"""benchmarks/td3_input_masks.py on a short Pendulum run whose input layers are
99% pruned: an input it reports cut off is one the exported actor ignores; the
kept weights add up to the target sparsity; the spreads are the replay
buffer's; a run without checkpoints is refused in one line."""

import json
import os
import subprocess
import sys

from absl.testing import absltest
import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _ROOT)

from tests.td3 import short_runs  # pylint: disable=g-import-not-at-top

_SPARSITY = 0.99  # 2 of the actor's 3 x 64 input weights kept: an input loses all of its
_INPUTS = f"pruned:schedule=polynomial:target_sparsity={_SPARSITY}"  # only the input layers


def _masks(*args):
  return subprocess.run([sys.executable, "benchmarks/td3_input_masks.py", *args], cwd=_ROOT,
                        capture_output=True, text=True, timeout=600)


class TD3InputMasksTest(short_runs.PrunedPendulumRunTest):

  LAYER_FLAGS = ("--dense_layer=dense",
                 f"--layer_plan=actor/dense_0={_INPUTS};critic*/dense_0={_INPUTS}")

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.output = os.path.join(cls._tmp.name, "masks.json")
    done = _masks(f"--logdirs={cls.run_dir}", f"--output={cls.output}")
    assert done.returncode == 0, done.stderr[-3000:]
    with open(cls.output) as f:
      cls.row = json.load(f)["rows"][0]

  def test_cut_off_inputs_are_the_ones_the_exported_actor_ignores(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    actor = self.row["networks"]["actor"]
    self.assertEqual(actor["shape"], [3, 64])  # Pendulum's 3 features, the preset's 64 units
    self.assertEqual(sum(actor["kept_per_input"]), round(3 * 64 * (1 - _SPARSITY)))
    self.assertNotEmpty(actor["inputs_cut_off"])  # 2 weights over 3 inputs
    policy = tf.saved_model.load(os.path.join(self.run_dir, "policy"))
    obs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    base = policy(obs)["action"].numpy()
    moves = []
    for i, kept in enumerate(actor["kept_per_input"]):
      moved = obs.copy()
      moved[:, i] += 3.0
      changed = bool(np.any(np.abs(policy(moved)["action"].numpy() - base) > 1e-6))
      # A kept weight may still feed a unit with no path left to the output.
      if kept == 0:
        self.assertFalse(changed, f"input {i} is reported cut off but moves the action")
      moves.append(changed)
      self.assertEqual(i in actor["inputs_cut_off"], kept == 0)
    self.assertTrue(any(moves), "no input moves the action: the check above proves nothing")
    for critic in ("critic_1", "critic_2"):  # obs then action
      self.assertEqual(self.row["networks"][critic]["shape"], [4, 64])

  def test_spreads_are_the_replay_buffers(self):
    [replay] = [f for f in os.listdir(os.path.join(self.run_dir, "checkpoints"))
                if f.startswith("replay-")]
    with np.load(os.path.join(self.run_dir, "checkpoints", replay)) as buffer:
      size = int(buffer["size"])
      np.testing.assert_allclose(self.row["obs_std"], buffer["obs"][:size].std(0), rtol=1e-5)
      np.testing.assert_allclose(self.row["action_std"], buffer["action"][:size].std(0),
                                 rtol=1e-5)
    self.assertEqual(self.row["checkpoint_step"], 400)
    self.assertEqual(size, 400)

  def test_refuses_a_run_without_checkpoints(self):
    done = _masks(f"--logdirs={self._tmp.name}",
                  f"--output={os.path.join(self._tmp.name, 'none.json')}")
    self.assertNotEqual(done.returncode, 0)
    self.assertIn("has no checkpoint in checkpoints/", done.stderr)
    self.assertFalse(os.path.exists(os.path.join(self._tmp.name, "none.json")))


if __name__ == "__main__":
  absltest.main()
