"""Population networks: P different networks evaluated in one batch.

Every weight carries a leading population dimension ([P, K, N] kernels, [P, N]
biases). A batch row b is evaluated by network `index[b]`, and only rows with
`active[b]` cost arithmetic. Dense layers go through the masked heterogeneous
batching op `tfrl.ops.population.population_matmul`; convolutions through
`population_conv2d`, the same grouped GEMM reading the im2col patches
(K = kh * kw * c_in, ordered as a conv2d kernel) in place from the image, so
no patch buffer is written (with `conv_input_dtype="bfloat16"` the
convolution inputs are rounded to bfloat16 and multiplied in AMX tiles where
the CPU has them). On the pure-TF reference path (`use_op=False`,
or when the op library is not built) the im2col is explicit
(`tf.image.extract_patches`) followed by tf.gather + tf.matmul. Each layer's
bias and ReLU are the op's epilogue (on the reference path, a gather, add and
relu), and uint8 frames enter the first convolution as they are, scaled by
1/255 inside the op.

Architectures (`NetworkConfig.arch`):
  * `mlp`: dense layers `hidden` (ReLU, or tanh: `activation`) then the policy layer.
  * `small`: the GA3C/DQN-2013 net, conv 16 8x8/4, conv 32 4x4/2, dense 256.
  * `large`: the Nature DQN net, conv 32 8x8/4, 64 4x4/2, 64 3x3/1, dense 512
    (the net of Such et al. 2017).
The conv nets' sizes are those of `tfrl.networks.CONV_NETS`; padding is VALID.

Layer variants come from a `tfrl.layers.LayerPlan` (by layer name:
`torso/conv_i`, `torso/dense_i`, `policy`): `dense`; `circulant` (the genome
holds one length-b vector per b x b block, C[r, c] = w[(r - c) mod b], as
`tfrl.layers.BlockCirculantDense`; D shrinks by b); `pruned` (a fixed random
mask of `target_sparsity`, drawn from the spec seed; the genome holds only the
kept weights); `gst` (circulant when fan-in and fan-out are >= gst_min_dim,
else pruned; a search takes no gradient steps and has no reward-aware target,
so `gst_mode` does not apply: its large layers stay circulant). Convolutions have no circulant variant and fall back to dense.
The genome is the flat vector of compact parameters; `expand` turns it into
the full kernels that the op multiplies (incremental inference can read
circulant kernels compact instead: `kernel_storage`); the layout's `heads.ActionHead`
turns the policy outputs into actions (argmax, or bounded continuous actions).
"""

import dataclasses
import zlib
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfrl import networks
from tfrl.layers import circulant
from tfrl.layers import gst
from tfrl.layers import spec as spec_lib
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import kernel_storage
from tfrl.ops import population as pop_ops
from tfrl.ops import population_delta as delta_ops
# The network's config and its archs, defined with the run's settings (free of
# TensorFlow); named here too, where the network is built.
from tfrl.neuroevolution.settings import ARCHS  # pylint: disable=unused-import
from tfrl.neuroevolution.settings import NetworkConfig

# The conv archs are the nets of tfrl.networks (with VALID padding).
_CONV_NETS = {"small": networks.CONV_NETS["atari"], "large": networks.CONV_NETS["nature"]}


