"""Typed description of which layer variant to build: `LayerSpec` and `LayerPlan`.

A `LayerSpec` says how one dense (or conv) layer is built: plain dense,
block-circulant, pruned with a sparsity schedule, or GST (which picks
circulant or reward-aware pruning per layer by a documented rule, see
`tfrl.layers.gst`). A `LayerPlan` is a default spec plus per-layer overrides
addressed by stable layer names (`actor/dense_1`, `torso/conv_0`, `policy`),
with shell-style globs (`critic*/dense_1`). Library code receives these
objects; only entry points read flags (see `tfrl.layers.flags`).
"""

import dataclasses
import fnmatch
from typing import Optional, Tuple

KINDS = ("dense", "circulant", "pruned", "gst")
SCHEDULES = ("constant", "polynomial", "nm", "dst", "reward_aware")
REGROW = ("random", "gradient")
GST_MODES = ("dual", "fixed")
DISTRIBUTIONS = ("uniform", "erk")  # see tfrl.layers.distribution


@dataclasses.dataclass(frozen=True)
class LayerSpec:
  """How to build one dense/conv layer.

  Attributes:
    kind: `dense`, `circulant` (BlockCirculantDense), `pruned` (PrunedDense /
      PrunedConv2D with `schedule`), or `gst` (circulant when both fan-in and
      fan-out are >= `gst_min_dim`, else pruned with the reward-aware schedule).
    block_size: circulant block size b (parameters = in * out / b).
    circulant_method: `fft` (rfft / irfft) or `matmul` (materialised kernel,
      same values and gradients; faster on CPU for small b).
    target_sparsity: final fraction of zero weights for `constant`,
      `polynomial`, `dst`; the upper bound for `reward_aware`. Ignored by `nm`
      (whose sparsity is 1 - N/M).
    schedule: `constant` (target from `begin_step`), `polynomial` (Zhu & Gupta
      2017: s_t = s_f + (s_i - s_f) (1 - (t - t0) / (t1 - t0))^power),
      `nm` (N:M structured, N largest of every M consecutive inputs),
      `dst` (dynamic sparse training: constant sparsity, every `frequency`
      steps drop the smallest-magnitude `drop_fraction` of the active weights,
      cosine-decayed to 0 at `end_step`, and regrow as many by `regrow`),
      `reward_aware` (sparsity set by `tfrl.layers.gst.RewardAwareController`).
    nm: (N, M) for the `nm` schedule, 0 < N < M.
    begin_step / end_step / frequency: pruning happens at steps t with
      begin_step <= t <= end_step and (t - begin_step) % frequency == 0 (the
      step counts calls to `tfrl.layers.after_update`).
    initial_sparsity: s_i of the polynomial schedule.
    polynomial_power: exponent of the polynomial schedule (3 in Zhu & Gupta).
    drop_fraction: initial DST drop fraction (0.3 in RigL).
    regrow: DST regrowth criterion, `random` (SET) or `gradient` (RigL; needs
      `after_update(module, grads_and_vars)`, else falls back to random).
    gst_min_dim: GST rule threshold, see `kind`.
    gst_mode: what GST's large layers do over training: `dual` (block-circulant
      until the reward-aware target sparsity reaches their circulant ratio,
      then pruned by it; `tfrl.layers.dual_mode`) or `fixed` (block-circulant
      for the whole run).
    switch_ramp_steps: dual mode: steps (calls to `after_update`) over which a
      switched layer's sparsity climbs from 0 to its reward-aware target on the
      polynomial schedule's curve (`polynomial_power`); 0: at once.
    seed: seed for random regrowth / initialisation choices.
  """

  kind: str = "dense"
  block_size: int = 8
  circulant_method: str = "fft"
  target_sparsity: float = 0.9
  schedule: str = "polynomial"
  nm: Tuple[int, int] = (2, 4)
  begin_step: int = 0
  end_step: int = 100_000
  frequency: int = 1000
  initial_sparsity: float = 0.0
  polynomial_power: float = 3.0
  drop_fraction: float = 0.3
  regrow: str = "random"
  gst_min_dim: int = 64
  gst_mode: str = "dual"
  switch_ramp_steps: int = 100_000
  seed: int = 0

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"LayerSpec.kind must be one of {KINDS}, got {self.kind!r}.")
    if self.schedule not in SCHEDULES:
      raise ValueError(
          f"LayerSpec.schedule must be one of {SCHEDULES}, got {self.schedule!r}.")
    if self.gst_mode not in GST_MODES:
      raise ValueError(f"LayerSpec.gst_mode must be one of {GST_MODES}, got {self.gst_mode!r}.")
    if self.regrow not in REGROW:
      raise ValueError(f"LayerSpec.regrow must be one of {REGROW}, got {self.regrow!r}.")
    if self.circulant_method not in ("fft", "matmul"):
      raise ValueError(
          f"LayerSpec.circulant_method must be fft or matmul, got {self.circulant_method!r}.")
    if not isinstance(self.block_size, int) or self.block_size < 1:
      raise ValueError(f"LayerSpec.block_size must be an int >= 1, got {self.block_size!r}.")
    for field in ("target_sparsity", "initial_sparsity"):
      value = getattr(self, field)
      if not 0.0 <= value < 1.0:
        raise ValueError(f"LayerSpec.{field} must be in [0, 1), got {value!r}.")
    if not 0.0 <= self.drop_fraction <= 1.0:
      raise ValueError(f"LayerSpec.drop_fraction must be in [0, 1], got {self.drop_fraction!r}.")
    nm = tuple(self.nm)
    if len(nm) != 2 or not 0 < nm[0] < nm[1]:
      raise ValueError(f"LayerSpec.nm must be (N, M) with 0 < N < M, got {self.nm!r}.")
    object.__setattr__(self, "nm", (int(nm[0]), int(nm[1])))
    if self.begin_step < 0 or self.end_step < self.begin_step:
      raise ValueError(
          "LayerSpec needs 0 <= begin_step <= end_step, got "
          f"begin_step={self.begin_step}, end_step={self.end_step}.")
    if not isinstance(self.switch_ramp_steps, int) or self.switch_ramp_steps < 0:
      raise ValueError(f"LayerSpec.switch_ramp_steps must be an int >= 0, got "
                       f"{self.switch_ramp_steps!r}.")
    if self.frequency < 1:
      raise ValueError(f"LayerSpec.frequency must be >= 1, got {self.frequency!r}.")
    if self.polynomial_power <= 0:
      raise ValueError(f"LayerSpec.polynomial_power must be > 0, got {self.polynomial_power!r}.")
    if self.gst_min_dim < 1:
      raise ValueError(f"LayerSpec.gst_min_dim must be >= 1, got {self.gst_min_dim!r}.")

  def replace(self, **changes) -> "LayerSpec":
    return dataclasses.replace(self, **changes)


