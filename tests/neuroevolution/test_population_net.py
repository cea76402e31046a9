"""Population networks: layouts, op vs reference vs plain per-network forward."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import export
from tfrl.layers import circulant
from tfrl.layers import spec as spec_lib
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import single_network
from tfrl.ops import population as pop_ops


def _flat(layout, count, seed=0):
  rng = np.random.default_rng(seed)
  flat = rng.standard_normal((count, layout.dim)).astype(np.float32)
  noise = rng.standard_normal((count, layout.dim)).astype(np.float32)
  return flat * layout.init_scale + 0.01 * noise


class PopulationNetTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_op_is_built(self):
    pop_ops.load_library()  # fails loudly when the library is missing.

  def test_large_net_size(self):
    layout = pn.ParamLayout(pn.NetworkConfig(arch="large"), (84, 84, 4), 18)
    # Nature DQN: 8192+32 + 32768+64 + 36864+64 + 3136*512+512 + 512*18+18.
    self.assertEqual(layout.dim, 8224 + 32832 + 36928 + 1606144 + 9234)
    self.assertEqual([l.name for l in layout.layers],
                     ["torso/conv_0", "torso/conv_1", "torso/conv_2", "torso/dense_0",
                      "policy"])

  def test_circulant_and_pruned_shrink_the_genome(self):
    dense = pn.ParamLayout(pn.NetworkConfig(arch="large"), (84, 84, 4), 6)
    plan = spec_lib.LayerPlan.parse(
        "torso/dense_0=circulant:block_size=16;policy=pruned:target_sparsity=0.5")
    small = pn.ParamLayout(pn.NetworkConfig(arch="large", layer_plan=plan), (84, 84, 4), 6)
    kinds = {l.name: l.kind for l in small.layers}
    self.assertEqual(kinds["torso/dense_0"], "circulant")
    self.assertEqual(kinds["policy"], "pruned")
    self.assertEqual(kinds["torso/conv_0"], "dense")
    self.assertEqual(dense.dim - small.dim, 3136 * 512 * 15 // 16 + 512 * 6 // 2)
    expanded = small.expand(_flat(small, 2))
    self.assertEqual(expanded[3][0].shape, (2, 3136, 512))
    self.assertEqual(int(np.sum(expanded[4][0][0] != 0)), 512 * 6 // 2)

  def test_circulant_expansion_matches_layers_module(self):
    plan = spec_lib.LayerSpec(kind="circulant", block_size=4)
    layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=(10,), layer_plan=plan),
                            (7,), 3)
    flat = _flat(layout, 1, seed=3)
    kernel, _ = layout.layers[0].expand(flat)
    layer = circulant.BlockCirculantDense(10, 4, with_bias=False)
    x = tf.random.normal([5, 7], seed=1)
    layer(x)
    l0 = layout.layers[0]
    layer.vectors.assign(flat[0, l0.kernel_offset:l0.kernel_offset + l0.kernel_size]
                         .reshape(layer.vectors.shape))
    self.assertAllClose(layer(x), x @ kernel[0], atol=1e-5)
    self.assertAllClose(layer.to_dense(), kernel[0], atol=1e-6)

  @parameterized.named_parameters(
      ("mlp", "mlp", (8,), 4, None),
      ("small", "small", (84, 84, 4), 6, None),
      ("large", "large", (84, 84, 4), 5, None),
      ("small_gst", "small", (84, 84, 4), 6,
       spec_lib.LayerSpec(kind="gst", block_size=8, target_sparsity=0.8)),
      ("mlp_bf16", "mlp", (8,), 4, None, "bfloat16"),
      ("small_bf16", "small", (84, 84, 4), 6, None, "bfloat16"),
      ("small_bf16_conv_input", "small", (84, 84, 4), 6, None, "bfloat16", "bfloat16"),
      ("large_bf16_conv_input", "large", (84, 84, 4), 5, None, "bfloat16", "bfloat16"),
      ("mlp_bf16_conv_input", "mlp", (8,), 4, None, "bfloat16", "bfloat16"),
  )
  def test_forward_op_reference_and_plain_agree(self, arch, obs_shape, actions, plan,
                                                dtype="float32", conv_input="float32"):
    # Op, reference and plain network differ in the order of their float32
    # sums only. With bfloat16 conv inputs that can also move a hidden value
    # across a bfloat16 rounding boundary before the next convolution: one
    # bfloat16 ulp (2^-8 relative) in one of ~10^3 inputs, which moved these
    # logits (~0.1 at the policy's init scale) by 2e-6 in a measured run, while
    # rounding the conv inputs at all moves them by ~1e-4 (checked below).
    tol = 2e-5 if conv_input == "bfloat16" else 1e-4
    config = pn.NetworkConfig(arch=arch, layer_plan=plan, weight_dtype=dtype,
                              conv_input_dtype=conv_input)
    layout = pn.ParamLayout(config, obs_shape, actions)
    nets = 3
    flat = _flat(layout, nets, seed=1)
    op_net = pn.PopulationNetwork(layout, capacity=4)
    ref_layout = pn.ParamLayout(pn.NetworkConfig(arch=arch, layer_plan=plan, use_op=False,
                                                 weight_dtype=dtype,
                                                 conv_input_dtype=conv_input),
                                obs_shape, actions)
    ref_net = pn.PopulationNetwork(ref_layout, capacity=4)
    self.assertTrue(op_net.use_op)
    self.assertFalse(ref_net.use_op)
    op_net.load(flat)
    ref_net.load(flat)
    rng = np.random.default_rng(2)
    batch = 7
    if len(obs_shape) == 3:
      obs = rng.integers(0, 256, (batch,) + obs_shape).astype(np.uint8)
    else:
      obs = rng.standard_normal((batch,) + obs_shape).astype(np.float32)
    index = np.array([0, 2, 2, 1, 0, 0, 1], np.int32)
    active = np.array([1, 1, 0, 1, 1, 0, 1], bool)
    got = op_net(obs, index, active).numpy()
    ref = ref_net(obs, index, active).numpy()
    self.assertAllClose(got[active], ref[active], rtol=tol, atol=tol)
    for b in np.flatnonzero(active):
      plain = single_network.SingleNetwork(layout, flat[index[b]]).logits(obs[b:b + 1]).numpy()
      self.assertAllClose(got[b], plain[0], rtol=tol, atol=tol)
    acts = op_net.act(obs, index, active).numpy()
    self.assertAllEqual(acts[active], got[active].argmax(-1))
    if dtype != "float32":  # the rounded kernels really are what is computed
      self.assertEqual(op_net.kernels[0].dtype, tf.bfloat16)
      f32 = single_network.SingleNetwork(pn.ParamLayout(pn.NetworkConfig(arch=arch), obs_shape,
                                            actions), flat[index[0]])
      self.assertGreater(np.abs(f32.logits(obs[:1]).numpy()[0] - got[0]).max(), 1e-6)
    if conv_input != "float32" and arch != "mlp":  # the conv inputs really are rounded
      unrounded = single_network.SingleNetwork(
          pn.ParamLayout(pn.NetworkConfig(arch=arch, weight_dtype=dtype), obs_shape, actions),
          flat[index[0]])
      self.assertGreater(np.abs(unrounded.logits(obs[:1]).numpy()[0] - got[0]).max(), 2 * tol)

  def test_exported_network_rounds_conv_inputs(self):
    # The SavedModel of a SingleNetwork (as the GA exports its elite) computes
    # the population network's function, conv input rounding included.
    config = pn.NetworkConfig(arch="small", weight_dtype="bfloat16",
                              conv_input_dtype="bfloat16")
    layout = pn.ParamLayout(config, (36, 36, 2), 4)
    flat = _flat(layout, 2, seed=4)
    net = pn.PopulationNetwork(layout, capacity=2)
    net.load(flat)
    export_dir = os.path.join(self.get_temp_dir(), "elite")
    export.export_policy(single_network.SingleNetwork(layout, flat[1]),
                         tf.TensorSpec([None, 36, 36, 2], tf.uint8), export_dir)
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    obs = np.random.default_rng(5).integers(0, 256, (6, 36, 36, 2)).astype(np.uint8)
    live = net(obs, np.ones(6, np.int32), np.ones(6, bool)).numpy()
    out = serve(obs=tf.constant(obs))
    self.assertAllClose(out["probs"].numpy(), tf.nn.softmax(live).numpy(), atol=1e-4)
    self.assertAllEqual(out["action"].numpy(), live.argmax(-1))

  def test_partial_load_zeroes_the_rest_and_reads_weights_densely(self):
    # A sliced assign or a gather on a variable would put it in copy-on-read
    # mode (every forward copying all P kernels): load and forward avoid both.
    layout = pn.ParamLayout(pn.NetworkConfig(arch="small"), (36, 36, 2), 3)
    net = pn.PopulationNetwork(layout, capacity=4)
    rng = np.random.default_rng(0)
    net.load(rng.standard_normal((4, layout.dim)).astype(np.float32))
    net.load(rng.standard_normal((2, layout.dim)).astype(np.float32))
    self.assertEqual(net.loaded, 2)
    for v in net.kernels + net.biases:
      self.assertAllEqual(v.numpy()[2:], np.zeros_like(v.numpy()[2:]))
    fn = tf.function(net.__call__).get_concrete_function(
        tf.TensorSpec([None, 36, 36, 2], tf.uint8), tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None], tf.bool))
    sparse = [op.type for op in fn.graph.get_operations()
              if op.type.startswith("Resource") and op.type != "ReadVariableOp"]
    self.assertEqual(sparse, [])

  @parameterized.named_parameters(
      ("small_op", "small", True, "float32"),
      ("small_reference", "small", False, "float32"),
      ("large_bfloat16_kernels", "large", True, "bfloat16"),
  )
  def test_incremental_logits_follow_the_full_forward_on_pong(self, arch, use_op,
                                                              weight_dtype):
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    env = AtariEnv("pong", 4, seed=0)
    layout = pn.ParamLayout(pn.NetworkConfig(arch=arch, use_op=use_op,
                                             weight_dtype=weight_dtype),
                            env.observation_shape, env.num_actions)
    net = pn.PopulationNetwork(layout, capacity=3)
    net.load(_flat(layout, 3, seed=1))
    index = tf.constant([2, 0, 2, 1])
    state = net.incremental_initial_state(4)
    obs = env.reset()
    agree = 0
    for step in range(60):
      full = net(obs, index, tf.ones([4], tf.bool)).numpy()
      logits, state = net.incremental_logits(obs, index, tf.fill([4], step % 25 == 0), state)
      self.assertAllClose(logits, full, rtol=1e-4, atol=1e-4 * np.abs(full).max(),
                          msg=f"step {step}")
      agree += int(np.all(np.argmax(logits, -1) == np.argmax(full, -1)))
      obs = env.step(tf.argmax(full, -1, output_type=tf.int32))[0]
    self.assertGreaterEqual(agree, 59)  # greedy actions agree (float ties aside)
    env.close()

  def test_compact_circulant_kernels_play_bitwise_as_expanded_on_frostbite(self):
    # The Frostbite preset's network (circulant dense layer, block 16): stored
    # compact, the incremental steps and the full forward equal the expanded
    # network's bit for bit, and the compact layer is the only one stored so.
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    env = AtariEnv("frostbite", 4, seed=0)
    plan = spec_lib.LayerPlan.parse("torso/dense_0=circulant:block_size=16")
    layout = pn.ParamLayout(pn.NetworkConfig(arch="small", layer_plan=plan, use_op=True),
                            env.observation_shape, env.num_actions)
    flat = _flat(layout, 3, seed=2)
    nets = [pn.PopulationNetwork(layout, capacity=3, compact_circulant=c) for c in (True, False)]
    self.assertEqual(nets[0].compact, [False, False, True, False])
    self.assertEqual(nets[0].kernels[2].shape.as_list(), [3, 16 * 162, 32])
    self.assertEqual(nets[1].compact, [False] * 4)
    for net in nets:
      net.load(flat)
    index = tf.constant([2, 0, 2, 1])
    states = [net.incremental_initial_state(4) for net in nets]
    rng = np.random.default_rng(0)
    obs = env.reset()
    for step in range(40):
      fresh = tf.fill([4], step % 25 == 0)
      out = [net.incremental_logits(obs, index, fresh, state) for net, state in zip(nets, states)]
      self.assertAllEqual(out[0][0], out[1][0], msg=f"step {step}")
      states = [o[1] for o in out]
      obs = env.step(tf.constant(rng.integers(0, env.num_actions, 4), tf.int32))[0]
    full = [net(obs, index, tf.ones([4], tf.bool)) for net in nets]
    self.assertAllEqual(full[0], full[1])
    env.close()

  def test_incremental_state_is_refused_with_bfloat16_conv_inputs(self):
    layout = pn.ParamLayout(pn.NetworkConfig(arch="small", weight_dtype="bfloat16",
                                             conv_input_dtype="bfloat16"), (84, 84, 4), 6)
    with self.assertRaisesRegex(ValueError, "float32 convolution inputs"):
      pn.PopulationNetwork(layout, 2).incremental_state_specs()

  def test_staged_rows_load_as_tf_casts_them(self):
    # Staging casts in numpy; the variables must hold what tf.cast gives,
    # with rows staged in two pieces (as the GA stages its elite last).
    layout = pn.ParamLayout(pn.NetworkConfig(arch="small", weight_dtype="bfloat16"),
                            (36, 36, 2), 3)
    net = pn.PopulationNetwork(layout, capacity=4)
    flat = _flat(layout, 3, seed=4)
    flat[0, :5] = [np.nan, np.inf, -np.inf, 1e-40, 3.4e38]
    staged = net.stage(flat[1:], first_row=1)
    self.assertEqual(staged.loaded, 3)
    net.load(net.stage(flat[:1], staged, first_row=0))
    self.assertEqual(net.loaded, 3)
    for v, (kernel, _) in zip(net.kernels, layout.expand(flat)):
      want = tf.cast(kernel, tf.bfloat16).numpy().view(np.uint16)
      self.assertAllEqual(v.numpy()[:3].view(np.uint16), want)
      self.assertAllEqual(v.numpy()[3].view(np.uint16), np.zeros_like(want[0]))
    for v, (_, bias) in zip(net.biases, layout.expand(flat)):
      self.assertAllEqual(v.numpy()[:3], bias)

  def test_load_beyond_capacity_rejected(self):
    layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp"), (4,), 2)
    net = pn.PopulationNetwork(layout, capacity=2)
    with self.assertRaises(ValueError):
      net.load(np.zeros((3, layout.dim), np.float32))
    with self.assertRaisesRegex(ValueError, "exceed the capacity"):
      net.stage(np.zeros((1, layout.dim), np.float32), first_row=2)
    with self.assertRaises(ValueError):
      net.load(np.zeros((2, layout.dim + 1), np.float32))

  def test_bad_configs_rejected(self):
    with self.assertRaises(ValueError):
      pn.NetworkConfig(arch="huge")
    with self.assertRaises(ValueError):
      pn.NetworkConfig(weight_dtype="float16")
    with self.assertRaisesRegex(ValueError, "requires weight_dtype='bfloat16'"):
      pn.NetworkConfig(conv_input_dtype="bfloat16")
    with self.assertRaisesRegex(ValueError, "conv_input_dtype"):
      pn.NetworkConfig(weight_dtype="bfloat16", conv_input_dtype="float16")
    with self.assertRaises(ValueError):
      pn.ParamLayout(pn.NetworkConfig(arch="large"), (4,), 2)
    with self.assertRaises(ValueError):
      pn.ParamLayout(pn.NetworkConfig(arch="mlp"), (84, 84, 4), 2)


if __name__ == "__main__":
  tf.test.main()
