"""bfloat16 mixed precision and XLA in GA3C.

Tolerances of the bfloat16 path against float32 (same weights, same batch).
bfloat16 keeps 8 significant bits (7 stored), so each rounding has a relative
error of at most 2^-9 ~ 0.2%; between the uint8 frames and the float32
logits the network rounds the scaled input, every kernel and every layer's
output (oneDNN sums the products in float32). Measured on random frames over
3 seeds: the loss terms differ by at most 0.26%, the gradients' cosine per
variable is at least 0.997. The asserts allow about 4x that: each loss term
within 1% (relative), the total within 1% of the sum of its terms' sizes (the
total is a difference and can be near 0), gradient cosine >= 0.99 per
variable, and one RMSProp step moving every weight whose float32 step is at
least half its variable's largest step in the same direction.
"""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests.cpu_features import cpu_flags
from tests.ga3c import runs
from tfrl import export
from tfrl import layers as tl
from tfrl import networks
from tfrl import optimizers
from tfrl import precision
from tfrl.envs.protocol import EnvProtocol
from tfrl.ga3c import GA3CConfig
from tfrl.ga3c.learner import Learner, LearnerConfig
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import Queues
from tfrl.ga3c.trainer import Trainer
from tfrl.layers import spec as spec_lib

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OBS = (84, 84, 4)
_ACTIONS, _T, _SEGMENTS = 6, 5, 4
# Computing in bfloat16 or float32 under --precision=bfloat16, per layer kind:
# circulant layers run their FFTs in float32 (complex64); GST's dual-mode torso
# layer multiplies its circulant kernel, expanded, in bfloat16, as dense and
# pruned layers do.
# circulant: its float32 FFT products; gst: dual mode's circulant expansion of
# the weights (a float32 one-hot matmul, tfrl.layers.circulant.expand).
_RAN_BY_KIND = {"dense": "bfloat16", "pruned": "bfloat16", "circulant": "mixed",
                "gst": "mixed"}
_COMPUTE_OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MatMul")


def _network(dtype, seed=1, plan=None):
  tf.random.set_seed(seed)
  net = networks.ActorCritic(_ACTIONS, networks.AtariTorso(plan, compute_dtype=dtype), plan)
  net(tf.zeros((1,) + _OBS, tf.uint8))
  return net


def _twins(seed=1, plan=None):
  """A float32 network and a bfloat16 one holding the same weights."""
  f32, b16 = _network(tf.float32, seed, plan), _network(tf.bfloat16, seed + 100, plan)
  tl.copy_variables(f32, b16)
  return f32, b16


def _batch(seed, segments=_SEGMENTS):
  rng = np.random.default_rng(seed)
  return {"obs": rng.integers(0, 256, (segments, _T + 1) + _OBS).astype(np.uint8),
          "action": rng.integers(0, _ACTIONS, (segments, _T)).astype(np.int32),
          "reward": rng.choice([-1.0, 0.0, 0.0, 1.0], (segments, _T)).astype(np.float32),
          "done": rng.uniform(size=(segments, _T)) < 0.1,
          "behaviour_log_prob": np.full((segments, _T), -np.log(_ACTIONS), np.float32),
          "version": np.zeros((segments, _T), np.int64)}


def _learner(net, jit_compile=False):
  return Learner(net, optimizers.RMSProp(7e-4, decay=0.99, epsilon=1e-5),
                 LearnerConfig(loss_reduction="mean", grad_clip_norm=0.5),
                 after_update=tl.after_update, jit_compile=jit_compile)


