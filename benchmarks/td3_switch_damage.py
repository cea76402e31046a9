"""What pruning a circulant layer at once does to a dual-mode GST actor.

    python benchmarks/td3_switch_damage.py --checkpoint=LOGDIR/checkpoints/ckpt-150000 \\
        --preset=td3_halfcheetah_gst --output=benchmarks/results/td3_switch_damage.json

Restores the actor of a `--preset` run's checkpoint taken while its large
layers were block-circulant, and evaluates it (`--episodes` deterministic
episodes, as TD3's evaluation) as it is and after each of its dual-mode
layers is switched to the dense kernel it represents (the same outputs) and
pruned by magnitude at once to each of `--sparsities`: the case against
pruning a circulant kernel to its ratio in one step (docs/gst_td3.md).
"""

import os
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks import td3_preset  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top

_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "A TD3 checkpoint (ckpt-<step>) of the "
                                  "preset's run, taken while its layers were circulant.")
_PRESET = flags.DEFINE_string("preset", "td3_halfcheetah_gst", "The run's preset.")
_SPARSITIES = flags.DEFINE_list("sparsities", ["0.5", "0.75", "0.875", "0.9"],
                                "Sparsities to prune the switched layers to at once.")
_EPISODES = flags.DEFINE_integer("episodes", 10, "Evaluation episodes per variant.")
_OUTPUT = flags.DEFINE_string("output", "td3_switch_damage.json", "JSON path.")


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tfrl.layers import dual_mode  # pylint: disable=import-outside-toplevel
  from tfrl.layers import schedules  # pylint: disable=import-outside-toplevel
  from tfrl.td3 import loop  # pylint: disable=import-outside-toplevel
  if not os.path.exists(_CHECKPOINT.value + ".index"):
    raise app.UsageError(f"--checkpoint={_CHECKPOINT.value}: no such TF checkpoint "
                         "(give the path without .index)")
  config = td3_preset.td3_config(_PRESET.value, [f"logdir={tempfile.mkdtemp()}"])
  run = loop.TD3Run(config)
  tf.train.Checkpoint(learner=run.learner).read(_CHECKPOINT.value).expect_partial()
  layers = [m for m in run.learner.actor.submodules if isinstance(m, dual_mode.DualModeDense)]
  if not layers or not all(bool(l.circulant_mode.numpy()) for l in layers):
    raise app.UsageError("the checkpoint's actor has no dual-mode layer still circulant")
  act = tf.function(run.learner.actor)
  saved = [l.kernel.numpy() for l in layers]

  def evaluate():
    return loop.evaluate(act, run.eval_env, _EPISODES.value, 10_000)

  rows = [{"variant": "circulant", "eval_return": evaluate()}]
  for sparsity in [float(s) for s in _SPARSITIES.value]:
    changes = []
    for layer, kernel in zip(layers, saved):
      layer.circulant_mode.assign(True)
      layer.kernel.assign(kernel)
      layer.switch_to_dense()
      layer.mask.assign(schedules.magnitude_mask(layer.kernel, tf.constant(sparsity)))
      changes.append(float(np.linalg.norm(kernel * (1 - layer.mask.numpy()))
                           / np.linalg.norm(kernel)))
    rows.append({"variant": f"switched, pruned at once to {sparsity}", "sparsity": sparsity,
                 "relative_kernel_change": changes, "eval_return": evaluate()})
  run.close()
  for row in rows:
    print(f"{row['variant']:<40} eval return {row['eval_return']:9,.0f}")
  record = {"benchmark": "td3_switch_damage", "checkpoint": _CHECKPOINT.value,
            "preset": _PRESET.value, "episodes": _EPISODES.value, "rows": rows,
            "provenance": provenance.provenance()}
  runs.write_json(record, _OUTPUT.value)
  print(f"JSON: {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
