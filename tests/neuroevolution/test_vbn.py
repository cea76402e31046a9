"""Virtual batch norm: forward against a plain reference, per-network statistics,
the exported elite, checkpoint/resume of the reference batch, the ES flag."""

import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import es
from tfrl.envs import AtariEnv
from tfrl.envs import GymEnv
from tfrl.es import virtual_batch_norm as vbn
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import single_network
from tfrl.ops import population as pop_ops

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EPS = vbn.VBNConfig().epsilon


def _reference_logits(layout, flat, reference, obs):
  """Plain TF/numpy VBN forward of one network, statistics computed explicitly."""
  expanded = layout.expand(flat[None])

  def layer_out(layer, kernel, h):
    if layer.conv is not None:
      ks, stride = layer.conv
      w = kernel.reshape(ks, ks, layer.k // (ks * ks), layer.n)
      return tf.nn.conv2d(h, w, stride, "VALID").numpy().astype(np.float64)
    return h.reshape(h.shape[0], -1).astype(np.float64) @ kernel.astype(np.float64)

  def to_float(x):
    return x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)

  ref, x = to_float(reference), to_float(obs)
  for layer, (kernel, bias) in zip(layout.layers, expanded):
    y_ref, y = layer_out(layer, kernel[0], ref), layer_out(layer, kernel[0], x)
    if layer.relu:
      axes = tuple(range(y_ref.ndim - 1))   # rows (and positions for convs)
      mean, var = y_ref.mean(axis=axes), y_ref.var(axis=axes)
      ref = np.maximum((y_ref - mean) / np.sqrt(var + _EPS) + bias[0], 0).astype(np.float32)
      x = np.maximum((y - mean) / np.sqrt(var + _EPS) + bias[0], 0).astype(np.float32)
    else:
      x = y + bias[0]
  return x


def _random_flat(layout, count, seed):
  rng = np.random.default_rng(seed)
  flat = rng.standard_normal((count, layout.dim)).astype(np.float32) * layout.init_scale
  # Non-zero biases so that the bias-as-shift path is exercised.
  return flat + 0.1 * rng.standard_normal(flat.shape).astype(np.float32) * (
      layout.init_scale == 0)


_ARCHS = {
    "mlp": (pn.NetworkConfig(arch="mlp", hidden=(6, 5)), (4,), np.float32),
    "conv": (pn.NetworkConfig(arch="small"), (36, 36, 2), np.uint8),
}


def _observations(shape, dtype, count, seed):
  rng = np.random.default_rng(seed)
  if dtype == np.uint8:
    return rng.integers(0, 256, (count,) + shape).astype(np.uint8)
  return rng.standard_normal((count,) + shape).astype(np.float32)


class VBNForwardTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(
      ("mlp_op", "mlp", True), ("mlp_reference", "mlp", False),
      ("conv_op", "conv", True), ("conv_reference", "conv", False))
  def test_forward_matches_plain_reference(self, arch, use_op):
    if use_op:
      self.assertTrue(pop_ops.have_op(), "the population op library is not built: pip install -e .")
    config, shape, dtype = _ARCHS[arch]
    layout = pn.ParamLayout(pn.NetworkConfig(arch=config.arch, hidden=config.hidden,
                                             use_op=use_op), shape, 3)
    net = pn.PopulationNetwork(layout, capacity=4)
    flat = _random_flat(layout, 3, seed=1)
    reference = _observations(shape, dtype, 12, seed=2)
    obs = _observations(shape, dtype, 9, seed=3)
    net.load(flat)
    # max_rows 24: two networks per statistics call, so the chunking is used.
    norm = vbn.VirtualBatchNorm(net, reference, vbn.VBNConfig(reference_size=12, max_rows=24))
    stats = norm.apply(3)
    self.assertEqual(stats.shape, (3, vbn.stats_dim(layout)))
    index = np.array([0, 1, 2, 2, 1, 0, 1, 2, 0], np.int32)
    got = net(obs, index, np.ones(9, bool)).numpy()
    for p in range(3):
      rows = index == p
      want = _reference_logits(layout, flat[p], reference, obs[rows])
      self.assertAllClose(got[rows], want, rtol=2e-4, atol=2e-4)
    # The normalization changes the outputs (the test above can fail).
    net.load(flat)
    plain = net(obs, index, np.ones(9, bool)).numpy()
    self.assertGreater(np.abs(plain - got).max(), 1e-2)

  def test_first_layer_statistics_are_the_reference_moments(self):
    config, shape, dtype = _ARCHS["mlp"]
    layout = pn.ParamLayout(config, shape, 2)
    net = pn.PopulationNetwork(layout, capacity=2)
    flat = _random_flat(layout, 2, seed=4)
    reference = _observations(shape, dtype, 16, seed=5)
    net.load(flat)
    (mean, scale), _ = vbn.VirtualBatchNorm(net, reference).statistics(2)
    kernel = layout.expand(flat)[0][0]
    for p in range(2):
      y = reference.astype(np.float64) @ kernel[p]
      self.assertAllClose(mean[p], y.mean(0), atol=1e-5)
      self.assertAllClose(scale[p], 1.0 / np.sqrt(y.var(0) + _EPS), rtol=1e-4)

  @parameterized.named_parameters(("op", True), ("reference", False))
  def test_bfloat16_conv_inputs(self, use_op):
    # With conv_input_dtype=bfloat16 the statistics are those of the network
    # as it plays (conv inputs rounded), and the exported form (genome +
    # statistics through NormalizedLayout) computes the live network.
    config = pn.NetworkConfig(arch="small", use_op=use_op, weight_dtype="bfloat16",
                              conv_input_dtype="bfloat16")
    shape = (36, 36, 2)
    layout = pn.ParamLayout(config, shape, 3)
    net = pn.PopulationNetwork(layout, capacity=3)
    flat = _random_flat(layout, 3, seed=6)
    reference = _observations(shape, np.uint8, 12, seed=7)
    net.load(flat)
    norm = vbn.VirtualBatchNorm(net, reference, vbn.VBNConfig(reference_size=12))
    mean, _ = norm.statistics(3)[0]
    # First layer: the moments of the convolution of the rounded reference.
    kernel = tf.cast(tf.cast(layout.expand(flat)[0][0], tf.bfloat16), tf.float32)
    x = pop_ops.round_to_bfloat16(reference.astype(np.float32) / 255.0)
    for p in range(3):
      y = tf.nn.conv2d(x, tf.reshape(kernel[p], [8, 8, 2, 16]), 4, "VALID").numpy()
      self.assertAllClose(mean[p], y.reshape(-1, 16).mean(0), rtol=1e-5, atol=1e-6)
    stats = norm.apply(3)
    obs = _observations(shape, np.uint8, 6, seed=8)
    index = np.array([0, 1, 2, 2, 1, 0], np.int32)
    got = net(obs, index, np.ones(6, bool)).numpy()
    normalized = vbn.NormalizedLayout(layout)
    for p in range(3):
      plain = single_network.SingleNetwork(normalized, np.concatenate([flat[p], stats[p]]))
      # Summation order only, plus a possible one-ulp bfloat16 flip of a
      # hidden value before the second convolution (see test_population_net).
      self.assertAllClose(got[index == p], plain.logits(obs[index == p]).numpy(),
                          rtol=1e-4, atol=1e-4)

  def test_each_member_gets_its_own_statistics(self):
    config, shape, dtype = _ARCHS["mlp"]
    layout = pn.ParamLayout(config, shape, 2)
    net = pn.PopulationNetwork(layout, capacity=4)
    a, b = _random_flat(layout, 2, seed=6)
    net.load(np.stack([a, b, a, a + 0.05 * layout.init_scale]))
    stats = vbn.VirtualBatchNorm(net, _observations(shape, dtype, 16, seed=7),
                                 vbn.VBNConfig(reference_size=16, max_rows=16)).apply(4)
    self.assertAllClose(stats[0], stats[2])              # same weights, same stats
    self.assertGreater(np.abs(stats[0] - stats[1]).max(), 1e-2)
    self.assertGreater(np.abs(stats[0] - stats[3]).max(), 1e-4)   # a small perturbation

  def test_variables_are_read_and_assigned_whole(self):
    # A sliced assign or a gather on a variable would switch it to copy-on-read
    # mode for good (every later forward copying all P kernels).
    config, shape, dtype = _ARCHS["conv"]
    layout = pn.ParamLayout(config, shape, 3)
    net = pn.PopulationNetwork(layout, capacity=4)
    net.load(_random_flat(layout, 2, seed=9))
    norm = vbn.VirtualBatchNorm(net, _observations(shape, dtype, 4, seed=10))
    norm.apply(2)
    for fn in (norm._stats, norm._fold):  # pylint: disable=protected-access
      graph = fn.get_concrete_function().graph
      sparse = [op.type for op in graph.get_operations()
                if op.type.startswith("Resource") and op.type not in (
                    "ReadVariableOp", "AssignVariableOp")]
      self.assertEqual(sparse, [])
    # The networks that were not loaded stay zero.
    for v in net.kernels + net.biases:
      self.assertAllEqual(v.numpy()[2:], np.zeros_like(v.numpy()[2:]))

  def test_bad_reference_rejected(self):
    config, shape, _ = _ARCHS["mlp"]
    net = pn.PopulationNetwork(pn.ParamLayout(config, shape, 2), capacity=2)
    with self.assertRaisesRegex(ValueError, "reference batch must be"):
      vbn.VirtualBatchNorm(net, np.zeros((8, 5), np.float32))
    with self.assertRaisesRegex(ValueError, ">= 2"):
      vbn.VirtualBatchNorm(net, np.zeros((1, 4), np.float32))
    with self.assertRaisesRegex(ValueError, "reference_size"):
      vbn.VBNConfig(reference_size=1)
    net.load(np.zeros((1, net.layout.dim), np.float32))
    with self.assertRaisesRegex(ValueError, "loaded"):
      vbn.VirtualBatchNorm(net, np.zeros((4, 4), np.float32)).apply(2)


