"""GST (Lee et al. 2021): per-layer circulant-or-pruned plan + reward-aware pruning.

Default plan rule (`LayerSpec(kind="gst")`): a dense layer whose fan-in and
fan-out are both >= `gst_min_dim` (default 64) is compressed block-circulant
(`block_size`) from step 0: with `gst_mode="dual"` (the default, GST's dual-mode
compression) a `DualModeDense`, which becomes the dense kernel it represents
and is pruned by the reward-aware target once that target reaches its
circulant ratio (`tfrl.layers.dual_mode`); with `gst_mode="fixed"` a
`BlockCirculantDense` for the whole run. Every other layer (input, output and
conv layers) is a pruned layer with the `reward_aware` schedule from step 0.
`RewardAwareController` drives the target sparsity of all of them.
`--layer_plan` overrides the rule per layer.

Reward-aware rule (`RewardAwareController.update`), applied each time the
learner calls it (TD3 and GA3C: every `--pruning_frequency` optimizer steps
between `--pruning_begin` and `--pruning_end`, see `decision_due`):
  * wait (nothing changes) until `window` episode returns have been recorded
    since the last decision: every decision sees a fresh window, so one bad
    stretch of episodes cannot trigger a run of back-offs (with overlapping
    windows, 0.9 fell to 0 in nine consecutive decisions on HalfCheetah);
  * m = mean of the last `window` episode returns; R = best m so far
    (the reference, -inf at the start); scale = max(|R|, reward_scale);
  * if m >= R - tolerance * scale (the return holds up):
      s <- min(s + step_up, max_sparsity) and R <- max(R, m);   "raise"
  * elif m < R - backoff * scale (the return dropped):
      s <- max(s - step_down, min_sparsity);                     "backoff"
  * else: s unchanged.                                           "hold"
The new s is written into the `sparsity_target` of every reward-aware layer
of the given modules (with `distribution="erk"`, spread over each module's
layers by ERK, `tfrl.layers.distribution`); each layer re-prunes to it on its
next pruning step (backing off re-enables the smallest pruned weights, at zero).
"""

import math
from typing import Iterable

import numpy as np
import tensorflow as tf

from tfrl.layers import base
from tfrl.layers import circulant
from tfrl.layers import distribution
from tfrl.layers import dual_mode
from tfrl.layers import pruned
from tfrl.layers import spec as spec_lib
from tfrl.layers.reward_aware_config import RewardAwareConfig


def chooses_circulant(spec: spec_lib.LayerSpec, fan_in: int, units: int) -> bool:
  """The GST plan rule: a layer is block-circulant when its fan-in and fan-out
  are both >= spec.gst_min_dim, else pruned (reward-aware)."""
  return min(fan_in, units) >= spec.gst_min_dim


class GSTDense(base.Layer):
  """Dense layer that picks its variant at build time.

  `inner` is the chosen layer: when min(fan_in, units) >= spec.gst_min_dim a
  `DualModeDense` (spec.gst_mode "dual") or a `BlockCirculantDense` ("fixed"),
  else a `PrunedDense` with the `reward_aware` schedule.
  """

  is_wrapper = True

  def __init__(self, units: int, spec: spec_lib.LayerSpec, *, activation=None,
               with_bias=True, kernel_scale=1.0, name=None):
    super().__init__(activation=None, name=name)
    base.check_positive_int("units", units, type(self).__name__)
    if not isinstance(spec, spec_lib.LayerSpec):
      raise ValueError(f"GSTDense: spec must be a LayerSpec, got {spec!r}.")
    self.units = units
    self.spec = spec
    self._inner_kwargs = dict(activation=activation, with_bias=with_bias,
                              kernel_scale=kernel_scale)

  def _build(self, input_shape):
    fan_in = int(input_shape[-1])
    if chooses_circulant(self.spec, fan_in, self.units) and self.spec.gst_mode == "dual":
      self.inner = dual_mode.DualModeDense(
          self.units, self.spec.replace(kind="pruned", schedule="reward_aware"),
          name="dual_mode", **self._inner_kwargs)
    elif chooses_circulant(self.spec, fan_in, self.units):
      self.inner = circulant.BlockCirculantDense(
          self.units, self.spec.block_size, method=self.spec.circulant_method, name="circulant",
          **self._inner_kwargs)
    else:
      self.inner = pruned.PrunedDense(
          self.units, self.spec.replace(kind="pruned", schedule="reward_aware"),
          name="pruned", **self._inner_kwargs)
    self.inner.plan_name = getattr(self, "plan_name", self.name)
    self.inner(tf.zeros([1, fan_in]))  # builds the inner layer now.

  def _forward(self, x):
    return self.inner(x)


