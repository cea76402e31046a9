"""Incremental inference: the whole-network op against the per-layer ops, on one step.

Plays --game (Pong by default) for --warm_steps steps with --rows rows of two random population
networks (the GA's initialisation: noise times `ParamLayout.init_scale`),
then times the next step, in microseconds per row, side by side in one run:

  * net: `PopulationDeltaNet`, the whole network in one op (what the GA
    runs);
  * chain: the same step as one `PopulationDeltaConv2D` op per layer, each
    layer's input the output of the one below: the same work as `net`, so
    the two compare directly. The per-layer op is in the library only when it
    is built with TFRL_BUILD_DELTA_CONV2D=1; without it this column is
    skipped;
  * gemm: the full forward with the population batching op (each layer's
    `population_conv2d` / `population_matmul` with its bias / ReLU), what
    `--inference=full` runs.

For `net` and `chain`, three steps: incremental (that step's change), fresh
(every row computed in full: a new episode, or every `refresh_steps`) and
unchanged (x_prev = x: the fixed cost of a step). `chain` is also given layer
by layer. Each time is the best of --repeats graph-loop calls of --iters
calls on one intra-op thread, with the caches warm (the GA's are colder: its
emulators share them). Also prints the fraction of each layer's input values
that changed in the step.

    TFRL_BUILD_DELTA_CONV2D=1 python setup.py build_ext --inplace   # for `chain`
    python benchmarks/delta_layers.py --archs=small,large --weight_dtypes=float32,bfloat16

Prints tables and writes JSON (--output).

Instruction counts instead of times (a machine too busy to time on): with
--save_step=DIR the played step of each arch and dtype is written to
DIR/<arch>_<dtype>.npz; --replay=FILE then only makes calls of that step,
untimed, in phases: for each variant of --variants (net, chain) and mode
(incremental, fresh), one call and then --calls more, each phase after a
call of TensorFlow's Timestamp op as a marker. Under callgrind, collecting
only inside the ops' work and dumping a part at every marker, each part is
one phase's instructions (the first call of a phase includes the op's
one-time setup; the --calls after it are the steady cost):

    valgrind --tool=callgrind --dump-before='*TimestampOp::Compute*' \
      --toggle-collect='*PopulationDelta*Op<*>::Compute(*)::{lambda(long, long)#1}>::_M_invoke(*)' \
      python benchmarks/delta_layers.py --replay=DIR/large_float32.npz
"""

import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import population_net as pn  # pylint: disable=g-import-not-at-top
from tfrl.ops import population as pop_ops  # pylint: disable=g-import-not-at-top
from tfrl.ops import population_delta as delta  # pylint: disable=g-import-not-at-top
from tfrl.ops import reference  # pylint: disable=g-import-not-at-top

_GAME = flags.DEFINE_string("game", "pong", "ALE game played to the timed step.")
_ARCHS = flags.DEFINE_list("archs", ["small", "large"], "Population network archs.")
_DTYPES = flags.DEFINE_list("weight_dtypes", ["float32"], "Kernel dtypes (float32, bfloat16).")
_ROWS = flags.DEFINE_integer("rows", 16, "Rows (env slots), half per network.")
_WARM = flags.DEFINE_integer("warm_steps", 60, "Steps played before the timed one.")
_ITERS = flags.DEFINE_integer("iters", 40, "Calls per graph-loop call.")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Graph-loop calls per time (best kept).")
_OUTPUT = flags.DEFINE_string("output", "delta_layers.json", "JSON results path.")
_SAVE = flags.DEFINE_string("save_step", None, "Directory for the played steps (.npz).")
_REPLAY = flags.DEFINE_string("replay", None, "A saved step to call --calls times, untimed.")
_VARIANTS = flags.DEFINE_list("variants", ["net", "chain"], "With --replay: net, chain.")
_CALLS = flags.DEFINE_integer("calls", 2, "With --replay: steady calls per phase.")


