"""Per-layer cost of incremental inference, next to the full GEMM layer.

Plays Pong for --warm_steps steps with --rows rows of two random population
networks (the GA's initialisation: noise times `ParamLayout.init_scale`),
then times each layer of the next step alone, in microseconds per row, side
by side in one run:

  * incremental: `PopulationDeltaConv2D` on that step's change;
  * fresh: the same op computing the row in full (a new episode, or every
    `refresh_steps`);
  * unchanged: the op with x_prev = x (its fixed cost: the scan for changes
    and the copy of the last output);
  * GEMM: the layer's full forward with the population batching op
    (`population_conv2d` / `population_matmul` with its bias / ReLU), what
    `--inference=full` runs.

Each time is the best of --repeats graph-loop calls of --iters layer calls
on one intra-op thread, with the caches warm (the GA's are colder: its
emulators share them). Also prints the fraction of each layer's input
values that changed in the step.

    python benchmarks/delta_layers.py --archs=small,large --weight_dtypes=float32,bfloat16

Prints a table and writes JSON (--output).
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

_ARCHS = flags.DEFINE_list("archs", ["small", "large"], "Population network archs.")
_DTYPES = flags.DEFINE_list("weight_dtypes", ["float32"], "Kernel dtypes (float32, bfloat16).")
_ROWS = flags.DEFINE_integer("rows", 16, "Rows (env slots), half per network.")
_WARM = flags.DEFINE_integer("warm_steps", 60, "Steps played before the timed one.")
_ITERS = flags.DEFINE_integer("iters", 40, "Layer calls per graph-loop call.")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Graph-loop calls per time (best kept).")
_OUTPUT = flags.DEFINE_string("output", "delta_layers.json", "JSON results path.")


def best_time(body, init):
  """Seconds per call of `body` (a -> a), best of the repeats, in a graph loop."""
  iters = _ITERS.value

  @tf.function
  def loop(a):
    return tf.while_loop(lambda j, a: j < iters, lambda j, a: (j + 1, body(a)),
                         (0, a), parallel_iterations=1)[1]

  loop(init).numpy()
  times = []
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    loop(init).numpy()
    times.append(time.perf_counter() - start)
  return min(times) / iters


def layer_inputs(net, layout, obs, state, index):
  """Per layer: (x, x_prev, acc_prev, f's kwargs) of the step from `state`.

  One incremental step gives each layer's new output, the next layer's x;
  the state holds the previous ones (x_prev, and each layer's acc_prev).
  """
  fresh = tf.zeros([int(obs.shape[0])], tf.bool)
  new_state = net.incremental_logits(obs, index, fresh, state)[1]
  out = []
  for i in range(len(layout.layers)):
    if i == 0:  # uint8 frames, scaled inside the op
      kwargs = dict(input_scale=1.0 / 255.0, input_bias=None, input_relu=False)
    else:  # the previous layer's output, through its bias and ReLU
      kwargs = dict(input_scale=1.0, input_bias=net.biases[i - 1].value(),
                    input_relu=layout.layers[i - 1].relu)
    out.append((new_state[i], state[i], state[i + 1], kwargs))
  return out


def changed_fraction(x, x_prev, kwargs, index):
  f = lambda v: delta.layer_input(v, index, **kwargs)
  return float(tf.reduce_mean(tf.cast(tf.not_equal(f(x), f(x_prev)), tf.float32)))


def measure(env, arch, weight_dtype):
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
  results = []
  all_rows = tf.ones([rows], tf.bool)
  geometry = net.delta_geometry()
  for i, (x, x_prev, acc_prev, kwargs) in enumerate(
      layer_inputs(net, layout, obs, state, index)):
    layer = layout.layers[i]
    w = tf.identity(net.kernels[i].value())
    op_args = dict(kernel_size=geometry[i][0], stride=geometry[i][1], **kwargs)
    # The GEMM layer's input: the previous layer's activation (frames as uint8).
    gemm_in = x if i == 0 else delta.layer_input(x, index, **kwargs)

    # The op's wrapper: its conversions of tensors already of the right
    # dtypes add no graph ops, so the loop times the op alone.
    def delta_body(prev, fresh, unchanged=False):
      flags_t = tf.fill([rows], fresh)
      return lambda a: delta.population_delta_conv2d_op(
          x, x if unchanged else prev, a, w, index, flags_t, **op_args)

    times = {"incremental": best_time(delta_body(x_prev, False), acc_prev),
             "fresh": best_time(delta_body(x_prev, True), acc_prev),
             "unchanged": best_time(delta_body(x_prev, False, unchanged=True), acc_prev)}
    bias = net.biases[i].value()
    if layer.conv is not None:
      gemm = lambda h, l=layer, s=kwargs["input_scale"]: pop_ops.population_conv2d(
          h, w, index, all_rows, kernel_size=l.conv[0], stride=l.conv[1], input_scale=s,
          bias=bias, relu=l.relu)
    else:
      gemm = lambda h, l=layer: pop_ops.population_matmul(
          tf.reshape(h, [rows, 1, l.k]), w, index, all_rows, bias=bias, relu=l.relu)
    # The loop carries the GEMM's output; each call reads the same input,
    # after the last call (so that no call is hoisted out of the loop).
    times["gemm"] = best_time(lambda y: gemm(_after(y, gemm_in)), gemm(gemm_in))
    results.append({"layer": layer.name, "changed_input_fraction":
                    changed_fraction(x, x_prev, kwargs, index),
                    **{k: v / rows * 1e6 for k, v in times.items()}})
  return results


def _after(dep, value):
  """`value`, once `dep` has run."""
  with tf.control_dependencies([dep]):
    return tf.identity(value)


def main(argv):
  del argv
  tf.config.threading.set_intra_op_parallelism_threads(1)
  pop_ops.load_library()
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  env = AtariEnv("pong", _ROWS.value, seed=0)
  report = {"provenance": provenance.provenance(), "rows": _ROWS.value, "networks": 2,
            "warm_steps": _WARM.value, "unit": "microseconds per row", "results": {}}
  header = (f"{'arch / kernels / layer':<34} | {'changed in':>10} | {'incremental':>11} | "
            f"{'fresh':>7} | {'unchanged':>9} | {'GEMM':>7}")
  print(header)
  print("-" * len(header))
  for arch in _ARCHS.value:
    for dtype in _DTYPES.value:
      rows = measure(env, arch, dtype)
      report["results"][f"{arch}/{dtype}"] = rows
      for r in rows:
        print(f"{arch + ' / ' + dtype + ' / ' + r['layer']:<34} | "
              f"{r['changed_input_fraction']:>10.4f} | {r['incremental']:>11.1f} | "
              f"{r['fresh']:>7.1f} | {r['unchanged']:>9.1f} | {r['gemm']:>7.1f}")
      total = {k: sum(r[k] for r in rows) for k in ("incremental", "fresh", "unchanged", "gemm")}
      print(f"{arch + ' / ' + dtype + ' / whole step':<34} | {'':>10} | "
            f"{total['incremental']:>11.1f} | {total['fresh']:>7.1f} | "
            f"{total['unchanged']:>9.1f} | {total['gemm']:>7.1f}")
  with open(_OUTPUT.value, "w") as f:
    json.dump(report, f, indent=1)
  print(f"wrote {_OUTPUT.value}")
  env.close()


if __name__ == "__main__":
  app.run(main)