def reward_aware_layers(modules) -> list:
  if isinstance(modules, tf.Module):
    modules = [modules]
  found = []
  for module in modules:
    for m in (module,) + tuple(module.submodules):
      if (isinstance(m, pruned.Pruning) and m.spec.schedule == "reward_aware" and m.built
          and not m.is_packed and m not in found):
        found.append(m)
  return found


class RewardAwareController(tf.Module):
  """Adapts the target sparsity of reward-aware layers to the episodic return.

  Checkpointable (sparsity, reference and the return window are variables).
  Usage, in a Python training loop:

      controller = RewardAwareController(config)
      ...
      controller.record_return(episode_return)       # at each episode end
      if pruning step: controller.update([actor, critic])
  """

  def __init__(self, config: RewardAwareConfig = RewardAwareConfig(), name=None):
    super().__init__(name=name)
    if not isinstance(config, RewardAwareConfig):
      raise ValueError(f"Expected a RewardAwareConfig, got {config!r}.")
    self.config = config
    self.sparsity = tf.Variable(config.initial_sparsity, dtype=tf.float32, trainable=False)
    self.reference = tf.Variable(-math.inf, dtype=tf.float32, trainable=False)
    self.returns = tf.Variable(tf.zeros([config.window]), trainable=False)
    self.num_returns = tf.Variable(0, dtype=tf.int64, trainable=False)
    # num_returns at the last decision: the next one needs `window` more.
    self.decided_at = tf.Variable(0, dtype=tf.int64, trainable=False)

  def record_return(self, episode_return: float):
    i = int(self.num_returns.numpy()) % self.config.window
    self.returns[i].assign(float(episode_return))
    self.num_returns.assign_add(1)

  def decide(self) -> str:
    """Applies the rule once to the controller's state; returns the decision."""
    c = self.config
    count = int(self.num_returns.numpy())
    if count - int(self.decided_at.numpy()) < c.window:
      return "wait"
    self.decided_at.assign(count)
    m = float(np.mean(self.returns.numpy()))
    ref = float(self.reference.numpy())
    s = float(self.sparsity.numpy())
    scale = max(abs(ref), c.reward_scale) if math.isfinite(ref) else c.reward_scale
    if m >= ref - c.tolerance * scale:
      self.sparsity.assign(min(s + c.step_up, c.max_sparsity))
      self.reference.assign(max(ref, m))
      return "raise"
    if m < ref - c.backoff * scale:
      self.sparsity.assign(max(s - c.step_down, c.min_sparsity))
      return "backoff"
    return "hold"

  @staticmethod
  def decision_due(spec: spec_lib.LayerSpec, steps_before: int, steps_after: int) -> bool:
    """Whether optimizer steps (steps_before, steps_after] cross a multiple of
    `spec.frequency` that lies in [spec.begin_step, spec.end_step]."""
    freq = spec.frequency
    if steps_after // freq <= steps_before // freq:
      return False
    step = steps_after // freq * freq
    return spec.begin_step <= step <= spec.end_step

  def update(self, modules: Iterable[tf.Module]) -> str:
    """`decide()`, then writes the sparsity into every reward-aware layer: the
    same for each (`uniform`), or spread over each module's layers by ERK so that
    they keep (1 - s) of their weights in all (`erk`; a module is a network)."""
    decision = self.decide()
    s = float(self.sparsity.numpy())
    for module in [modules] if isinstance(modules, tf.Module) else modules:
      layers = reward_aware_layers(module)
      if self.config.distribution == "erk" and layers:
        targets = distribution.erk_sparsities(
            {i: tuple(int(d) for d in layer.kernel.shape) for i, layer in enumerate(layers)}, s)
      else:
        targets = {i: s for i in range(len(layers))}
      for i, layer in enumerate(layers):
        layer.sparsity_target.assign(targets[i])
    return decision