@dataclasses.dataclass
class LayerLayout:
  """One layer's place in the flat genome and how to expand it."""

  name: str
  kind: str           # dense | circulant | pruned
  k: int              # fan-in (kh * kw * c_in for convolutions)
  n: int              # fan-out
  conv: Optional[Tuple[int, int]]  # (kernel size, stride) or None
  relu: bool
  kernel_offset: int
  kernel_size: int
  bias_offset: int
  block_size: int = 0
  kept: Optional[np.ndarray] = None  # pruned: flat kept positions in [K*N]

  def expand(self, flat: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """[n, D] flat genomes -> ([n, K, N] kernel, [n, N] bias) float32."""
    count = flat.shape[0]
    compact = flat[:, self.kernel_offset:self.kernel_offset + self.kernel_size]
    bias = flat[:, self.bias_offset:self.bias_offset + self.n]
    if self.kind == "dense":
      kernel = compact.reshape(count, self.k, self.n)
    elif self.kind == "pruned":
      kernel = np.zeros((count, self.k * self.n), np.float32)
      kernel[:, self.kept] = compact
      kernel = kernel.reshape(count, self.k, self.n)
    else:  # circulant: the vectors' layout is tfrl.layers.circulant's.
      kernel = np.take(compact, circulant.kernel_index(self.k, self.n, self.block_size), axis=1)
    return kernel.astype(np.float32, copy=False), np.ascontiguousarray(bias)


def _layer_kind(spec: spec_lib.LayerSpec, k: int, n: int, conv: bool) -> str:
  kind = spec.kind
  if kind == "gst":  # the rule of tfrl.layers.gst
    kind = "circulant" if gst.chooses_circulant(spec, k, n) else "pruned"
  if kind == "circulant" and conv:
    kind = "dense"  # documented fallback, as in tfrl.layers.
  return kind


class ParamLayout:
  """The flat genome layout of an architecture for given observations and head
  (`head` None: Discrete(num_actions))."""

  def __init__(self, config: NetworkConfig, observation_shape: Sequence[int],
               num_actions: int, head: Optional[heads.ActionHead] = None):
    self.config = config
    self.observation_shape = tuple(int(d) for d in observation_shape)
    self.head = head or heads.discrete(num_actions)
    self.num_actions = self.head.size
    plan = spec_lib.as_plan(config.layer_plan)
    layers: List[LayerLayout] = []
    scales: List[np.ndarray] = []
    offset = 0

    def add(name, k, n, conv, relu):
      nonlocal offset
      spec = plan.spec_for(name)
      kind = _layer_kind(spec, k, n, conv is not None)
      kept, block = None, 0
      if kind == "dense":
        size = k * n
      elif kind == "pruned":
        rng = np.random.default_rng([spec.seed, zlib.crc32(name.encode())])
        keep = max(1, int(round((1.0 - spec.target_sparsity) * k * n)))
        kept = np.sort(rng.choice(k * n, size=keep, replace=False))
        size = keep
      else:
        block = spec.block_size
        size = (-(-n // block)) * (-(-k // block)) * block
      # Variance-preserving init: std 1/sqrt(effective fan-in).
      fan_in = k * (size / float(k * n)) if kind == "pruned" else k
      std = 1.0 / np.sqrt(max(fan_in, 1.0))
      if name == "policy":
        std *= 0.1
      layout = LayerLayout(name, kind, k, n, conv, relu, offset, size,
                           offset + size, block, kept)
      layers.append(layout)
      scales.append(np.full(size, std, np.float32))
      scales.append(np.zeros(n, np.float32))
      offset += size + n

    if config.arch == "mlp":
      if len(self.observation_shape) != 1:
        raise ValueError(
            f"arch 'mlp' needs flat observations, got shape {self.observation_shape}.")
      width = self.observation_shape[0]
      for i, h in enumerate(config.hidden):
        add(f"torso/dense_{i}", width, int(h), None, True)
        width = int(h)
    else:
      if len(self.observation_shape) != 3:
        raise ValueError(f"arch {config.arch!r} needs [H, W, C] observations, got "
                         f"shape {self.observation_shape}.")
      h, w, c = self.observation_shape
      net = _CONV_NETS[config.arch]
      for i, (filters, ks, stride) in enumerate(net.convs):
        oh, ow = (h - ks) // stride + 1, (w - ks) // stride + 1
        if oh < 1 or ow < 1:
          raise ValueError(f"observation {self.observation_shape} too small for "
                           f"arch {config.arch!r}.")
        add(f"torso/conv_{i}", ks * ks * c, filters, (ks, stride), True)
        h, w, c = oh, ow, filters
      width = h * w * c
      add("torso/dense_0", width, net.dense, None, True)
      width = net.dense
    add("policy", width, self.num_actions, None, False)
    self.layers = layers
    self.dim = offset
    self.init_scale = np.concatenate(scales)

  def expand(self, flat: np.ndarray) -> List[Tuple[np.ndarray, np.ndarray]]:
    flat = np.asarray(flat, np.float32)
    if flat.ndim != 2 or flat.shape[1] != self.dim:
      raise ValueError(f"flat parameters must be [n, {self.dim}], got {flat.shape}.")
    return [layer.expand(flat) for layer in self.layers]

  def describe(self) -> str:
    full = sum(l.k * l.n + l.n for l in self.layers)
    kinds = ",".join(f"{l.name}:{l.kind}" for l in self.layers)
    extra = "" if self.config.activation == "relu" else f" {self.config.activation}"
    extra += "" if self.head.is_discrete else f" -> {self.head.describe()}"
    return f"{self.config.arch} D={self.dim} (full {full}) [{kinds}]{extra}"


def preprocess(obs: tf.Tensor) -> tf.Tensor:
  """uint8 frames -> float32 in [0, 1]; float observations unchanged."""
  if obs.dtype == tf.uint8:
    return tf.cast(obs, tf.float32) * (1.0 / 255.0)
  return tf.cast(obs, tf.float32)


@dataclasses.dataclass
class StagedWeights:
  """Networks' weights as a `PopulationNetwork`'s variables hold them."""
  kernels: List[np.ndarray]  # per layer [capacity, K, N], the weight dtype
  biases: List[np.ndarray]   # per layer [capacity, N] float32
  loaded: int                # rows [0, loaded) hold networks


class PopulationNetwork(tf.Module):
  """Up to `capacity` networks of one layout, evaluated together.

  Usage:
    net = PopulationNetwork(layout, capacity=64)
    net.load(flat_params)                         # [n <= 64, D] float32
    logits = net(obs, index, active)              # [B, A]; rows by network
  """

  def __init__(self, layout: ParamLayout, capacity: int, name=None,
               compact_circulant: bool = False):
    """compact_circulant: store float32 circulant kernels compact (see
    `kernel_storage`) for `incremental_logits` with the op; `__call__` then
    expands them at each call, and they cannot be folded into (VBN)."""
    super().__init__(name=name)
    if capacity < 1:
      raise ValueError(f"capacity must be >= 1, got {capacity}.")
    self.layout = layout
    self.capacity = int(capacity)
    self.use_op = pop_ops.have_op() if layout.config.use_op is None else layout.config.use_op
    if self.use_op:
      pop_ops.load_library()  # fail loudly now rather than at trace time.
    self.weight_dtype = tf.as_dtype(layout.config.weight_dtype)
    self.conv_input_dtype = layout.config.conv_input_dtype
    # Only a plain layout's kernels are its genome's (VBN's layout folds into them).
    compact_circulant = compact_circulant and self.use_op and type(layout) is ParamLayout
    self.compact = [bool(compact_circulant and kernel_storage.can_be_compact(
        l, layout.config.weight_dtype)) for l in layout.layers]
    self.kernels = [tf.Variable(tf.zeros([capacity, *self._kernel_shape(i)], self.weight_dtype),
                                trainable=False,
                                name=l.name.replace("/", "_") + "_kernel")
                    for i, l in enumerate(layout.layers)]
    self.biases = [tf.Variable(tf.zeros([capacity, l.n]), trainable=False,
                               name=l.name.replace("/", "_") + "_bias")
                   for l in layout.layers]
    self.loaded = 0

  def stage(self, flat: np.ndarray, staged: Optional["StagedWeights"] = None,
            first_row: int = 0) -> "StagedWeights":
    """Writes [n, D] flat genomes into rows first_row.. of `staged`.

    The weights are cast and laid out as the variables hold them, in numpy
    only (ml_dtypes' bfloat16 rounds as tf.cast does), so this can run in
    another thread while the networks play. `staged` None: a new one whose
    other rows are zero.
    """
    flat = np.asarray(flat, np.float32)
    n = int(flat.shape[0])
    if first_row < 0 or first_row + n > self.capacity:
      raise ValueError(f"rows [{first_row}, {first_row + n}) exceed the capacity "
                       f"{self.capacity}.")
    if staged is None:
      staged = StagedWeights(
          [np.zeros((self.capacity, *self._kernel_shape(i)), self.weight_dtype.as_numpy_dtype)
           for i in range(len(self.layout.layers))],
          [np.zeros((self.capacity, l.n), np.float32) for l in self.layout.layers], 0)
    rows = slice(first_row, first_row + n)
    if not any(self.compact):
      expanded = self.layout.expand(flat)
    elif flat.ndim != 2 or flat.shape[1] != self.layout.dim:
      raise ValueError(f"flat parameters must be [n, {self.layout.dim}], got {flat.shape}.")
    else:
      expanded = [None if compact else layer.expand(flat)
                  for layer, compact in zip(self.layout.layers, self.compact)]
    for i, layer in enumerate(self.layout.layers):
      if self.compact[i]:
        staged.kernels[i][rows] = kernel_storage.compact_kernels(layer, flat)
        staged.biases[i][rows] = flat[:, layer.bias_offset:layer.bias_offset + layer.n]
      else:
        staged.kernels[i][rows], staged.biases[i][rows] = expanded[i]
    staged.loaded = max(staged.loaded, first_row + n)
    return staged

  def load(self, weights) -> None:
    """Loads [n, D] flat genomes (or `stage`d ones) into networks 0..n-1.

    The rest are zeroed. The staged arrays are handed to TF: do not write
    to them afterwards. Every load assigns whole variables. A sliced assign
    (or a tf.gather on a variable) would switch TF's resource variable to
    copy-on-read mode for good, after which every forward copies all P
    kernels before using them (measured: 3x slower dense layers).
    """
    if not isinstance(weights, StagedWeights):
      weights = self.stage(weights)
    for kv, bv, kernel, bias in zip(self.kernels, self.biases, weights.kernels,
                                    weights.biases):
      kv.assign(kernel)
      bv.assign(bias)
    self.loaded = weights.loaded

  def _kernel_shape(self, i: int) -> Tuple[int, ...]:
    layer = self.layout.layers[i]
    return kernel_storage.compact_shape(layer) if self.compact[i] else (layer.k, layer.n)

  def full_kernel(self, i: int) -> tf.Tensor:
    """Layer i's [capacity, K, N] kernels (a dense read of the variable, see
    `load`), expanded when stored compact."""
    kernel = self.kernels[i].value()
    if not self.compact[i]:
      return kernel
    layer = self.layout.layers[i]
    index = kernel_storage.expansion_index(layer)
    return tf.gather(tf.reshape(kernel, [self.capacity, -1]), index, axis=1)

  def __call__(self, obs, index, active):
    """Logits [B, A] of each row's network; rows with active=False are zero.

    Each layer is one op: the bias and ReLU are its epilogue, and uint8
    frames go into the first convolution as they are, scaled by 1/255
    inside it (the same values as `preprocess`).
    """
    index = tf.convert_to_tensor(index, tf.int32)
    active = tf.convert_to_tensor(active, tf.bool)
    obs = tf.convert_to_tensor(obs)
    first_is_conv = self.layout.layers[0].conv is not None
    if obs.dtype == tf.uint8 and first_is_conv:
      h, scale = obs, 1.0 / 255.0
    else:
      h, scale = preprocess(obs), 1.0
    batch = tf.shape(h)[0]
    for i, (layer, bias) in enumerate(zip(self.layout.layers, self.biases)):
      kernel = self.full_kernel(i) if self.compact[i] else self.kernels[i]
      # bias.value(): a dense read of the variable, see `load`.
      if layer.conv is not None:
        ks, stride = layer.conv
        h = pop_ops.population_conv2d(h, kernel, index, active, kernel_size=ks,
                                      stride=stride, input_dtype=self.conv_input_dtype,
                                      input_scale=scale, bias=bias.value(),
                                      relu=layer.relu, use_op=self.use_op)
        scale = 1.0
      else:
        h = pop_ops.population_matmul(tf.reshape(h, [batch, 1, layer.k]), kernel, index,
                                      active, bias=bias.value(), relu=layer.relu and
                                      self.layout.config.activation == "relu",
                                      use_op=self.use_op)[:, 0, :]
        if layer.relu and self.layout.config.activation == "tanh":
          h = tf.tanh(h)
    return h

  def act(self, obs, index, active):
    """The head's actions: greedy [B] int32, or continuous [B, D] float32."""
    return self.layout.head.actions(self(obs, index, active))

  def incremental_state_specs(self, obs_dtype=tf.uint8) -> List[tf.TensorSpec]:
    """Specs of the state of `incremental_logits` (batch dimension None).

    The state is the observation the last step saw (of `obs_dtype`), then
    each layer's output before its bias (what `population_delta_conv2d`
    updates step by step).
    """
    if self.conv_input_dtype == "bfloat16" or self.layout.config.activation != "relu":
      raise ValueError("incremental inference needs float32 convolution inputs and "
                       "ReLU layers.")
    obs_dtype = tf.as_dtype(obs_dtype)
    if obs_dtype != tf.uint8:
      obs_dtype = tf.float32
    return [tf.TensorSpec((None,) + self.layout.observation_shape, obs_dtype)] + [
        tf.TensorSpec((None,) + out_shape, tf.float32)
        for _, _, out_shape in self.delta_geometry()]

  def incremental_initial_state(self, batch: int, obs_dtype=tf.uint8) -> List[tf.Tensor]:
    """A state for `batch` rows (any values do: the first step is fresh)."""
    return [tf.zeros((batch,) + tuple(spec.shape[1:]), spec.dtype)
            for spec in self.incremental_state_specs(obs_dtype)]

  def delta_geometry(self) -> List[Tuple[int, int, Tuple[int, int, int]]]:
    """(kernel_size, stride, output [OH, OW, N]) of each layer as a delta op."""
    geometry = []
    shape = self.layout.observation_shape
    if len(shape) == 1:
      shape = (1, 1) + shape
    for layer in self.layout.layers:
      h, w = shape[0], shape[1]
      if layer.conv is not None:
        ks, stride = layer.conv
      else:  # a dense layer: one window over the whole (flattened) input.
        if h != w:
          raise ValueError(f"incremental inference needs a square input to dense layer "
                           f"{layer.name}, got {h}x{w}.")
        ks, stride = h, 1
      shape = ((h - ks) // stride + 1, (w - ks) // stride + 1, layer.n)
      geometry.append((ks, stride, shape))
    return geometry

  def incremental_logits(self, obs, index, fresh, state):
    """(logits [B, A], new state): one step of incremental inference.

    The same logits as `__call__` (up to float rounding) for rows whose state
    is that of their previous step; rows with `fresh` (a new network or
    episode, or a periodic refresh) are computed in full and need no state.
    Only the inputs that changed since the previous step cost arithmetic
    (`tfrl.ops.population_delta`: one op for the whole network; without the
    op library, each layer's full convolution in plain TensorFlow).
    """
    index = tf.convert_to_tensor(index, tf.int32)
    fresh = tf.convert_to_tensor(fresh, tf.bool)
    obs = tf.convert_to_tensor(obs, state[0].dtype)
    x, x_prev = obs, state[0]
    if len(self.layout.observation_shape) == 1:
      x, x_prev = x[:, None, None, :], x_prev[:, None, None, :]
    scale = 1.0 / 255.0 if x.dtype == tf.uint8 else 1.0
    geometry = self.delta_geometry()
    if self.use_op:  # the whole network as one op (the layer ops chained, bitwise)
      logits, acc = delta_ops.population_delta_net_op(
          x, x_prev, state[1:], [k.value() for k in self.kernels],
          [b.value() for b in self.biases], index, fresh,
          kernel_sizes=[ks for ks, _, _ in geometry], strides=[st for _, st, _ in geometry],
          relus=[layer.relu for layer in self.layout.layers[:-1]], input_scale=scale,
          circulant_blocks=[l.block_size if c else 0
                            for l, c in zip(self.layout.layers, self.compact)])
      return logits, [obs] + acc
    input_bias, input_relu = None, False
    new_state = [obs]
    for i, (layer, (ks, stride, _)) in enumerate(zip(self.layout.layers, geometry)):
      acc = delta_ops.population_delta_conv2d(
          x, x_prev, state[i + 1], self.kernels[i], index, fresh, kernel_size=ks,
          stride=stride, input_scale=scale, input_bias=input_bias,
          input_relu=input_relu, use_op=False)
      new_state.append(acc)
      x, x_prev = acc, state[i + 1]
      scale, input_bias, input_relu = 1.0, self.biases[i].value(), layer.relu
    logits = x[:, 0, 0, :] + tf.gather(self.biases[-1].value(), index)
    return logits, new_state
