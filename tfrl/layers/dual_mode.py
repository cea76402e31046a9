"""GST's dual-mode compression for one dense layer: block-circulant, then pruned.

GST (Lee et al. 2021) uses block-circulant compression while iterative
pruning's compression ratio is still low, and pruning with a reward-aware
target sparsity after; its authors' chip paper (OmniDRL, 2022) calls the pair
dual-mode compression (weight grouping and weight pruning). `DualModeDense`
is one layer that does both:

* **circulant mode** (from step 0): the kernel is block-circulant with block
  size b (the vectors of `BlockCirculantDense`), compression 1 - 1/b; the
  vectors are trained. The dense `kernel` variable holds the matrix they
  define (`to_dense`), refreshed right after every optimizer step
  (`after_apply`), and the forward pass reads it, with its gradient summed
  back onto the vectors (the adjoint of `to_dense`): the same values and
  gradients as expanding the vectors at every call, at one expansion per
  optimizer step instead of one per forward pass. A target network's Polyak
  average of the kernel is then exactly the kernel of its averaged vectors
  (`to_dense` copies entries), so a target switches to the kernel it has
  been averaging all along.
  While circulant, the kernel also gets its own (dense) gradient, so that its
  optimizer state is warm at the switch; its values are overwritten after
  every step all the same. (A global-norm clip, GA3C's, counts that gradient
  too.)
* **the switch** (tfrl's rule): on the first pruning step at which the
  reward-aware target sparsity reaches the circulant compression ratio, the
  layer becomes the dense kernel it represents (`switch_to_dense`: the same
  outputs). Before that point pruning the layer would store more weights than
  the circulant form. It is not pruned to the target at once: a circulant
  kernel holds each value b times, so magnitude pruning to 1 - 1/b drops
  every copy of the smallest 7/8 of its values (b = 8). Measured on
  HalfCheetah's TD3 actor at 150k steps: eval return 5,135 circulant, 4,540
  pruned at once to 0.5, 1,192 to 0.875; a run switched that way fell from a
  training return of 5,280 to 448 within 10k steps. So the switched layer's
  sparsity climbs from 0 to its target over `spec.switch_ramp_steps` on Zhu
  & Gupta's cubic curve, and the compression ratio dips for that while.
* **pruned mode**: a `PrunedDense` with the `reward_aware` schedule: the
  controller (`tfrl.layers.gst.RewardAwareController`) moves its target up
  while the return holds and down when it drops (the smallest pruned weights
  come back, at zero).

The switch needs a maximum target sparsity at least the circulant ratio
(`LayerSpec.target_sparsity >= 1 - 1/b`), else the layer would stay
circulant for good; `DualModeDense` refuses such a spec.
"""

import tensorflow as tf

from tfrl.layers import circulant
from tfrl.layers import dense
from tfrl.layers import pruned
from tfrl.layers import schedules
from tfrl.layers import spec as spec_lib


class _CirculantKernel(tf.Module):
  """A packed circulant layer's kernel: its vectors, expanded when called."""

  def __init__(self, layer: circulant.BlockCirculantDense, name="circulant_kernel"):
    super().__init__(name=name)
    self.layer = layer

  def __call__(self):
    return self.layer.to_dense()


