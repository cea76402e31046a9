"""Which inputs a pruned TD3 run still sees: kept weights per input feature.

  python benchmarks/td3_input_masks.py --logdirs=RUN[,RUN...] \\
      --output=benchmarks/results/td3_input_masks_<env>_<machine>.json

Each logdir is a `python -m tfrl.td3` run with checkpoints (finished or not).
From its latest checkpoint, for the actor's and both critics' input layers
that carry a mask (pruned or dynamic-sparse, not circulant or dense): the
kept weights per input row (the observation's features, then for a critic the
action's), and the rows with none left (an input the network no longer
sees). From the replay buffer saved with that checkpoint: each feature's
standard deviation over what it holds. Magnitude rules score a weight by
|w| alone, so a feature on a large scale, whose weights are small, is the
first to lose them; the Spearman rank correlation of kept weights against the
feature's spread says how much of the cut that explains. Prints a table per
run, writes JSON with the provenance. Reads files only: safe beside running
work.
"""

import os
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top
from benchmarks.peers import runs  # pylint: disable=g-import-not-at-top
from tfrl.td3 import checkpoints  # pylint: disable=g-import-not-at-top

NETWORKS = ("actor", "critic_1", "critic_2")

_LOGDIRS = flags.DEFINE_list("logdirs", None, "TD3 runs with a checkpoints/ folder.")
_OUTPUT = flags.DEFINE_string("output", "td3_input_masks.json", "JSON of the results.")


def _variable(reader, name: str) -> Optional[np.ndarray]:
  key = f"learner/{name}/.ATTRIBUTES/VARIABLE_VALUE"
  return reader.get_tensor(key) if reader.has_tensor(key) else None


def spearman(x: np.ndarray, y: np.ndarray) -> Optional[float]:
  """Rank correlation (average ranks for ties); None when either is constant."""
  def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v), dtype=float)
    for value in np.unique(v):  # ties share their mean rank
      r[v == value] = r[v == value].mean()
    return r
  rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
  if rx.std() == 0 or ry.std() == 0:
    return None
  return float(np.corrcoef(rx, ry)[0, 1])


def inspect_run(logdir: str) -> Dict:
  """The input-layer masks of `logdir`'s latest checkpoint, beside its replay's spreads."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  directory = os.path.join(logdir, "checkpoints")
  checkpoint = tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None
  if checkpoint is None:
    raise app.UsageError(f"{logdir} has no checkpoint in checkpoints/: give TD3 runs "
                         f"started with a --logdir.")
  step = int(checkpoint.rsplit("-", 1)[1])
  replay_path = checkpoints.replay_path(checkpoint)
  if not os.path.exists(replay_path):
    raise app.UsageError(f"{checkpoint} has no replay buffer {replay_path}: the feature "
                         f"spreads come from it.")
  with np.load(replay_path) as replay:
    size = int(replay["size"])
    obs_std = replay["obs"][:size].std(axis=0)
    action_std = replay["action"][:size].std(axis=0)
  reader = tf.train.load_checkpoint(checkpoint)
  networks = {}
  for name in NETWORKS:
    mask = _variable(reader, f"{name}/hidden/0/mask")
    if mask is None:
      continue
    kept = mask.sum(axis=1).astype(int)
    spread = obs_std if name == "actor" else np.concatenate([obs_std, action_std])
    networks[name] = {
        "shape": list(mask.shape), "density": float(mask.mean()),
        "kept_per_input": kept.tolist(),
        "inputs_cut_off": [int(i) for i in np.flatnonzero(kept == 0)],
        "spearman_kept_vs_std": spearman(kept, spread)}
  return {"run": os.path.basename(os.path.normpath(logdir)), "logdir": os.path.abspath(logdir),
          "checkpoint_step": step, "replay_size": size, "obs_std": obs_std.tolist(),
          "action_std": action_std.tolist(), "networks": networks}


def print_run(row: Dict) -> None:
  print(f"\n{row['run']} at step {row['checkpoint_step']:,} ({row['replay_size']:,} in replay)")
  names = list(row["networks"])
  if not names:
    print("  no masked input layer (dense or circulant inputs)")
    return
  print(f"  {'input':>6} {'std':>8} " + " ".join(f"{n:>9}" for n in names))
  spreads: List[float] = row["obs_std"] + row["action_std"]
  n_obs = len(row["obs_std"])
  for i, std in enumerate(spreads):
    label = f"o{i}" if i < n_obs else f"a{i - n_obs}"
    cells = []
    for n in names:
      kept = row["networks"][n]["kept_per_input"]
      cells.append(f"{kept[i]:>9}" if i < len(kept) else f"{'':>9}")
    print(f"  {label:>6} {std:>8.2f} " + " ".join(cells))
  for n in names:
    net = row["networks"][n]
    rho = net["spearman_kept_vs_std"]
    print(f"  {n}: density {net['density']:.3f}, inputs cut off {net['inputs_cut_off']}, "
          f"rank correlation kept vs std {'-' if rho is None else f'{rho:+.2f}'}")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not _LOGDIRS.value:
    raise app.UsageError("--logdirs (TD3 runs with checkpoints) is needed.")
  rows = [inspect_run(logdir) for logdir in _LOGDIRS.value]
  for row in rows:
    print_run(row)
  runs.write_json({"benchmark": "td3_input_masks", "rows": rows,
                   "provenance": provenance.provenance()}, _OUTPUT.value)
  print(f"\nwrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