def _loss_grads_step(net, batch):
  """Loss metrics, gradients and one RMSProp step's weight changes."""
  learner = _learner(net)
  batch = {k: tf.constant(v) for k, v in batch.items()}
  with tf.GradientTape() as tape:
    loss, metrics = learner.loss(batch)
  # Zeros for a form a layer does not use now (GST's dual-mode: circulant or dense).
  grads = tape.gradient(loss, net.trainable_variables,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  before = [v.numpy() for v in net.trainable_variables]
  learner.train(batch)
  steps = [v.numpy() - b for v, b in zip(net.trainable_variables, before)]
  return {k: float(v) for k, v in metrics.items()}, [g.numpy() for g in grads], steps


def _node_dtypes(graph_def, ops=_COMPUTE_OPS):
  """The `T` of every node of `ops` in a GraphDef and its function library
  (written here, apart from tfrl.precision, as the test's own reading)."""
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes += list(function.node_def)
  return {tf.as_dtype(n.attr["T"].type).name for n in nodes if n.op in ops}


def _any_bfloat16(graph_def) -> bool:
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes += list(function.node_def)
  for node in nodes:
    for value in node.attr.values():
      if value.type == tf.bfloat16.as_datatype_enum or \
          tf.bfloat16.as_datatype_enum in value.list.type:
        return True
  return False


class ResolveTest(tf.test.TestCase):
  test_session = None

  def test_auto_follows_cpu_flags_and_network(self):
    for flags, image, want in (({"avx512_bf16"}, True, "bfloat16"),
                               ({"amx_bf16", "amx_tile"}, True, "bfloat16"),
                               ({"avx512f", "avx2"}, True, "float32"),
                               (set(), True, "float32"),
                               ({"avx512_bf16"}, False, "float32")):
      got = precision.resolve("auto", image_network=image, flags=frozenset(flags))
      self.assertEqual(got.name, want, (flags, image, got.reason))
      self.assertEqual(got.requested, "auto")
    for forced in ("float32", "bfloat16"):
      got = precision.resolve(forced, flags=frozenset())
      self.assertEqual((got.name, got.dtype), (forced, tf.as_dtype(forced)))

  def test_bad_values_are_one_line(self):
    with self.assertRaisesRegex(ValueError, "precision must be one of"):
      precision.resolve("float16")
    with self.assertRaisesRegex(ValueError, "precision must be one of"):
      GA3CConfig(precision="fp8")
    with self.assertRaisesRegex(ValueError, "compute_dtype must be float32 or bfloat16"):
      networks.AtariTorso(compute_dtype=tf.float16)


class NumericsTest(tf.test.TestCase):
  test_session = None

  def test_bfloat16_losses_and_step_match_float32(self):
    f32, b16 = _twins(seed=2)
    batch = _batch(2)
    m32, g32, d32 = _loss_grads_step(f32, batch)
    m16, g16, d16 = _loss_grads_step(b16, batch)
    terms = ("policy_loss", "value_loss", "entropy", "advantage")
    for term in terms:
      self.assertAllClose(m16[term], m32[term], rtol=1e-2, atol=0, msg=term)
    scale = abs(m32["policy_loss"]) + 0.01 * abs(m32["entropy"]) + 0.5 * abs(m32["value_loss"])
    self.assertNear(m16["loss"], m32["loss"], 1e-2 * scale)
    self.assertNotEqual(m16["loss"], m32["loss"])  # it did compute in bfloat16
    for var, a, b, da, db in zip(f32.trainable_variables, g32, g16, d32, d16):
      a, b, da, db = a.ravel(), b.ravel(), da.ravel(), db.ravel()
      cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
      self.assertGreaterEqual(cosine, 0.99, var.name)
      big = np.abs(da) >= 0.5 * np.abs(da).max()
      self.assertAllEqual(np.sign(db[big]), np.sign(da[big]), msg=var.name)
    for var in b16.variables:   # weights and optimizer state stay float32
      self.assertEqual(var.dtype, tf.float32, var.name)

  def test_float32_network_is_plain_float32_arithmetic(self):
    net = _network(tf.float32, seed=3)
    obs = _batch(3)["obs"][:, 0]
    torso = net.torso
    x = tf.cast(obs, tf.float32) / 255.0
    for conv, stride in zip(torso.convs, (4, 2)):
      x = tf.nn.relu(tf.nn.conv2d(x, conv.kernel, stride, "SAME") + conv.bias)
    x = tf.reshape(x, [x.shape[0], -1])
    h = tf.nn.relu(tf.matmul(x, torso.dense.kernel) + torso.dense.bias)
    logits, value = net(obs)
    self.assertAllEqual(logits, tf.matmul(h, net.policy.kernel) + net.policy.bias)
    self.assertAllEqual(value, tf.squeeze(tf.matmul(h, net.value.kernel) + net.value.bias, -1))
    step = tf.function(_learner(net).train)
    graph = step.get_concrete_function(
        {k: tf.constant(v) for k, v in _batch(3).items()}).graph.as_graph_def()
    self.assertFalse(_any_bfloat16(graph))
    self.assertEqual(_node_dtypes(graph), {"float32"})

  def test_every_layer_kind_trains_in_bfloat16_or_says_float32(self):
    self.assertEqual(set(_RAN_BY_KIND), set(spec_lib.KINDS))  # a new kind needs a row
    batch = _batch(4, segments=2)
    for kind, want in _RAN_BY_KIND.items():
      # GST's dual-mode layers need a largest target of at least their circulant ratio.
      plan = tl.LayerPlan(default=tl.LayerSpec(kind=kind, schedule="constant",
                                               target_sparsity=0.9 if kind == "gst" else 0.5,
                                               begin_step=0))
      f32, b16 = _twins(seed=4, plan=plan)
      m32, _, _ = _loss_grads_step(f32, batch)
      m16, _, _ = _loss_grads_step(b16, batch)
      self.assertAllClose(m16["value_loss"], m32["value_loss"], rtol=1e-2, msg=kind)
      self.assertAllClose(m16["policy_loss"], m32["policy_loss"], rtol=1e-2, msg=kind)
      step = tf.function(_learner(b16).train).get_concrete_function(
          {k: tf.constant(v) for k, v in batch.items()})
      self.assertEqual(precision.ran(precision.matmul_dtypes(step)), want, kind)
      self.assertIn("bfloat16", _node_dtypes(step.graph.as_graph_def()), kind)  # the convs


class ExportTest(tf.test.TestCase):
  test_session = None

  def test_bfloat16_policy_takes_uint8_returns_float32_without_tfrl(self):
    net = _network(tf.bfloat16, seed=5)
    tmp = self.get_temp_dir()
    export_dir = export.export_policy(export.DiscretePolicy(net),
                                      tf.TensorSpec((None,) + _OBS, tf.uint8),
                                      os.path.join(tmp, "saved_model"))
    obs = _batch(5)["obs"][:, 0]
    np.save(os.path.join(tmp, "obs.npy"), obs)
    loader = ("import json, sys\nimport numpy as np\nimport tensorflow as tf\n"
              "policy = tf.saved_model.load(sys.argv[1])\n"
              "out = policy.signatures['serving_default'](obs=tf.constant(np.load(sys.argv[2])))\n"
              "assert 'tfrl' not in sys.modules\n"
              "print(json.dumps({k: [v.dtype.name, np.asarray(v).tolist()] "
              "for k, v in out.items()}))\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    result = subprocess.run([sys.executable, "-c", loader, export_dir,
                             os.path.join(tmp, "obs.npy")], capture_output=True, text=True,
                            env=env, cwd=tmp, timeout=120, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    out = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(out["probs"][0], "float32")
    self.assertEqual(out["value"][0], "float32")
    logits, value = net(obs)
    self.assertAllClose(out["probs"][1], tf.nn.softmax(logits), atol=1e-6)
    self.assertAllClose(out["value"][1], value, atol=1e-6)
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
      saved.ParseFromString(f.read())
    self.assertEqual(_node_dtypes(saved.meta_graphs[0].graph_def, ("Conv2D",)), {"bfloat16"})


def _queues(obs_shape=_OBS, obs_dtype=tf.uint8):
  return Queues(obs_shape=obs_shape, obs_dtype=obs_dtype, num_agents=2,
                envs_per_agent=_SEGMENTS, t_max=_T, prediction_capacity=8,
                training_capacity=2 * _SEGMENTS)


class XlaTest(tf.test.TestCase):
  test_session = None

  def test_jit_trainer_matches_plain_trainer_on_the_queue(self):
    batch = _batch(6)
    results = {}
    for dtype in (tf.float32, tf.bfloat16):
      for jit in (False, True):
        net = _network(dtype, seed=6)
        queues = _queues()
        counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("train_steps", "train_samples")}
        trainer = Trainer(_learner(net, jit_compile=jit), queues, min_segments=_SEGMENTS,
                          max_segments=_SEGMENTS, counters=counters)
        queues.training.enqueue_many(batch)
        metrics = trainer.train()
        self.assertEqual(int(counters["train_samples"]), _SEGMENTS * _T)
        concrete = trainer.train.get_concrete_function()
        self.assertEqual(precision.xla_compiled(concrete), jit)
        self.assertEqual(precision.ran(precision.matmul_dtypes(concrete)), dtype.name)
        results[dtype.name, jit] = (float(metrics["loss"]),
                                    np.concatenate([v.numpy().ravel() for v in net.variables]))
    for dtype in ("float32", "bfloat16"):
      # XLA may order sums differently and, in bfloat16, round elsewhere.
      tol = 1e-5 if dtype == "float32" else 1e-2
      (loss, weights), (jit_loss, jit_weights) = results[dtype, False], results[dtype, True]
      self.assertAllClose(jit_loss, loss, rtol=tol, msg=dtype)
      self.assertAllClose(jit_weights, weights, rtol=tol, atol=1e-6, msg=dtype)

  def test_jit_trainer_hands_rigl_its_gradients(self):
    rigl = dict(kind="pruned", schedule="dst", regrow="gradient", target_sparsity=0.5,
                drop_fraction=0.5, begin_step=0, end_step=1000, frequency=1)
    net = _network(tf.bfloat16, seed=8, plan=tl.LayerPlan(overrides=(("policy", rigl),)))
    calls = []

    def record(network, *grads_and_vars):
      calls.append(grads_and_vars)
      tl.after_update(network, *grads_and_vars)

    learner = Learner(net, optimizers.RMSProp(7e-4, decay=0.99, epsilon=1e-5),
                      LearnerConfig(), after_update=record, jit_compile=True)
    queues = _queues()
    counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("train_steps", "train_samples")}
    trainer = Trainer(learner, queues, min_segments=_SEGMENTS, max_segments=_SEGMENTS,
                      counters=counters)
    before = net.policy.mask.numpy()
    queues.training.enqueue_many(_batch(8))
    trainer.train()
    after = net.policy.mask.numpy()
    ((pairs,),) = calls   # traced once, with the policy kernel's gradient out of XLA
    ((grad, var),) = pairs
    self.assertIs(var, net.policy.kernel)
    self.assertEqual(grad.shape, var.shape)
    self.assertEqual(int(net.policy.step), 1)
    self.assertEqual(after.sum(), before.sum())     # dropped and regrown as many
    self.assertGreater(np.sum((before < 0.5) & (after > 0.5)), 0)
    self.assertAllEqual(net.policy.kernel.numpy()[after < 0.5], np.zeros(int((after < 0.5).sum())))

  def test_jit_predictor_serves_agents_and_wakes_on_close(self):
    net = _network(tf.bfloat16, seed=7)
    queues = _queues()
    counters = {k: tf.Variable(0, dtype=tf.int64) for k in ("predictions", "prediction_batches")}
    predictor = Predictor(net, queues, batch_size=8, counters=counters,
                          version=tf.Variable(0, dtype=tf.int64), jit_compile=True)
    obs = _batch(7)["obs"][:3, 0]
    queues.prediction.enqueue_many({"agent": [0, 1, 0], "slot": [0, 0, 1], "obs": obs})
    self.assertEqual(int(predictor.predict()), 3)
    self.assertEqual(int(queues.responses[0].size()), 2)
    self.assertEqual(int(queues.responses[1].size()), 1)
    concrete = predictor.predict.get_concrete_function()
    self.assertTrue(precision.xla_compiled(concrete))
    self.assertEqual(precision.matmul_dtypes(concrete), ["bfloat16"])
    queues.close()   # an empty, closed queue ends the loop, as without XLA
    with self.assertRaises(tf.errors.OutOfRangeError):
      predictor.predict()