class Step:
  """One step of a population network: its inputs, state and weights.

  `net(fresh, unchanged)` and `chain(fresh, unchanged)` return functions
  state -> new state that compute it with the whole-network op or with the
  per-layer ops.
  """

  def __init__(self, obs, obs_prev, state, kernels, biases, index, geometry, relus):
    self.obs, self.obs_prev, self.state = obs, obs_prev, list(state)
    self.kernels, self.biases, self.index = kernels, biases, index
    self.kernel_sizes = [ks for ks, _, _ in geometry]
    self.strides = [stride for _, stride, _ in geometry]
    self.relus = list(relus)
    self.rows = int(obs.shape[0])

  def _flags(self, fresh):
    return tf.fill([self.rows], fresh)

  def net(self, fresh=False, unchanged=False):
    prev = self.obs if unchanged else self.obs_prev
    return lambda acc: delta.population_delta_net_op(
        self.obs, prev, acc, self.kernels, self.biases, self.index, self._flags(fresh),
        kernel_sizes=self.kernel_sizes, strides=self.strides, relus=self.relus,
        input_scale=1.0 / 255.0)[1]

  def layer_inputs(self, i, new_state):
    """(x, x_prev, kwargs of f) of layer i, given this step's outputs below it."""
    if i == 0:  # uint8 frames, scaled inside the op
      return self.obs, self.obs_prev, dict(input_scale=1.0 / 255.0)
    return new_state[i - 1], self.state[i - 1], dict(input_bias=self.biases[i - 1],
                                                     input_relu=self.relus[i - 1])

  def layer(self, i, fresh=False, unchanged=False):
    """Layer i as the per-layer op: acc_prev -> acc, its inputs those of the step."""
    x, x_prev, kwargs = self.layer_inputs(i, self.reference_state)
    return lambda acc: delta.population_delta_conv2d_op(
        x, x if unchanged else x_prev, acc, self.kernels[i], self.index, self._flags(fresh),
        kernel_size=self.kernel_sizes[i], stride=self.strides[i], **kwargs)

  def chain(self, fresh=False, unchanged=False):
    def run(acc_prev):
      out, x, x_prev = [], self.obs, self.obs if unchanged else self.obs_prev
      for i, acc in enumerate(acc_prev):
        kwargs = (dict(input_scale=1.0 / 255.0) if i == 0 else
                  dict(input_bias=self.biases[i - 1], input_relu=self.relus[i - 1]))
        new = delta.population_delta_conv2d_op(
            x, x_prev, acc, self.kernels[i], self.index, self._flags(fresh),
            kernel_size=self.kernel_sizes[i], stride=self.strides[i], **kwargs)
        out.append(new)
        x, x_prev = new, new if unchanged else acc
      return out
    return run

  @property
  def reference_state(self):
    """Each layer's output after this step (what the layers above read)."""
    if not hasattr(self, "_after"):
      self._after = [tf.identity(a) for a in self.net()(self.state)]
    return self._after

  def save(self, path):
    arrays = {"obs": self.obs, "obs_prev": self.obs_prev, "index": self.index,
              "kernel_sizes": self.kernel_sizes, "strides": self.strides,
              "relus": self.relus, "bfloat16": self.kernels[0].dtype == tf.bfloat16}
    for i, (a, k, b) in enumerate(zip(self.state, self.kernels, self.biases)):
      arrays[f"state_{i}"], arrays[f"bias_{i}"] = a, b
      arrays[f"kernel_{i}"] = tf.cast(k, tf.float32)  # bfloat16 values, exactly
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})

  @classmethod
  def load(cls, path):
    f = np.load(path)
    layers = len(f["kernel_sizes"])
    dtype = tf.bfloat16 if bool(f["bfloat16"]) else tf.float32
    kernels = [tf.cast(f[f"kernel_{i}"], dtype) for i in range(layers)]
    geometry = list(zip(f["kernel_sizes"].tolist(), f["strides"].tolist(), [None] * layers))
    return cls(tf.constant(f["obs"]), tf.constant(f["obs_prev"]),
               [tf.constant(f[f"state_{i}"]) for i in range(layers)], kernels,
               [tf.constant(f[f"bias_{i}"]) for i in range(layers)],
               tf.constant(f["index"]), geometry, f["relus"].tolist())


def best_time(body, init):
  """Seconds per call of `body` (a -> a), best of the repeats, in a graph loop."""
  iters = _ITERS.value

  @tf.function
  def loop(a):
    return tf.while_loop(lambda j, a: j < iters, lambda j, a: (j + 1, body(a)),
                         (0, a), parallel_iterations=1)[1]

  tf.nest.map_structure(lambda t: t.numpy(), loop(init))
  times = []
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    tf.nest.map_structure(lambda t: t.numpy(), loop(init))
    times.append(time.perf_counter() - start)
  return min(times) / iters


