"""Pruned dense and conv layers: a mask per kernel and a sparsity schedule.

The mask multiplies the kernel in the forward pass, and
`tfrl.layers.after_update` (called after every optimizer step) advances the
layer's step counter, recomputes the mask on the schedule's pruning steps
and re-applies it to the kernel, so pruned weights stay exactly zero through
optimizer updates (momentum / Adam moments cannot revive them).

Schedules (see `LayerSpec` and `schedules.py`): `constant`, `polynomial`
(Zhu & Gupta), `nm` (N:M structured), `dst` (drop / regrow with a cosine-
decayed drop fraction), `reward_aware` (the target sparsity is set from
outside by `tfrl.layers.gst.RewardAwareController`).

Pruning steps are t (number of `after_update` calls so far) with
begin_step <= t <= end_step and ((t - begin_step) % frequency == 0 or
t == end_step); when begin_step == 0 the layer is also pruned when built.

RigL regrowth (`dst` with `regrow="gradient"`, `needs_gradient` is True) reads
the dense gradient of the kernel from `after_update(grads_and_vars)`; the
gradient may be a tensor or a zero-argument callable, which is called only
inside the regrowth branch, i.e. on pruning steps after the first. Without a
gradient the layer falls back to random (SET) regrowth.
"""

import tensorflow as tf

from tfrl.layers import dense
from tfrl.layers import schedules
from tfrl.layers import spec as spec_lib


def pack_bits(mask_flat: tf.Tensor) -> tf.Tensor:
  """Packs a flat {0,1} mask into uint8 (8 entries per byte, little-endian)."""
  n = int(mask_flat.shape[0])
  bits = tf.cast(tf.pad(mask_flat, [[0, (-n) % 8]]) > 0.5, tf.int32)
  bits = tf.reshape(bits, [-1, 8]) * (2 ** tf.range(8))[None, :]
  return tf.cast(tf.reduce_sum(bits, axis=1), tf.uint8)


def unpack_bits(packed: tf.Tensor, n: int) -> tf.Tensor:
  shifts = tf.constant(list(range(8)), dtype=tf.uint8)
  bits = tf.bitwise.bitwise_and(tf.bitwise.right_shift(packed[:, None], shifts[None, :]), 1)
  return tf.reshape(bits, [-1])[:n] > 0


class PackedKernel(tf.Module):
  """A sparse kernel stored as a bitmask (n / 8 bytes) plus its non-zeros.

  Storage is n / 8 + 4 * nnz bytes instead of 4 * n, so a 90 %-sparse
  kernel is ~7.6x smaller on disk; `__call__` rebuilds the dense kernel with
  stock ops (bitwise, where, scatter_nd), so a SavedModel loads without tfrl.
  """

  def __init__(self, kernel: tf.Tensor, mask: tf.Tensor, name="packed_kernel"):
    super().__init__(name=name)
    self.shape = [int(d) for d in kernel.shape]
    self.size = int(kernel.shape.num_elements())
    flat_mask = tf.reshape(mask, [-1])
    values = tf.boolean_mask(tf.reshape(kernel, [-1]), flat_mask > 0.5)
    self.bits = tf.Variable(pack_bits(flat_mask), trainable=False, name="bits")
    self.values = tf.Variable(values, trainable=False, name="values",
                              shape=tf.TensorShape([None]))

  def __call__(self):
    positions = tf.where(unpack_bits(self.bits, self.size))
    flat = tf.scatter_nd(positions, self.values, [self.size])
    return tf.reshape(flat, self.shape)

  @property
  def nbytes(self) -> int:
    return int(self.bits.shape[0]) + 4 * int(tf.size(self.values))


