"""Network forwards per second of a population of different networks.

Side by side, for P networks each evaluated on its own observation (B = P
rows, all active, uint8 [84, 84, 4] frames):

  * op:        tfrl's population network on the compiled masked batching op;
  * op bf16:   the same with bfloat16 kernels (NetworkConfig.weight_dtype);
  * op bf16 in: bfloat16 kernels and bfloat16 conv inputs
               (NetworkConfig.conv_input_dtype; in AMX tiles on CPUs with
               AMX-BF16 when the library is built with TFRL_BUILD_AMX=1,
               TFRL_POPULATION_NO_AMX=1 then forcing the portable path);
  * reference: the same network on the pure-TF tf.gather + tf.matmul reference
               (tfrl.ops.reference, the fallback when the op is not built);
  * loop:      a per-network loop, P forwards of a plain conv2d/matmul network
               (weights sliced out of the population), one tf.function call each.

    python benchmarks/population_forward.py [--arch=large] [--populations=16,64,256]

Then (--layer_rows > 0) the convolution layers of the small and large nets
alone, each as one op call on --layer_rows rows of as many different networks
(P = 2 * rows), in microseconds per row: float32 kernels, bfloat16 kernels,
bfloat16 kernels and inputs.

Prints tables and writes JSON (--output).
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

_ARCH = flags.DEFINE_enum("arch", "large", list(pn.ARCHS[1:]), "Conv network.")
_POPULATIONS = flags.DEFINE_list("populations", ["16", "64", "256"], "Values of P.")
_ACTIONS = flags.DEFINE_integer("num_actions", 18, "Policy outputs.")
_SECONDS = flags.DEFINE_float("seconds", 3.0, "Measuring time per cell (per repeat).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Repeats per cell; the best is reported.")
_ACTIVE = flags.DEFINE_float("active_fraction", 1.0,
                             "Fraction of rows still running (the rest masked).")
_OUTPUT = flags.DEFINE_string("output", "population_forward.json", "JSON results path.")
_LAYER_ROWS = flags.DEFINE_integer("layer_rows", 32,
                                   "Rows of the per-layer convolution timing (0: skip).")

# Forward variants: (name, use_op, weight_dtype, conv_input_dtype).
_VARIANTS = (("op", True, "float32", "float32"),
             ("op_bf16", True, "bfloat16", "float32"),
             ("op_bf16_in", True, "bfloat16", "bfloat16"),
             ("reference", False, "float32", "float32"))


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
  for name, use_op, dtype, conv_input in _VARIANTS:
    layout = pn.ParamLayout(pn.NetworkConfig(arch=_ARCH.value, use_op=use_op,
                                             weight_dtype=dtype,
                                             conv_input_dtype=conv_input),
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
  # How far rounding the conv inputs moves the logits (same bf16 kernels).
  c = results["op_bf16"]()
  d = results["op_bf16_in"]()
  bf16_in_diff = float(np.abs(c[active_np] - d[active_np]).max())

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
  return {name: rows / t for name, t in best.items()}, max_err, bf16_in_diff, rows


def conv_layer_times(arch: str, rows: int):
  """Microseconds per row of each conv layer of `arch`, one op call on `rows` rows."""
  layout = pn.ParamLayout(pn.NetworkConfig(arch=arch), (84, 84, 4), _ACTIONS.value)
  rng = np.random.default_rng(3)
  population = 2 * rows
  index = tf.constant(rng.permutation(population)[:rows].astype(np.int32))
  active = tf.ones([rows], tf.bool)
  h, w, c = 84, 84, 4
  out = []
  for layer in layout.layers:
    if layer.conv is None:
      continue
    ks, stride = layer.conv
    x = tf.constant(rng.random((rows, h, w, c)).astype(np.float32))
    w32 = tf.constant((rng.standard_normal((population, layer.k, layer.n)) /
                       np.sqrt(layer.k)).astype(np.float32))
    w16 = tf.cast(w32, tf.bfloat16)
    variants = {"float32": (w32, "float32"), "bf16_kernels": (w16, "float32"),
                "bf16_kernels_inputs": (w16, "bfloat16")}
    oh, ow = (h - ks) // stride + 1, (w - ks) // stride + 1
    row = {"layer": layer.name, "input": [h, w, c], "m": oh * ow, "k": layer.k,
           "n": layer.n, "mflop_per_row": 2e-6 * oh * ow * layer.k * layer.n}
    for name, (kernel, input_dtype) in variants.items():
      fn = tf.function(lambda x=x, kernel=kernel, input_dtype=input_dtype:
                       pop_ops.population_conv2d_op(x, kernel, index, active,
                                                    kernel_size=ks, stride=stride,
                                                    input_dtype=input_dtype))
      seconds = min(_timed(lambda fn=fn: fn().numpy(), _SECONDS.value / 3)
                    for _ in range(_REPEATS.value))
      row[f"{name}_us_per_row"] = 1e6 * seconds / rows
    out.append(row)
    h, w, c = oh, ow, layer.n
  return out


def main(argv):
  del argv
  record = provenance.provenance()
  pop_ops.load_library()  # the benchmark needs the compiled op.
  rows = []
  print(f"arch={_ARCH.value} obs=84x84x4 uint8, actions={_ACTIONS.value}, "
        f"threads: intra-op {tf.config.threading.get_intra_op_parallelism_threads() or 'auto'}, "
        f"cpus {os.cpu_count()}")
  for p in (int(v) for v in _POPULATIONS.value):
    fps, err, bf16_in_diff, active_rows = bench(p)
    row = {"population": p, "active_rows": active_rows,
           "op_forwards_per_s": fps["op"],
           "op_bf16_forwards_per_s": fps["op_bf16"],
           "op_bf16_in_forwards_per_s": fps["op_bf16_in"],
           "reference_forwards_per_s": fps["reference"],
           "loop_forwards_per_s": fps["loop"],
           "op_over_reference": fps["op"] / fps["reference"],
           "op_over_loop": fps["op"] / fps["loop"],
           "max_abs_diff_op_vs_reference": err,
           "max_abs_diff_bf16_in_vs_bf16": bf16_in_diff}
    rows.append(row)
    print(f"P={p} done", flush=True)
  header = (f"{'P':>5} | {'op fwd/s':>10} | {'op bf16':>8} | {'op bf16 in':>10} | "
            f"{'reference fwd/s':>15} | {'loop fwd/s':>10} | {'op/ref':>6} | {'op/loop':>7}")
  print(header)
  print("-" * len(header))
  for r in rows:
    print(f"{r['population']:>5} | {r['op_forwards_per_s']:>10.1f} | "
          f"{r['op_bf16_forwards_per_s']:>8.1f} | {r['op_bf16_in_forwards_per_s']:>10.1f} | "
          f"{r['reference_forwards_per_s']:>15.1f} | {r['loop_forwards_per_s']:>10.1f} | "
          f"{r['op_over_reference']:>6.2f} | {r['op_over_loop']:>7.2f}")
  layers = []
  if _LAYER_ROWS.value > 0:
    for arch in ("small", "large"):
      layers += [dict(arch=arch, **r) for r in conv_layer_times(arch, _LAYER_ROWS.value)]
    print(f"\nconvolution layers alone, {_LAYER_ROWS.value} rows of as many networks "
          "(us per row, wall time of one op call / rows)")
    header = (f"{'arch':>5} | {'layer':>12} | {'MFLOP':>5} | {'float32':>8} | "
              f"{'bf16 kernels':>12} | {'bf16 kernels+inputs':>19} | {'GFLOP/s':>7}")
    print(header)
    print("-" * len(header))
    for r in layers:
      gflops = r["mflop_per_row"] * 1e-3 / (r["bf16_kernels_inputs_us_per_row"] * 1e-6)
      print(f"{r['arch']:>5} | {r['layer']:>12} | {r['mflop_per_row']:>5.2f} | "
            f"{r['float32_us_per_row']:>8.1f} | {r['bf16_kernels_us_per_row']:>12.1f} | "
            f"{r['bf16_kernels_inputs_us_per_row']:>19.1f} | {gflops:>7.1f}")
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, "arch": _ARCH.value, "num_actions": _ACTIONS.value,
               "active_fraction": _ACTIVE.value, "cpus": os.cpu_count(),
               "amx_disabled_by_env": "TFRL_POPULATION_NO_AMX" in os.environ,
               "amx": pop_ops.kernel_info()["amx"],
               "library_options": list(pop_ops.kernel_info()["options"]),
               "results": rows, "conv_layers": layers}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