def play(env, arch, weight_dtype):
  """Plays --warm_steps of --game; returns (the next Step, the network, its layout)."""
  layout = pn.ParamLayout(pn.NetworkConfig(arch=arch, weight_dtype=weight_dtype),
                          env.observation_shape, env.num_actions)
  rows = _ROWS.value
  net = pn.PopulationNetwork(layout, 2)
  rng = np.random.default_rng(0)
  net.load((layout.init_scale * rng.standard_normal((2, layout.dim))).astype(np.float32))
  index = tf.constant(np.repeat([0, 1], rows // 2).astype(np.int32))
  step = tf.function(lambda o, f, s: net.incremental_logits(o, index, f, s))
  slots = tf.range(rows)
  obs, state = env.reset(), net.incremental_initial_state(rows)
  for t in range(_WARM.value):
    logits, state = step(obs, tf.fill([rows], t == 0), state)
    obs = env.step(tf.argmax(logits, -1, output_type=tf.int32), slots)[0]
  kernels = [tf.identity(k.value()) for k in net.kernels]
  biases = [tf.identity(b.value()) for b in net.biases]
  # The next step: this frame, against the one the state was computed from.
  stepped = Step(obs, state[0], state[1:], kernels, biases, index, net.delta_geometry(),
                 [l.relu for l in layout.layers[:-1]])
  return stepped, net, layout


def changed_fraction(step, i):
  x, x_prev, kwargs = step.layer_inputs(i, step.reference_state)
  f = lambda v: reference.layer_input(v, step.index, **kwargs)  # noqa: E731
  return float(tf.reduce_mean(tf.cast(tf.not_equal(f(x), f(x_prev)), tf.float32)))


def gemm_time(step, layout, net):
  """Seconds of the full forward of the step's frames (`--inference=full`)."""
  index, rows = step.index, step.rows
  forward = lambda y: net(_after(y, step.obs), index, tf.ones([rows], tf.bool))  # noqa: E731
  return best_time(forward, net(step.obs, index, tf.ones([rows], tf.bool)))


def measure(step, layout, net, have_chain):
  """{variant: {mode: microseconds per row}} and the chain's per-layer rows."""
  per_row = lambda s: s / step.rows * 1e6  # noqa: E731
  modes = {"incremental": {}, "fresh": dict(fresh=True), "unchanged": dict(unchanged=True)}
  whole = {"net": {m: per_row(best_time(step.net(**kw), step.state)) for m, kw in modes.items()}}
  layers = []
  if have_chain:
    whole["chain"] = {m: per_row(best_time(step.chain(**kw), step.state))
                      for m, kw in modes.items()}
    for i, layer in enumerate(layout.layers):
      row = {"layer": layer.name, "changed_input_fraction": changed_fraction(step, i)}
      for m, kw in modes.items():
        row[m] = per_row(best_time(step.layer(i, **kw), step.state[i]))
      layers.append(row)
  whole["gemm"] = {"full": per_row(gemm_time(step, layout, net))}
  return whole, layers


def _after(dep, value):
  """`value`, once `dep` has run (so that no call is hoisted out of the loop)."""
  with tf.control_dependencies(tf.nest.flatten(dep)):
    return tf.identity(value)


def print_tables(name, whole, layers):
  print(f"\n{name}: microseconds per row")
  print(f"{'':<10} | {'incremental':>11} | {'fresh':>8} | {'unchanged':>9}")
  for variant in ("net", "chain"):
    if variant in whole:
      t = whole[variant]
      print(f"{variant:<10} | {t['incremental']:>11.1f} | {t['fresh']:>8.1f} | "
            f"{t['unchanged']:>9.1f}")
  print(f"{'gemm':<10} | full forward {whole['gemm']['full']:.1f}")
  if "chain" in whole:
    ratio = whole["net"]["incremental"] / whole["chain"]["incremental"]
    print(f"net / chain, incremental: {ratio:.2f}")
  for r in layers:
    print(f"  chain {r['layer']:<14} changed {r['changed_input_fraction']:.4f} | "
          f"{r['incremental']:>8.1f} | {r['fresh']:>8.1f} | {r['unchanged']:>8.1f}")


def replay():
  """--replay: phases of untimed calls of a saved step, each after a marker op."""
  step = Step.load(_REPLAY.value)
  phases = []
  for variant in _VARIANTS.value:
    for fresh in (False, True):
      fn = tf.function((step.net if variant == "net" else step.chain)(fresh=fresh))
      phases.append((f"{variant} {'fresh' if fresh else 'incremental'} first call", fn, 1))
      phases.append((f"{variant} {'fresh' if fresh else 'incremental'} steady", fn,
                     _CALLS.value))
  for name, fn, calls in phases:
    tf.raw_ops.Timestamp()  # a part boundary under callgrind --dump-before
    for _ in range(calls):
      tf.nest.map_structure(lambda t: t.numpy(), fn(step.state))
    print(f"phase: {name}, {calls} calls of {step.rows} rows", flush=True)
  tf.raw_ops.Timestamp()


def main(argv):
  del argv
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  pop_ops.load_library()
  if _REPLAY.value:
    return replay()
  have_chain = delta.have_delta_conv2d_op()
  if not have_chain:
    print("The op library has no PopulationDeltaConv2D (build it with "
          "TFRL_BUILD_DELTA_CONV2D=1 for the `chain` column); timing `net` and `gemm`.")
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  env = AtariEnv(_GAME.value, _ROWS.value, seed=0)
  report = {"provenance": provenance.provenance(), "game": _GAME.value, "rows": _ROWS.value, "networks": 2,
            "warm_steps": _WARM.value, "unit": "microseconds per row", "results": {}}
  for arch in _ARCHS.value:
    for dtype in _DTYPES.value:
      step, net, layout = play(env, arch, dtype)
      if _SAVE.value:
        os.makedirs(_SAVE.value, exist_ok=True)
        step.save(os.path.join(_SAVE.value, f"{arch}_{dtype}.npz"))
      whole, layers = measure(step, layout, net, have_chain)
      report["results"][f"{arch}/{dtype}"] = {"whole_step": whole, "chain_layers": layers}
      print_tables(f"{arch} / {dtype}", whole, layers)
  with open(_OUTPUT.value, "w") as f:
    json.dump(report, f, indent=1)
  print(f"wrote {_OUTPUT.value}")
  env.close()
  return None


if __name__ == "__main__":
  app.run(main)
