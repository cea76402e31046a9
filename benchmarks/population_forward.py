"""Network forwards per second of a population of different networks.

Side by side, for P networks each evaluated on its own observation (B = P
rows, all active, uint8 [84, 84, 4] frames):

  * op:        tfrl's population network on the compiled masked batching op;
  * op bf16:   the same with bfloat16 kernels (NetworkConfig.weight_dtype);
  * reference: the same network on the pure-TF tf.gather + tf.matmul reference
               (the fallback when the op is not built);
  * loop:      a per-network loop, P forwards of a plain conv2d/matmul network
               (weights sliced out of the population), one tf.function call each.

    python benchmarks/population_forward.py [--arch=large] [--populations=16,64,256]

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

from tfrl.neuroevolution import population_net as pn  # pylint: disable=g-import-not-at-top
from tfrl.ops import population as pop_ops  # pylint: disable=g-import-not-at-top

_ARCH = flags.DEFINE_enum("arch", "large", list(pn.ARCHS[1:]), "Conv network.")
_POPULATIONS = flags.DEFINE_list("populations", ["16", "64", "256"], "Values of P.")
_ACTIONS = flags.DEFINE_integer("num_actions", 18, "Policy outputs.")
_SECONDS = flags.DEFINE_float("seconds", 3.0, "Measuring time per cell (per repeat).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Repeats per cell; the best is reported.")
_ACTIVE = flags.DEFINE_float("active_fraction", 1.0,
                             "Fraction of rows still running (the rest masked).")
_OUTPUT = flags.DEFINE_string("output", "population_forward.json", "JSON results path.")


def _timed(fn, seconds):
  fn()  # warm-up (trace)
  fn()
  count, start = 0, time.perf_counter()
  while True:
    fn()
    count += 1
    elapsed = time.perf_counter() - start
    if elapsed >= seconds and count >= 2:
      return elapsed / count


def _fill_random(net, seed):
  rng = tf.random.Generator.from_seed(seed)
  for layer, k, b in zip(net.layout.layers, net.kernels, net.biases):
    k.assign(tf.cast(rng.normal(k.shape) / np.sqrt(layer.k), k.dtype))
    b.assign(rng.normal(b.shape) * 0.01)
  net.loaded = net.capacity


def bench(population: int):
  obs_shape = (84, 84, 4)
  results = {}
  rng = np.random.default_rng(0)
  obs = tf.constant(rng.integers(0, 256, (population,) + obs_shape, dtype=np.uint8))
  index = tf.range(population, dtype=tf.int32)
  active_np = np.ones(population, bool)
  if _ACTIVE.value < 1.0:
    active_np[rng.permutation(population)[:int(round((1 - _ACTIVE.value) * population))]] = False
  active = tf.constant(active_np)
  rows = int(active_np.sum())

  nets = {}
  for name, use_op, dtype in (("op", True, "float32"), ("op_bf16", True, "bfloat16"),
                              ("reference", False, "float32")):
    layout = pn.ParamLayout(pn.NetworkConfig(arch=_ARCH.value, use_op=use_op,
                                             weight_dtype=dtype),
                            obs_shape, _ACTIONS.value)
    net = pn.PopulationNetwork(layout, population)
    _fill_random(net, 1)
    nets[name] = net
    fwd = tf.function(net.__call__)
    results[name] = lambda fwd=fwd: fwd(obs, index, active).numpy()

  # Agreement check of the two batched variants.
  a = results["op"]()
  b = results["reference"]()
  max_err = float(np.abs(a[active_np] - b[active_np]).max())

  net = nets["op"]
  layers = net.layout.layers

  @tf.function
  def one(o, p):
    h = tf.cast(o, tf.float32) / 255.0
    for layer, k, bias in zip(layers, net.kernels, net.biases):
      w = k[p]
      if layer.conv is not None:
        ks, stride = layer.conv
        h = tf.nn.conv2d(h, tf.reshape(w, [ks, ks, layer.k // (ks * ks), layer.n]),
                         stride, "VALID") + bias[p]
      else:
        h = tf.matmul(tf.reshape(h, [1, layer.k]), w) + bias[p]
      if layer.relu:
        h = tf.nn.relu(h)
    return h

  loop_rows = [int(i) for i in np.flatnonzero(active_np)]
  obs_rows = [obs[i:i + 1] for i in loop_rows]

  def loop():
    out = None
    for i, o in zip(loop_rows, obs_rows):
      out = one(o, tf.constant(i))
    return out.numpy()

  results["loop"] = loop

  best = {name: float("inf") for name in results}
  for _ in range(_REPEATS.value):
    for name, fn in results.items():
      best[name] = min(best[name], _timed(fn, _SECONDS.value))
  return {name: rows / t for name, t in best.items()}, max_err, rows


def main(argv):
  del argv
  pop_ops.load_library()  # the benchmark needs the compiled op.
  rows = []
  print(f"arch={_ARCH.value} obs=84x84x4 uint8, actions={_ACTIONS.value}, "
        f"threads: intra-op {tf.config.threading.get_intra_op_parallelism_threads() or 'auto'}, "
        f"cpus {os.cpu_count()}")
  for p in (int(v) for v in _POPULATIONS.value):
    fps, err, active_rows = bench(p)
    row = {"population": p, "active_rows": active_rows,
           "op_forwards_per_s": fps["op"],
           "op_bf16_forwards_per_s": fps["op_bf16"],
           "reference_forwards_per_s": fps["reference"],
           "loop_forwards_per_s": fps["loop"],
           "op_over_reference": fps["op"] / fps["reference"],
           "op_over_loop": fps["op"] / fps["loop"],
           "max_abs_diff_op_vs_reference": err}
    rows.append(row)
    print(f"P={p} done", flush=True)
  header = (f"{'P':>5} | {'op fwd/s':>10} | {'op bf16':>8} | {'reference fwd/s':>15} | "
            f"{'loop fwd/s':>10} | {'op/ref':>6} | {'op/loop':>7}")
  print(header)
  print("-" * len(header))
  for r in rows:
    print(f"{r['population']:>5} | {r['op_forwards_per_s']:>10.1f} | "
          f"{r['op_bf16_forwards_per_s']:>8.1f} | "
          f"{r['reference_forwards_per_s']:>15.1f} | {r['loop_forwards_per_s']:>10.1f} | "
          f"{r['op_over_reference']:>6.2f} | {r['op_over_loop']:>7.2f}")
  with open(_OUTPUT.value, "w") as f:
    json.dump({"arch": _ARCH.value, "num_actions": _ACTIONS.value,
               "active_fraction": _ACTIVE.value, "cpus": os.cpu_count(),
               "results": rows}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