def _events(logdir, tag):
  texts = []
  for name in tf.io.gfile.listdir(logdir):
    if name.startswith("events."):
      for event in tf.compat.v1.train.summary_iterator(os.path.join(logdir, name)):
        for value in event.summary.value:
          if value.tag == tag:
            texts.append(tf.make_ndarray(value.tensor).item().decode())
  return texts


class RunReportTest(tf.test.TestCase):
  test_session = None

  def test_short_pong_run_reports_the_precision_it_ran(self):
    expected = "bfloat16" if {"avx512_bf16", "amx_bf16"} & cpu_flags() else "float32"
    logdir = self.get_temp_dir()
    system, summary = runs.run(GA3CConfig(
        protocol=EnvProtocol(game="PongNoFrameskip-v4"), agents=2, max_agents=2, envs_per_agent=2,
        prediction_batch_size=4, training_min_batch_size=10, logdir=logdir,
        checkpoint_every=0, stats_every=100, max_frames=800, precision="auto",
        jit_compile_train=True))
    self.assertGreater(summary["train_steps"], 0)
    report = summary["precision"]
    self.assertEqual(report["requested"], "auto")
    self.assertEqual(report["precision"], expected)
    # What ran, read by the test from the traced steps' graphs.
    for step, fn in (("train", system.trainer.train), ("predict", system.predictor.predict)):
      graph = fn.get_concrete_function().graph.as_graph_def()
      self.assertEqual(_node_dtypes(graph), {expected}, step)
      self.assertEqual(report[f"{step}_ran"], expected, step)
    self.assertTrue(report["train_jit_compile"])
    self.assertFalse(report["predict_jit_compile"])
    self.assertEqual(system.network.compute_dtype, tf.as_dtype(expected))
    (text,) = _events(logdir, "run/precision")
    self.assertIn(f"precision {expected}", text)
    self.assertIn("XLA: train on, predict off", text)
    self.assertEqual(export.read_metadata(summary["saved_model"])["precision"], report)

  def test_cli_forced_bfloat16_logs_and_writes_summary(self):
    logdir = self.get_temp_dir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_REPO)
    command = [sys.executable, "-m", "tfrl.ga3c", "--env=CartPole-v1", "--agents=2",
               "--max_agents=2", f"--logdir={logdir}", "--max_frames=400",
               "--checkpoint_every=0", "--precision=bfloat16", "--logtostderr"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=_REPO,
                            timeout=300, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("GA3C precision bfloat16 (--precision=bfloat16); traced convs/matmuls: "
                  "train bfloat16, predict bfloat16; XLA: train off, predict off",
                  result.stderr)
    with open(os.path.join(logdir, "summary.json")) as f:
      report = json.load(f)["precision"]
    self.assertEqual((report["precision"], report["train_ran"], report["predict_ran"]),
                     ("bfloat16", "bfloat16", "bfloat16"))
    result = subprocess.run(command[:-2] + ["--precision=float16"], capture_output=True,
                            text=True, env=env, cwd=_REPO, timeout=120, check=False)
    self.assertNotEqual(result.returncode, 0)   # absl's enum check: one line
    self.assertNotIn("Traceback", result.stderr)
    self.assertIn("precision", result.stderr)


if __name__ == "__main__":
  tf.test.main()