def _parse_value(field_type, text):
  if field_type in ("int", int):
    return int(text)
  if field_type in ("float", float):
    return float(text)
  if "Tuple" in str(field_type):
    sep = ":" if ":" in text else "x"
    return tuple(int(v) for v in text.split(sep))
  return text


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(LayerSpec)}


def parse_overrides(text: str) -> dict:
  """Parses `kind[:key=value[:key=value...]]` into LayerSpec field changes.

  Example: `circulant:block_size=16`, `pruned:schedule=nm:nm=2x4`,
  `pruned:target_sparsity=0.8:schedule=dst` (`nm` values use `x` or `:`
  between N and M when given as `nm=2x4`).
  """
  parts = [p for p in text.split(":") if p]
  if not parts:
    raise ValueError(f"Empty layer override {text!r}.")
  changes = {}
  if "=" not in parts[0]:
    changes["kind"] = parts.pop(0)
  for part in parts:
    if "=" not in part:
      raise ValueError(f"Layer override {text!r}: expected key=value, got {part!r}.")
    key, value = part.split("=", 1)
    if key not in _FIELD_TYPES:
      raise ValueError(
          f"Layer override {text!r}: unknown LayerSpec field {key!r}; "
          f"known: {sorted(_FIELD_TYPES)}.")
    changes[key] = _parse_value(_FIELD_TYPES[key], value)
  return changes


