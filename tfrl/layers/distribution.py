"""How a network's average target sparsity is spread over its pruned layers.

* `uniform`: every pruned layer gets the plan's target sparsity.
* `erk` (Erdős–Rényi-Kernel; Evci et al. 2020, RigL, the distribution
  Graesser et al. 2022 use for sparse deep RL): a layer with fan-in n_in and
  fan-out n_out keeps a density proportional to (n_in + n_out) / (n_in *
  n_out), scaled so that the network's pruned layers keep (1 - s) of their
  weights in all; a layer whose density would exceed 1 stays dense and the
  others are scaled again. Small layers (inputs, outputs) end denser, large
  hidden layers sparser than s.

ERK needs the layers' shapes, which only the algorithm knows before building
its networks: `resolve(plan, shapes)` returns a plan with each scheduled pruned
layer's target written out (TD3 does this; see
`tfrl.td3.networks.layer_shapes`). The reward-aware controller spreads its one
target over each network's layers the same way when its config says `erk`
(`tfrl.layers.gst.RewardAwareController.update`).
"""

import math
from typing import Dict, Mapping, Tuple

from tfrl.layers import spec as spec_lib

DISTRIBUTIONS = spec_lib.DISTRIBUTIONS


def erk_sparsities(shapes: Mapping[str, Tuple[int, ...]], average: float) -> Dict[str, float]:
  """Per-layer sparsities whose kept weights total (1 - average) of all `shapes`'
  (kernel shapes: [n_in, n_out], or a convolution's [h, w, n_in, n_out], whose
  density goes with the sum of its dimensions over their product)."""
  if not 0.0 <= average < 1.0:
    raise ValueError(f"erk_sparsities: average must be in [0, 1), got {average!r}.")
  sizes = {name: math.prod(shape) for name, shape in shapes.items()}
  raw = {name: sum(shape) / math.prod(shape) for name, shape in shapes.items()}
  kept = (1.0 - average) * sum(sizes.values())
  dense = set()
  while True:
    sparse = [name for name in shapes if name not in dense]
    if not sparse:
      break
    scale = (kept - sum(sizes[n] for n in dense)) / sum(raw[n] * sizes[n] for n in sparse)
    over = [n for n in sparse if scale * raw[n] > 1.0]
    if not over:
      break
    dense.add(max(over, key=lambda n: raw[n]))  # the densest first, then scale again
  return {name: 0.0 if name in dense else 1.0 - scale * raw[name] for name in shapes}


def resolve(plan: spec_lib.LayerPlan,
            networks: Mapping[str, Mapping[str, Tuple[int, int]]]) -> spec_lib.LayerPlan:
  """`plan` with each pruned layer's target sparsity set by `plan.distribution`,
  network by network (`networks`: network name -> layer name -> (fan-in,
  fan-out)). Layers the plan does not prune keep their spec and their weights
  do not count. A uniform plan is returned as it is."""
  if plan.distribution == "uniform":
    return plan
  overrides = []
  for layers in networks.values():
    specs = {name: plan.spec_for(name) for name in layers}
    pruned = {name: shape for name, shape in layers.items() if specs[name].kind == "pruned"}
    if not pruned:
      continue
    averages = {specs[name].target_sparsity for name in pruned}
    if len(averages) != 1:
      raise ValueError(f"--sparsity_distribution={plan.distribution} spreads one target over a "
                       f"network; its pruned layers ask for {sorted(averages)}.")
    for name, sparsity in erk_sparsities(pruned, averages.pop()).items():
      overrides.append((name, {"target_sparsity": sparsity,
                               **_changes(specs[name], plan.default)}))
  return spec_lib.LayerPlan(default=plan.default, overrides=tuple(overrides) + plan.overrides,
                            distribution="uniform")


def _changes(spec: spec_lib.LayerSpec, default: spec_lib.LayerSpec) -> dict:
  """How a layer's spec differs from the plan's default (but for its target)."""
  return {f: getattr(spec, f) for f in spec_lib.LayerSpec.__dataclass_fields__
          if getattr(spec, f) != getattr(default, f) and f != "target_sparsity"}


def require_uniform(plan: spec_lib.LayerPlan, algorithm: str):
  if plan.distribution != "uniform":
    raise ValueError(f"--sparsity_distribution={plan.distribution} is for TD3's networks; "
                     f"{algorithm} prunes with --sparsity_distribution=uniform.")