def _es(logdir_seed=0, vbn_config=vbn.VBNConfig(reference_size=16, keep_probability=0.2),
        weight_dtype="float32"):
  # Without auto-reset, as the entry points' envs (worker.make_worker_env).
  env = GymEnv("CartPole-v1", 8, seed=logdir_seed, auto_reset=False)
  layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=(8,), weight_dtype=weight_dtype),
                          env.observation_shape, env.num_actions)
  net = pn.PopulationNetwork(layout, 8)
  table = noise_lib.NoiseTable(0, 100_000)
  evaluator = evaluators.LocalEvaluator(
      evaluation.PipelinedEvaluator(env, net, num_groups=2, episode_frame_cap=60),
      genome_lib.ParamBuilder(table, layout.init_scale))
  config = es.ESConfig(population=8, sigma=0.05, learning_rate=0.1, center_episodes=1,
                       vbn=vbn_config)
  return es.EvolutionStrategy(config, layout, table, evaluator)


class VBNEvolutionTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_reference_batch_from_random_play(self):
    env = GymEnv("CartPole-v1", 4, seed=0)
    ref = vbn.collect_reference_batch(env, 20, np.random.default_rng(0), 0.3)
    self.assertEqual(ref.shape, (20, 4))
    self.assertGreater(len(np.unique(ref[:, 0])), 10)   # not one repeated state
    again = vbn.collect_reference_batch(GymEnv("CartPole-v1", 4, seed=0), 20,
                                        np.random.default_rng(0), 0.3)
    self.assertAllEqual(ref, again)

  def test_reference_batch_without_auto_reset(self):
    # The evaluators' envs do not auto-reset: the collection resets finished
    # slots itself, so it keeps no observation from past an episode's end and
    # gets exactly the batch of an auto-resetting env.
    for name, make in (
        ("cartpole", lambda auto: GymEnv("CartPole-v1", 4, seed=0, auto_reset=auto)),
        ("pong", lambda auto: AtariEnv("pong", 2, seed=0, max_episode_frames=200,
                                       auto_reset=auto))):
      want = vbn.collect_reference_batch(make(True), 40, np.random.default_rng(0), 0.1)
      got = vbn.collect_reference_batch(make(False), 40, np.random.default_rng(0), 0.1)
      self.assertAllEqual(got, want, msg=name)
      if name == "cartpole":  # the pole never past its 12-degree end
        self.assertLess(np.abs(got[:, 2]).max(), 0.21)

  @parameterized.parameters("float32", "bfloat16")
  def test_exported_elite_matches_live_network(self, weight_dtype):
    algo = _es(weight_dtype=weight_dtype)
    algo.step()
    self.assertIsInstance(algo.layout, vbn.NormalizedLayout)
    export_dir = os.path.join(self.get_temp_dir(), "elite")
    runner.export_elite(algo, export_dir, tf.TensorSpec([None, 4], tf.float32))
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    obs = np.concatenate([algo.vbn.reference,
                          np.random.default_rng(8).standard_normal((32, 4)).astype(np.float32)])
    # The network's slot 0 holds the normalized centre after the step.
    live = algo.evaluator.network(obs, np.zeros(len(obs), np.int32),
                                  np.ones(len(obs), bool)).numpy()
    out = serve(obs=tf.constant(obs))
    self.assertAllEqual(out["action"].numpy(), live.argmax(-1))
    self.assertAllClose(out["probs"].numpy(), tf.nn.softmax(live).numpy(), atol=1e-5)
    # Without its statistics the centre is a different policy.
    plain = single_network.SingleNetwork(algo.genome_layout, algo.theta).logits(obs).numpy()
    self.assertGreater(np.abs(plain - live).max(), 1e-2)

  def test_checkpoint_resume_keeps_reference_batch(self):
    logdir = self.get_temp_dir()
    first = _es()
    first.step()
    state, arrays = first.state()
    checkpoint.save(logdir, state, arrays)
    elite = first.elite_params()
    # A fresh run on a differently seeded env would collect another batch.
    resumed = _es(logdir_seed=3)
    resumed.restore(*checkpoint.load(logdir))
    self.assertAllEqual(resumed.vbn.reference, first.vbn.reference)
    self.assertAllClose(resumed.elite_params(), elite, atol=1e-6)
    resumed.step()
    self.assertEqual(resumed.generation, 2)
    self.assertAllEqual(resumed.vbn.reference, first.vbn.reference)
    other = _es(logdir_seed=3)
    other.step()
    self.assertNotAllClose(other.vbn.reference, first.vbn.reference)
    with self.assertRaisesRegex(ValueError, "with virtual batch norm"):
      _es(vbn_config=None).restore(*checkpoint.load(logdir))


class VBNFlagTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _run(self, *args):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "tfrl.es", "--env=CartPole-v1",
                           "--num_envs=8", "--hidden=8", "--noise_table_size=100000",
                           "--population=8", "--generations=1", "--center_episodes=1",
                           "--max_episode_frames=100", *args],
                          env=env, cwd=_ROOT, capture_output=True, text=True, timeout=180)

  def test_entry_point_with_virtual_batch_norm(self):
    logdir = os.path.join(self.get_temp_dir(), "es_vbn")
    out = self._run("--virtual_batch_norm", "--vbn_reference_size=16", f"--logdir={logdir}")
    self.assertEqual(out.returncode, 0, out.stderr)
    self.assertIn("[es] gen    1", out.stdout)
    with np.load(checkpoint.arrays_path(logdir)) as arrays:
      self.assertEqual(arrays["vbn_reference"].shape, (16, 4))
    self.assertTrue(os.path.exists(os.path.join(logdir, "elite", "saved_model.pb")))
    # The run identity records VBN: a resume without it is refused by the skeleton.
    mismatch = self._run("--resume", "--generations=2", f"--logdir={logdir}")
    self.assertEqual(mismatch.returncode, 2, mismatch.stderr)
    self.assertEqual(mismatch.stderr.strip().splitlines()[-1],
                     f"tfrl.es: error: cannot resume {logdir} (checkpoint != this run): "
                     "virtual batch norm on != off")
    bad = self._run("--virtual_batch_norm", "--vbn_reference_size=1",
                    f"--logdir={logdir}_bad")
    self.assertNotEqual(bad.returncode, 0)
    self.assertIn("--vbn_reference_size must be >= 2", bad.stderr + bad.stdout)


if __name__ == "__main__":
  tf.test.main()