@dataclasses.dataclass(frozen=True)
class LayerPlan:
  """A default LayerSpec plus per-layer overrides, by layer name or glob.

  `overrides` is a tuple of `(pattern, changes)` with `changes` a dict of
  LayerSpec field values applied on top of `default`. An exact name match
  wins over a glob; among globs the first listed wins. `distribution` says how
  the pruned layers' target sparsity is spread over a network (`uniform`, or
  `erk`, which the algorithm resolves into per-layer targets with
  `tfrl.layers.distribution.resolve`).
  """

  default: LayerSpec = LayerSpec()
  overrides: Tuple[Tuple[str, dict], ...] = ()
  distribution: str = "uniform"

  def __post_init__(self):
    if self.distribution not in DISTRIBUTIONS:
      raise ValueError(f"LayerPlan.distribution must be one of {DISTRIBUTIONS}, got "
                       f"{self.distribution!r}.")
    if not isinstance(self.default, LayerSpec):
      raise ValueError(f"LayerPlan.default must be a LayerSpec, got {type(self.default)}.")
    overrides = []
    for item in self.overrides:
      if len(item) != 2 or not isinstance(item[0], str) or not isinstance(item[1], dict):
        raise ValueError(f"LayerPlan override must be (pattern, dict), got {item!r}.")
      self.default.replace(**item[1])  # validates the changes early.
      overrides.append((item[0], dict(item[1])))
    object.__setattr__(self, "overrides", tuple(overrides))

  def __hash__(self):
    return hash((self.default, tuple((p, tuple(sorted(c.items()))) for p, c in self.overrides),
                 self.distribution))

  @classmethod
  def parse(cls, text: str, default: Optional[LayerSpec] = None,
            distribution: str = "uniform") -> "LayerPlan":
    """Parses `--layer_plan`: `name=override;name2=override2` (see parse_overrides).

    Example: `actor/dense_1=circulant:block_size=16;critic*/dense_0=pruned`.
    """
    overrides = []
    for entry in (text or "").replace(",", ";").split(";"):
      entry = entry.strip()
      if not entry:
        continue
      if "=" not in entry:
        raise ValueError(f"--layer_plan entry {entry!r} must look like name=kind[:key=value].")
      name, override = entry.split("=", 1)
      overrides.append((name.strip(), parse_overrides(override.strip())))
    return cls(default=default or LayerSpec(), overrides=tuple(overrides),
               distribution=distribution)

  def spec_for(self, name: str) -> LayerSpec:
    """The LayerSpec for the layer called `name` (e.g. `actor/dense_0`)."""
    for pattern, changes in self.overrides:
      if pattern == name:
        return self.default.replace(**changes)
    for pattern, changes in self.overrides:
      if fnmatch.fnmatchcase(name, pattern):
        return self.default.replace(**changes)
    return self.default


def as_plan(plan_or_spec) -> LayerPlan:
  """Accepts None, a LayerSpec or a LayerPlan; returns a LayerPlan."""
  if plan_or_spec is None:
    return LayerPlan()
  if isinstance(plan_or_spec, LayerSpec):
    return LayerPlan(default=plan_or_spec)
  if isinstance(plan_or_spec, LayerPlan):
    return plan_or_spec
  raise ValueError(f"Expected a LayerPlan or LayerSpec, got {type(plan_or_spec).__name__}.")
