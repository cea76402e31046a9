"""Dense vs block-circulant (b = 4..64; fft and matmul) vs pruned layers.

For each size (fan_in = fan_out = n) and variant: forward + backward time of
one batch (tf.function, median of --repeats after a warm-up), the stored
kernel parameters and the compression ratio. Prints one table and writes
JSON (--out).

    PYTHONPATH=. python benchmarks/layers.py --sizes=256,512,1024 --batch=256
"""

import json
import os
import platform
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl import layers as tl  # pylint: disable=g-import-not-at-top

flags.DEFINE_list("sizes", ["256", "512", "1024"], "Square layer sizes n (n x n kernels).")
flags.DEFINE_list("block_sizes", ["4", "8", "16", "32", "64"], "Circulant block sizes.")
flags.DEFINE_integer("batch", 256, "Batch size.")
flags.DEFINE_integer("repeats", 30, "Timed repetitions (median reported).")
flags.DEFINE_string("out", "/tmp/tfrl_layers_benchmark.json", "JSON output path.")
FLAGS = flags.FLAGS


def _variants(block_sizes):
  yield "dense", tl.LayerSpec(kind="dense")
  for b in block_sizes:
    yield f"circ b={b} fft", tl.LayerSpec(kind="circulant", block_size=b)
  for b in block_sizes:
    yield f"circ b={b} mm", tl.LayerSpec(kind="circulant", block_size=b,
                                          circulant_method="matmul")
  yield "pruned 90%", tl.LayerSpec(kind="pruned", schedule="constant", target_sparsity=0.9)
  yield "pruned 2:4", tl.LayerSpec(kind="pruned", schedule="nm", nm=(2, 4))


def _time(layer, x, repeats):
  @tf.function
  def step(inp):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(layer(inp)))
    return tape.gradient(loss, layer.trainable_variables)

  step(x)
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    grads = step(x)
    _ = grads[0].numpy()
    times.append(time.perf_counter() - t0)
  return float(np.median(times))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  record = provenance.provenance()
  sizes = [int(s) for s in FLAGS.sizes]
  blocks = [int(b) for b in FLAGS.block_sizes]
  rows = []
  for n in sizes:
    x = tf.random.normal([FLAGS.batch, n])
    dense_ms = None
    for name, spec in _variants(blocks):
      layer = tl.make_dense(n, spec)
      layer(x)
      ms = 1000 * _time(layer, x, FLAGS.repeats)
      dense_ms = dense_ms or ms
      report = tl.compression_report(layer)["total"]
      rows.append(dict(n=n, variant=name, fwd_bwd_ms=ms, speedup_vs_dense=dense_ms / ms,
                       stored_params=report["stored_params"],
                       compression_ratio=report["compression_ratio"], bytes=report["bytes"]))
  print(f"batch {FLAGS.batch}, forward+backward, median of {FLAGS.repeats}; "
        f"TF {tf.__version__}, {platform.processor() or platform.machine()}")
  print(f"{'n':>5} {'variant':<14} {'ms':>8} {'vs dense':>8} {'params':>9} {'compr.':>7} "
        f"{'bytes':>9}")
  for r in rows:
    print(f"{r['n']:>5} {r['variant']:<14} {r['fwd_bwd_ms']:>8.3f} {r['speedup_vs_dense']:>7.2f}x "
          f"{r['stored_params']:>9d} {100 * r['compression_ratio']:>6.1f}% {r['bytes']:>9d}")
  with open(FLAGS.out, "w") as f:
    json.dump(dict(provenance=record, batch=FLAGS.batch, repeats=FLAGS.repeats,
                   tf=tf.__version__, rows=rows), f, indent=1)
  print(f"JSON: {FLAGS.out}")


if __name__ == "__main__":
  app.run(main)