class DualModeDense(pruned.Pruning, dense.Dense):
  """Dense layer, block-circulant until its reward-aware target sparsity reaches
  1 - 1/b, then the equivalent dense kernel pruned by magnitude.

  Args:
    units: output size.
    spec: the LayerSpec (its `block_size`; `schedule` must be `reward_aware`
      and `target_sparsity` at least the circulant compression ratio).
    activation, with_bias, kernel_scale, name: as for `Dense`.
  """

  has_apply_hook = True

  def __init__(self, units, spec: spec_lib.LayerSpec, **kwargs):
    super().__init__(units, **kwargs)
    self._init_pruning(spec)
    if spec.schedule != "reward_aware":
      raise ValueError(f"DualModeDense: the pruned mode's schedule is reward_aware, "
                       f"got {spec.schedule!r}.")

  def _build(self, input_shape):
    super()._build(input_shape)
    self.circulant = circulant.BlockCirculantDense(
        self.units, self.spec.block_size, method="matmul", with_bias=False,
        kernel_scale=self.kernel_scale, name="circulant")
    self.circulant(tf.zeros([1, self.input_size]))
    ratio = self.circulant_ratio
    if self.spec.target_sparsity < ratio:
      raise ValueError(
          f"DualModeDense {getattr(self, 'plan_name', self.name)}: block size "
          f"{self.spec.block_size} compresses {self.input_size}x{self.units} by {ratio:.4f}, "
          f"more than the largest target sparsity {self.spec.target_sparsity}, so the layer "
          "could never switch to pruning; raise --target_sparsity to at least "
          f"{ratio:.4f} or lower --circulant_block_size.")
    self.circulant_mode = tf.Variable(True, trainable=False, name="circulant_mode")
    self.switch_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="switch_step")
    self.kernel.assign(self.circulant.to_dense())
    self._build_pruning()

  @property
  def circulant_ratio(self) -> float:
    """The circulant form's compression ratio, 1 - stored / dense parameters."""
    stored = self.circulant.vectors.shape.num_elements()
    return 1.0 - stored / (self.input_size * self.units)

  def switch_to_dense(self):
    """Leaves circulant mode: the kernel is the circulant's, unpruned (same outputs)."""
    self.kernel.assign(self.circulant.to_dense())
    self.mask.assign(tf.ones_like(self.mask))
    self.circulant_mode.assign(False)

  def _prune(self, step, grad):
    def switch():
      self.switch_to_dense()
      self.switch_step.assign(step)
      return tf.constant(True)

    due = tf.logical_and(self.circulant_mode, self.sparsity_target >= self.circulant_ratio)
    tf.cond(due, switch, lambda: tf.constant(False))
    # In circulant mode the mask stays all ones; after the switch it follows the
    # target, reached along the ramp (see the module doc).
    sparsity = tf.where(self.circulant_mode, 0.0, self.sparsity_target * self._ramp(step))
    self.mask.assign(schedules.magnitude_mask(self.kernel, sparsity))

  def _ramp(self, step):
    """The share of its target a switched layer prunes to at `step`: 0 at the
    switch, 1 after `switch_ramp_steps`, on the cubic curve in between."""
    steps = self.spec.switch_ramp_steps
    if steps == 0:
      return tf.constant(1.0)
    done = tf.cast(step - self.switch_step, tf.float32) / float(steps)
    return 1.0 - (1.0 - tf.clip_by_value(done, 0.0, 1.0)) ** self.spec.polynomial_power

  def after_apply(self):
    """Refreshes the kernel from the vectors while circulant (see the module doc)."""
    if not self._built or self._packed is not None:
      return
    tf.cond(self.circulant_mode,
            lambda: self.kernel.assign(self.circulant.to_dense()).read_value(),
            lambda: tf.identity(self.kernel))

  def _kernel(self):
    if self._packed is not None:
      return self._packed()
    vectors_shape = self.circulant.vectors.shape
    circulant_mode = self.circulant_mode.read_value()

    @tf.custom_gradient
    def routed(kernel, mask, vectors):
      """kernel * mask (the mask is all ones while circulant); the gradient goes
      to the vectors while circulant, and to the kernel (masked) in both modes
      (while circulant only to warm its optimizer state)."""
      del vectors  # only its gradient: the kernel holds its values

      def grad(dw):
        d_vectors = tf.cond(circulant_mode,
                            lambda: circulant.expand_adjoint(dw, vectors_shape),
                            lambda: tf.zeros(vectors_shape))
        return dw * mask, None, d_vectors

      return kernel * mask, grad

    return routed(self.kernel.read_value(), self.mask.read_value(),
                  self.circulant.vectors.read_value())

  def kernel_stats(self):
    if self._packed is not None:
      if isinstance(self._packed, _CirculantKernel):
        stored = float(self.circulant.vectors.shape.num_elements())
        return self.input_size * self.units, tf.constant(stored), tf.constant(4.0 * stored)
      return super().kernel_stats()
    n, nnz, nbytes = super().kernel_stats()
    stored = float(self.circulant.vectors.shape.num_elements())
    return (n, tf.where(self.circulant_mode, stored, nnz),
            tf.where(self.circulant_mode, 4.0 * stored, nbytes))

  def pack(self):
    """Packs the form in use: the circulant vectors, or bitmask plus non-zeros."""
    if not self._built or self._packed is not None:
      return
    if bool(self.circulant_mode.numpy()):
      self._packed = _CirculantKernel(self.circulant)
      del self.kernel
      del self.mask
      del self.step
      del self.sparsity_target
    else:
      super().pack()
      del self.circulant
    del self.circulant_mode
    del self.switch_step
