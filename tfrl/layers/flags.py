"""absl flags that select the layer variant, shared by every entry point.

Entry points (GA3C, GA/ES, TD3) call `define_layer_flags()` at import time
and build `layer_flags(FLAGS)` (a `LayerFlags`, by `tfrl.flagconfig`) in
`main`, whose `plan()` and `reward_aware()` are what library code sees.

    python -m tfrl.td3 --dense_layer=gst --circulant_block_size=16 \
        --target_sparsity=0.9 --pruning_schedule=reward_aware \
        --layer_plan="actor/out=dense;critic*/dense_0=pruned:schedule=nm"
"""

import dataclasses

from absl import flags

from tfrl import flagconfig
from tfrl.layers import reward_aware_config
from tfrl.layers import spec as spec_lib


@dataclasses.dataclass(frozen=True)
class LayerFlags:
  """The layer flags, one per field (name, default and help written once)."""

  dense_layer: str = flagconfig.field(
      "dense", "Variant of every dense layer (conv: dense/pruned).",
      choices=tuple(spec_lib.KINDS))
  circulant_block_size: int = flagconfig.field(8, "Block size b of block-circulant layers.")
  circulant_method: str = flagconfig.field(
      "fft", "Circulant compute: fft (rfft/irfft) or matmul (materialised kernel, same "
      "values).", choices=("fft", "matmul"))
  target_sparsity: float = flagconfig.field(
      0.9, "Final sparsity of pruned layers (upper bound for reward_aware).")
  pruning_schedule: str = flagconfig.field(
      "polynomial", "Sparsity schedule of pruned layers.",
      choices=tuple(spec_lib.SCHEDULES))
  nm: str = flagconfig.field("2:4", "N:M of the nm schedule, e.g. 2:4.")
  pruning_begin: int = flagconfig.field(0, "First pruning step (optimizer steps).")
  pruning_end: int = flagconfig.field(100_000, "Last pruning step (optimizer steps).")
  pruning_frequency: int = flagconfig.field(
      1000, "Steps between pruning / controller updates.")
  pruning_initial_sparsity: float = flagconfig.field(
      0.0, "Initial sparsity (polynomial schedule and the reward-aware controller).")
  dst_drop_fraction: float = flagconfig.field(
      0.3, "Initial DST drop fraction (cosine-decayed).")
  dst_regrow: str = flagconfig.field(
      "random", "DST regrowth: random (SET) or gradient (RigL).",
      choices=tuple(spec_lib.REGROW))
  gst_min_dim: int = flagconfig.field(
      64, "GST rule: dense layers with fan-in and fan-out >= this are circulant.")
  gst_mode: str = flagconfig.field(
      "dual", "GST's large layers: dual (block-circulant until the reward-aware target "
      "sparsity reaches their circulant ratio, then pruned by it) or fixed (block-circulant "
      "for the whole run).", choices=tuple(spec_lib.GST_MODES))
  gst_switch_ramp: int = flagconfig.field(
      100_000, "GST dual mode: optimizer steps over which a switched layer's sparsity climbs "
      "from 0 to its reward-aware target (cubic, as Zhu & Gupta's schedule); 0: at once.")
  sparsity_distribution: str = flagconfig.field(
      "uniform", "How a network's --target_sparsity (or the reward-aware target) is spread "
      "over its pruned layers: uniform (each the same) or erk (Erdos-Renyi-Kernel: small "
      "layers denser; TD3).",
      choices=tuple(spec_lib.DISTRIBUTIONS))
  layer_plan: str = flagconfig.field(
      "", "Per-layer overrides: name=kind[:key=value...];... (names may be globs), "
      "e.g. 'actor/dense_1=circulant:block_size=16;critic*/out=dense'.")
  gst_window: int = flagconfig.field(10, "Reward-aware: episodes in the return window.")
  gst_tolerance: float = flagconfig.field(
      0.05, "Reward-aware: raise sparsity while mean return >= best - tolerance * "
      "scale.")
  gst_backoff: float = flagconfig.field(
      0.2, "Reward-aware: lower sparsity when mean return < best - backoff * scale.")
  gst_step_up: float = flagconfig.field(0.05, "Reward-aware: sparsity increase per raise.")
  gst_step_down: float = flagconfig.field(
      0.1, "Reward-aware: sparsity decrease per backoff.")
  gst_min_sparsity: float = flagconfig.field(0.0, "Reward-aware: lowest sparsity.")
  gst_reward_scale: float = flagconfig.field(
      1.0, "Reward-aware: scale = max(|best return|, this) for the thresholds.")


  def spec(self) -> spec_lib.LayerSpec:
    """The default LayerSpec of every layer."""
    return spec_lib.LayerSpec(
        kind=self.dense_layer, block_size=self.circulant_block_size,
        circulant_method=self.circulant_method, target_sparsity=self.target_sparsity,
        schedule=self.pruning_schedule, nm=_parse_nm(self.nm), begin_step=self.pruning_begin,
        end_step=self.pruning_end, frequency=self.pruning_frequency,
        initial_sparsity=self.pruning_initial_sparsity, drop_fraction=self.dst_drop_fraction,
        regrow=self.dst_regrow, gst_min_dim=self.gst_min_dim, gst_mode=self.gst_mode,
        switch_ramp_steps=self.gst_switch_ramp)

  def plan(self) -> spec_lib.LayerPlan:
    """The LayerPlan: the default spec, with the `layer_plan` overrides."""
    return spec_lib.LayerPlan.parse(self.layer_plan, default=self.spec(),
                                    distribution=self.sparsity_distribution)

  def reward_aware(self) -> reward_aware_config.RewardAwareConfig:
    """The reward-aware controller's thresholds (bounded by the pruning flags)."""
    return reward_aware_config.RewardAwareConfig(
        initial_sparsity=self.pruning_initial_sparsity,
        min_sparsity=min(self.gst_min_sparsity, self.pruning_initial_sparsity),
        max_sparsity=self.target_sparsity, window=self.gst_window,
        tolerance=self.gst_tolerance, backoff=self.gst_backoff, step_up=self.gst_step_up,
        step_down=self.gst_step_down, reward_scale=self.gst_reward_scale,
        distribution=self.sparsity_distribution)


def define_layer_flags(flag_values: flags.FlagValues = flags.FLAGS):
  """Defines the layer flags (idempotent: skips flags already defined)."""
  flagconfig.define(LayerFlags, fv=flag_values)


def _parse_nm(text):
  try:
    n, m = (int(v) for v in text.replace("x", ":").split(":"))
  except ValueError as e:
    raise ValueError(f"--nm must look like 2:4, got {text!r}.") from e
  return (n, m)


def layer_flags(fv: flags.FlagValues = flags.FLAGS) -> LayerFlags:
  """The LayerFlags of the flags (`flagconfig.build`)."""
  return flagconfig.build(LayerFlags, fv=fv)


def layer_plan_from_flags(fv: flags.FlagValues = flags.FLAGS) -> spec_lib.LayerPlan:
  """The LayerPlan for the layer flags (default spec + `--layer_plan`)."""
  return layer_flags(fv).plan()


def reward_aware_config_from_flags(
    fv: flags.FlagValues = flags.FLAGS) -> reward_aware_config.RewardAwareConfig:
  return layer_flags(fv).reward_aware()
