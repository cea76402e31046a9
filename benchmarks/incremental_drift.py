"""How far incremental inference drifts from the full forward, by refresh period.

Plays Pong with --rows random population networks (the GA's initialisation:
noise times `ParamLayout.init_scale`) for --steps steps of random actions.
At every step each row's logits come from incremental inference
(`PopulationNetwork.incremental_logits`, the state carried from the step
before, every `refresh_steps`-th step of the episode computed in full) and,
as the reference, from the full forward of the same frames. For each
--refresh_steps value it reports the largest and the median relative error
max|incremental - full| / max|full| over rows and steps, and how many greedy
actions differ. The same frames, networks and actions are used for every value.

    python benchmarks/incremental_drift.py --arch=large --weight_dtype=bfloat16

Prints a table and writes JSON (--output). Not a timing: the speed side of
the trade is the fresh rows' cost in `delta_layers.py` ("fresh").
"""

import json
import os
import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import population_net as pn  # pylint: disable=g-import-not-at-top
from tfrl.ops import population as pop_ops  # pylint: disable=g-import-not-at-top

_ARCH = flags.DEFINE_string("arch", "large", "Population network arch.")
_DTYPE = flags.DEFINE_string("weight_dtype", "bfloat16", "Kernel dtype (float32, bfloat16).")
_ROWS = flags.DEFINE_integer("rows", 4, "Env slots, each with its own network.")
_STEPS = flags.DEFINE_integer("steps", 1500, "Env steps per refresh period.")
_REFRESH = flags.DEFINE_list("refresh_steps", ["100", "400", "1000", "100000"],
                             "Refresh periods to compare.")
_OUTPUT = flags.DEFINE_string("output", "incremental_drift.json", "JSON results path.")


def main(argv):
  del argv
  record = provenance.provenance()
  pop_ops.load_library()
  from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
  rows = _ROWS.value
  env = AtariEnv("pong", rows, seed=0)
  observation_shape, num_actions = env.observation_shape, env.num_actions
  env.close()
  layout = pn.ParamLayout(pn.NetworkConfig(arch=_ARCH.value, weight_dtype=_DTYPE.value),
                          observation_shape, num_actions)
  net = pn.PopulationNetwork(layout, rows)
  rng = np.random.default_rng(0)
  net.load((layout.init_scale * rng.standard_normal((rows, layout.dim))).astype(np.float32))
  index = tf.range(rows, dtype=tf.int32)
  full = tf.function(lambda obs: net(obs, index, tf.ones([rows], tf.bool)))
  incremental = tf.function(lambda obs, fresh, state: net.incremental_logits(
      obs, index, fresh, state))
  results = []
  print(f"{'refresh_steps':>13} | {'max rel. error':>14} | {'median':>9} | "
        f"{'greedy actions differing':>24}")
  for period in (int(r) for r in _REFRESH.value):
    env = AtariEnv("pong", rows, seed=0)  # the same games for every period
    obs = env.reset()
    state = net.incremental_initial_state(rows)
    errors, differing = [], 0
    for t in range(_STEPS.value):
      logits, state = incremental(obs, tf.fill([rows], t % period == 0), state)
      got, want = logits.numpy(), full(obs).numpy()
      errors.append(float((np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)).max()))
      differing += int((got.argmax(1) != want.argmax(1)).sum())
      actions = tf.random.stateless_uniform([rows], [t, 0], 0, num_actions, tf.int32)
      obs = env.step(actions, tf.range(rows))[0]
    env.close()
    results.append({"refresh_steps": period, "max_relative_error": max(errors),
                    "median_relative_error": float(np.median(errors)),
                    "greedy_actions_differing": differing,
                    "greedy_actions": rows * _STEPS.value})
    print(f"{period:>13} | {max(errors):>14.2e} | {np.median(errors):>9.2e} | "
          f"{differing:>12} of {rows * _STEPS.value:<9}", flush=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, "arch": _ARCH.value, "weight_dtype": _DTYPE.value,
               "rows": rows, "steps": _STEPS.value, "results": results}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
