"""TD3: learns Pendulum; GST run with resume and compressed export."""

import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl.td3 import TD3Config
from tfrl.td3 import TD3Learner
from tfrl.td3 import train

# The return TD3 must reach on Pendulum-v1 in the CI test (random: ~ -1200).
PENDULUM_TARGET = -400.0

_SMALL = dict(env="Pendulum-v1", hidden_sizes=(64, 64), batch_size=128, actor_lr=1e-3,
              critic_lr=1e-3, eval_every=0, eval_episodes=3, log_every=1000)


def _load_serving(path):
  return tf.saved_model.load(path).signatures["serving_default"]


class TD3Test(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase helper, not a test.

  def test_learns_pendulum(self):
    logdir = self.get_temp_dir() + "/dense"
    config = TD3Config(total_steps=7000, start_steps=1000, checkpoint_every=7000, **_SMALL)
    summary = train(config, tl.LayerSpec(kind="dense"), logdir=logdir)
    self.assertGreater(summary["eval_return"], PENDULUM_TARGET)
    self.assertEqual(summary["env_steps"], 7000)
    self.assertEqual(summary["average_compression_ratio"], 0.0)
    with open(os.path.join(logdir, "summary.json")) as f:
      self.assertEqual(json.load(f)["env_steps"], 7000)
    serve = _load_serving(os.path.join(logdir, "policy"))
    action = serve(obs=tf.zeros([4, 3]))["action"]
    self.assertEqual(action.shape, (4, 1))
    self.assertTrue(np.all(np.abs(action.numpy()) <= 2.0))
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(logdir, "events.out.tfevents*")))

  def test_gst_resume_and_compressed_export(self):
    spec = tl.LayerSpec(kind="gst", block_size=8, gst_min_dim=32, target_sparsity=0.8,
                        frequency=100, begin_step=0, end_step=10_000)
    reward_config = tl.RewardAwareConfig(window=1, max_sparsity=0.8, step_up=0.2)
    common = dict(start_steps=200, update_every=50, checkpoint_every=200,
                  **dict(_SMALL, hidden_sizes=(32, 32), batch_size=32))
    logdir = self.get_temp_dir() + "/resumed"
    train(TD3Config(total_steps=400, **common), spec, reward_config, logdir=logdir,
          export=False)
    resumed = train(TD3Config(total_steps=600, **common), spec, reward_config, logdir=logdir,
                    resume=True)
    self.assertEqual(resumed["env_steps"], 600)
    # Phases of 50 updates at t = 200, 250, ..., 600 (5 before, 4 after resuming),
    # as in an uninterrupted 600-step run.
    self.assertEqual(resumed["training_iterations"], 450)
    # Hidden 32x32 layer is circulant (b=8) from step 0; the rest is
    # reward-aware pruned (window 1: sparsity rises by 0.2 per good update).
    self.assertIn("actor/dense_1", resumed["layers"])
    self.assertAllClose(resumed["layers"]["actor/dense_1"]["compression_ratio"], 0.875)
    self.assertGreater(resumed["layers"]["actor/dense_0"]["compression_ratio"], 0.0)
    self.assertGreater(resumed["average_compression_ratio"], 0.3)
    self.assertLess(resumed["policy_compressed_bytes"], resumed["policy_bytes"])
    obs = tf.random.normal([16, 3])
    live = _load_serving(os.path.join(logdir, "policy"))(obs=obs)["action"]
    packed = _load_serving(os.path.join(logdir, "policy_compressed"))(obs=obs)["action"]
    self.assertAllClose(live, packed, atol=1e-5)

  def test_target_networks_use_online_masks(self):
    config = TD3Config(hidden_sizes=(16, 16), batch_size=8, policy_delay=1)
    spec = tl.LayerSpec(kind="pruned", schedule="constant", target_sparsity=0.5)
    learner = TD3Learner(config, 3, [-1.0], [1.0], spec)
    batch = (np.random.randn(2, 8, 3).astype(np.float32),
             np.random.uniform(-1, 1, [2, 8, 1]).astype(np.float32),
             np.random.randn(2, 8).astype(np.float32), np.random.randn(2, 8, 3).astype(np.float32),
             np.ones([2, 8], np.float32))
    learner.update(*batch)
    self.assertAllEqual(learner.actor.hidden[0].mask, learner.target_actor.hidden[0].mask)
    kernel = learner.target_actor.hidden[0].kernel.numpy()
    self.assertTrue(np.all(kernel[learner.actor.hidden[0].mask.numpy() == 0] == 0))

  def test_config_validation(self):
    with self.assertRaisesRegex(ValueError, "batch_size"):
      TD3Config(batch_size=0)
    with self.assertRaisesRegex(ValueError, "tau"):
      TD3Config(tau=0.0)
    with self.assertRaisesRegex(ValueError, "Box"):
      train(TD3Config(env="CartPole-v1", total_steps=1), logdir=self.get_temp_dir() + "/cp")


if __name__ == "__main__":
  tf.test.main()
