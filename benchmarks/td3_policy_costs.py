"""What a TD3 run's exported policies cost on this machine: bytes and batch-1 latency.

  python benchmarks/td3_policy_costs.py --logdirs=RUN_DENSE,RUN_PRUNING,RUN_GST \\
      --rounds=3 --calls=2000 --output=benchmarks/results/td3_policy_costs_<env>_<machine>.json

Each logdir is a finished `python -m tfrl.td3` run (e.g. one seed of each
preset of benchmarks/td3_study.py, whose folders are named `<preset>_s<seed>`;
a row is named by its run's folder). Its two SavedModels are measured as a
user loads them (`tf.saved_model.load`):

- `policy`: the actor as it trained (masked kernels, circulant vectors);
- `policy_compressed`: the packed copy (circulant vectors, bitmask + non-zeros),
  what the paper's edge setting would ship.

Per policy: the bytes of its `variables/` (the weights on disk) and of the
whole SavedModel; the median microseconds of one call on one observation
(GST's edge setting: batch 1), after `--warmup` calls, over `--calls` calls
per round, rounds interleaved over all policies; and, as a check that the two
compute the same function, the largest action difference between them on
`--check_obs` observations drawn from N(0, 1). Training time per env step
(batch 256) is td3_throughput.py's (`--compare`). Every round waits for a
quiet machine (benchmarks/peers/quiet.py); prints a table, writes JSON with
the provenance.
"""

import os
import statistics
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top
from tfrl.td3 import loop  # pylint: disable=g-import-not-at-top

POLICIES = ("policy", "policy_compressed")

_LOGDIRS = flags.DEFINE_list("logdirs", None, "Finished TD3 runs (their policy/ and "
                             "policy_compressed/ SavedModels).")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds over all policies.")
_CALLS = flags.DEFINE_integer("calls", 2000, "Timed batch-1 calls per policy and round.")
_WARMUP = flags.DEFINE_integer("warmup", 200, "Untimed calls before a policy's first round.")
_CHECK_OBS = flags.DEFINE_integer("check_obs", 256, "Observations on which the two "
                                  "policies of a run are compared.")
_OUTPUT = flags.DEFINE_string("output", "td3_policy_costs.json", "JSON of the results.")
_LOAD_FILE, _MAX_LOAD, _SETTLE = quiet.define_gate_flags()


class Policy:
  """One exported SavedModel, loaded as a user loads it."""

  def __init__(self, logdir: str, kind: str):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    self.path = os.path.join(logdir, kind)
    if not os.path.isdir(self.path):
      raise app.UsageError(f"{logdir} has no {kind}/ SavedModel: give finished TD3 runs.")
    self.kind = kind
    self.model = tf.saved_model.load(self.path)
    self.obs_dim = int(self.model.signatures["serving_default"]
                       .structured_input_signature[1]["obs"].shape[-1])
    self.micros = []

  def act(self, obs: np.ndarray) -> np.ndarray:
    return self.model(obs)["action"].numpy()

  def time_calls(self, calls: int) -> float:
    obs = np.zeros((1, self.obs_dim), np.float32)
    started = time.perf_counter()
    for _ in range(calls):
      self.model(obs)
    return (time.perf_counter() - started) / calls * 1e6


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not _LOGDIRS.value or _ROUNDS.value < 1 or _CALLS.value < 1:
    raise app.UsageError("--logdirs (finished TD3 runs), --rounds >= 1 and --calls >= 1 "
                         "are needed.")
  gate = quiet.Gate(_LOAD_FILE.value, _MAX_LOAD.value, _SETTLE.value)
  rows = []
  for logdir in _LOGDIRS.value:
    live, packed = (Policy(logdir, kind) for kind in POLICIES)
    obs = np.random.default_rng(0).normal(size=(_CHECK_OBS.value, live.obs_dim))
    diff = float(np.max(np.abs(live.act(obs.astype(np.float32))
                               - packed.act(obs.astype(np.float32)))))
    for policy in (live, packed):
      policy.time_calls(_WARMUP.value)
      rows.append({"run": os.path.basename(os.path.normpath(logdir)), "logdir": os.path.abspath(logdir),
                   "policy": policy.kind, "variables_bytes": loop.dir_bytes(
                       os.path.join(policy.path, "variables")),
                   "savedmodel_bytes": loop.dir_bytes(policy.path),
                   "max_action_difference_to_other": diff, "_policy": policy})
  loads = []
  for r in range(_ROUNDS.value):
    loads.append({"round": r, "before": quiet.before_run(f"round {r}", gate)})
    for row in rows:
      row["_policy"].micros.append(row["_policy"].time_calls(_CALLS.value))
    loads[-1]["after"] = quiet.after_run(gate)
  print(f"\n{'run':<40} {'policy':<18} {'weights bytes':>13} {'batch-1 us':>10}")
  for row in rows:
    micros = row.pop("_policy").micros
    row.update(batch1_micros_rounds=micros, batch1_micros_median=statistics.median(micros))
    print(f"{row['run']:<40} {row['policy']:<18} {row['variables_bytes']:>13,} "
          f"{row['batch1_micros_median']:>10.1f}")
  runs.write_json({"benchmark": "td3_policy_costs", "rounds": _ROUNDS.value,
                   "calls": _CALLS.value, "rows": rows, "loads": loads,
                   "gate": gate.settings(),
                   "provenance": provenance.provenance()}, _OUTPUT.value)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