class Pruning:
  """Mixin adding a mask + schedule to a layer with a `kernel` variable."""

  has_update_hook = True

  @property
  def is_packed(self) -> bool:
    """Whether `pack()` froze the kernel into its packed sparse form."""
    return self._packed is not None

  @property
  def needs_gradient(self) -> bool:
    return self.spec.schedule == "dst" and self.spec.regrow == "gradient"

  def _init_pruning(self, spec: spec_lib.LayerSpec):
    if not isinstance(spec, spec_lib.LayerSpec):
      raise ValueError(f"{type(self).__name__}: spec must be a LayerSpec, got {spec!r}.")
    self.spec = spec
    self._packed = None

  def _build_pruning(self):
    spec = self.spec
    self.mask = tf.Variable(tf.ones_like(self.kernel), trainable=False, name="mask")
    self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    initial = spec.initial_sparsity if spec.schedule in ("polynomial", "reward_aware") else 0.0
    self.sparsity_target = tf.Variable(initial, dtype=tf.float32, trainable=False,
                                       name="sparsity_target")
    if spec.begin_step == 0:
      self._prune(tf.constant(0, tf.int64), None)
      self.kernel.assign(self.kernel * self.mask)

  # -- schedule ------------------------------------------------------------

  def _scheduled_sparsity(self, step):
    spec = self.spec
    if spec.schedule in ("constant", "dst"):
      return tf.constant(spec.target_sparsity)
    if spec.schedule == "polynomial":
      return schedules.polynomial_sparsity(step, spec.begin_step, spec.end_step,
                                           spec.initial_sparsity, spec.target_sparsity,
                                           spec.polynomial_power)
    if spec.schedule == "nm":
      return tf.constant(1.0 - spec.nm[0] / spec.nm[1])
    return tf.identity(self.sparsity_target)  # reward_aware: set by the controller.

  def _prune(self, step, grad):
    """Recomputes the mask for pruning step `step` (a scalar int64 tensor).

    `grad`: None, the kernel's gradient, or a callable returning it (dst).
    """
    spec = self.spec
    if spec.schedule == "nm":
      new_mask = schedules.nm_mask(self.kernel, *spec.nm)
    elif spec.schedule == "dst":
      first = tf.equal(step, spec.begin_step)

      def regrow_scores():
        if spec.regrow == "gradient" and grad is not None:
          return tf.abs(tf.convert_to_tensor(grad() if callable(grad) else grad))
        return tf.random.stateless_uniform(
            tf.shape(self.kernel), seed=tf.stack([tf.cast(spec.seed, tf.int64), step]))

      fraction = schedules.cosine_drop_fraction(step, spec.begin_step, spec.end_step,
                                                spec.drop_fraction)
      new_mask = tf.cond(
          first,
          lambda: schedules.magnitude_mask(self.kernel, spec.target_sparsity),
          lambda: schedules.dst_update(self.kernel, self.mask, fraction, regrow_scores()))
    else:
      sparsity = self._scheduled_sparsity(step)
      if spec.schedule != "reward_aware":
        self.sparsity_target.assign(sparsity)
      new_mask = schedules.magnitude_mask(self.kernel, sparsity)
    self.mask.assign(new_mask)

  def _is_pruning_step(self, step):
    spec = self.spec
    in_window = tf.logical_and(step >= spec.begin_step, step <= spec.end_step)
    on_tick = tf.logical_or(tf.equal((step - spec.begin_step) % spec.frequency, 0),
                            tf.equal(step, spec.end_step))
    return tf.logical_and(in_window, on_tick)

  def after_update(self, grads_and_vars=None):
    """Advances the step, prunes on schedule, and zeroes pruned weights."""
    if not self._built or self._packed is not None:
      return
    grad = None
    if grads_and_vars is not None and self.needs_gradient:
      for g, v in grads_and_vars:
        if v is self.kernel and g is not None:
          grad = g  # a tensor or a callable; read only when regrowing.
    step = self.step.assign_add(1)

    def prune():
      self._prune(step, grad)
      return tf.constant(True)

    tf.cond(self._is_pruning_step(step), prune, lambda: tf.constant(False))
    self.kernel.assign(self.kernel * self.mask)

  # -- forward / storage ---------------------------------------------------

  def _kernel(self):
    if self._packed is not None:
      return self._packed()
    if self.spec.schedule == "dst" and self.spec.regrow == "gradient":
      # Value kernel * mask, but a dense gradient (RigL's regrowth criterion);
      # after_update re-zeroes whatever the optimizer moved.
      return self.kernel * self.mask + (self.kernel - tf.stop_gradient(self.kernel)) * (
          1.0 - self.mask)
    return self.kernel * self.mask

  def sparsity(self) -> tf.Tensor:
    return 1.0 - tf.reduce_mean(self.mask)

  def kernel_stats(self):
    if self._packed is not None:
      n = self._packed.size
      nnz = tf.cast(tf.size(self._packed.values), tf.float32)
      return n, nnz, tf.constant(float(self._packed.nbytes))
    n = int(self.kernel.shape.num_elements())
    nnz = tf.reduce_sum(self.mask)
    return n, nnz, float((n + 7) // 8) + 4.0 * nnz

  def pack(self):
    """Replaces kernel + mask by a PackedKernel (bitmask + non-zero values)."""
    if not self._built or self._packed is not None:
      return
    self._packed = PackedKernel(self.kernel * self.mask, self.mask)
    del self.kernel
    del self.mask
    del self.step
    del self.sparsity_target


class PrunedDense(Pruning, dense.Dense):
  """Dense layer with a magnitude-pruning mask driven by `spec.schedule`.

  Args:
    units: output size.
    spec: the LayerSpec giving schedule, target sparsity, N:M, steps.
    activation, with_bias, kernel_scale, name: as for `Dense`.
  """

  def __init__(self, units, spec: spec_lib.LayerSpec, **kwargs):
    super().__init__(units, **kwargs)
    self._init_pruning(spec)

  def _build(self, input_shape):
    super()._build(input_shape)
    self._build_pruning()


class PrunedConv2D(Pruning, dense.Conv2D):
  """Conv2D with a pruning mask on its [kh, kw, in, out] kernel (N:M groups
  run over kh * kw * in for each output channel)."""

  def __init__(self, filters, kernel_size, stride, spec: spec_lib.LayerSpec, **kwargs):
    super().__init__(filters, kernel_size, stride, **kwargs)
    self._init_pruning(spec)

  def _build(self, input_shape):
    super()._build(input_shape)
    self._build_pruning()
