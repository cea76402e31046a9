"""Virtual batch normalization for population networks (Salimans et al. 2016, 2017).

OpenAI-ES (Salimans et al. 2017, section 2.2) uses virtual batch norm to make
Atari policies sensitive to small parameter perturbations: a *reference
batch* of observations is chosen once at the start of training, and every
hidden layer's pre-activations are normalized by the mean and variance they
have on that batch *in the network being evaluated*. Every perturbed network
of a generation gets its own statistics, from running the reference batch
through it.

For hidden layer l of network p, with pre-bias output y = x W_p (statistics
per output unit; for convolutions per channel, over the reference rows and
the spatial positions):

    mu_p, var_p = mean and variance of y over the reference batch
    h = relu((y - mu_p) / sqrt(var_p + epsilon) + b_p)     # b_p: the layer's bias

The layer's own bias is batch norm's learned shift; there is no separate
learned scale (ReLU is positively homogeneous, so the next layer's weights
absorb it), so the genome is unchanged. The policy (logit) layer is not
normalized. The statistics of layer l are taken with the layers before it
already normalized, as in batch norm.

The statistics are constants while a network plays, so the normalization is
folded into its weights, per output unit: W'_p = W_p * s_p and
b'_p = b_p - mu_p * s_p with s_p = 1 / sqrt(var_p + epsilon). `apply` writes
the folded weights into the `PopulationNetwork`'s variables, so the batched
population forward runs the normalized networks at no cost per step;
`NormalizedLayout` expands a flat vector (genome followed by its statistics)
into the same folded weights, which is how the exported elite carries its
normalization (baked into the kernels and biases of a plain network).

Usage:
    reference = collect_reference_batch(env, 128, rng)     # once per run
    norm = VirtualBatchNorm(network, reference)
    network.load(flat)                                      # [n, D] genomes
    stats = norm.apply(n)                                   # [n, S], folded in
"""

from typing import List, Tuple

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution import population_net
from tfrl.neuroevolution import single_network
from tfrl.ops import population as pop_ops
from tfrl.es.config import VBNConfig


def collect_reference_batch(env, size: int, rng: np.random.Generator,
                            keep_probability: float = 0.01,
                            max_steps: int = 1_000_000) -> np.ndarray:
  """Observations of uniformly random play in all slots of a batched env.

  Each step keeps every slot's observation with probability
  `keep_probability` until `size` are kept; finished slots start new
  episodes (reset here when the env does not auto-reset, as the evaluators'
  envs do not). Returns [size, *env.observation_shape] in the env's dtype.
  """
  if env.num_actions is None:
    raise ValueError("the VBN reference batch needs a discrete action space.")
  obs = env.reset().numpy()
  kept: List[np.ndarray] = []
  count = 0
  for _ in range(max_steps):
    keep = rng.random(env.num_envs) < keep_probability
    if keep.any():
      kept.append(obs[keep].copy())
      count += int(keep.sum())
      if count >= size:
        return np.concatenate(kept)[:size]
    actions = rng.integers(0, env.num_actions, size=env.num_envs).astype(np.int32)
    obs, _, terminated, truncated = env.step(actions)
    obs = obs.numpy()
    if not getattr(env, "auto_reset", True):
      done = np.flatnonzero(terminated.numpy() | truncated.numpy())
      if done.size:
        obs[done] = env.reset(done).numpy()
  raise RuntimeError(f"collected only {count} of {size} reference observations in "
                     f"{max_steps} steps (keep_probability {keep_probability}).")


def hidden_layers(layout) -> List[int]:
  """Indices of the normalized layers (those followed by a ReLU)."""
  return [i for i, layer in enumerate(layout.layers) if layer.relu]


def stats_dim(layout) -> int:
  """Floats of statistics per network: (mean, scale) per unit of each hidden layer."""
  return sum(2 * layout.layers[i].n for i in hidden_layers(layout))


def flatten_stats(stats: List[Tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
  """[(mean [n, N_l], scale [n, N_l]) per hidden layer] -> [n, S]."""
  return np.concatenate([np.concatenate([m, s], axis=1) for m, s in stats],
                        axis=1).astype(np.float32)


def unflatten_stats(layout, flat: np.ndarray) -> List[Tuple[np.ndarray, np.ndarray]]:
  """The inverse of `flatten_stats`."""
  out, offset = [], 0
  for i in hidden_layers(layout):
    n = layout.layers[i].n
    out.append((flat[:, offset:offset + n], flat[:, offset + n:offset + 2 * n]))
    offset += 2 * n
  return out


def fold(kernel: np.ndarray, bias: np.ndarray, mean: np.ndarray, scale: np.ndarray):
  """([n, K, N], [n, N]) weights with the normalization of [n, N] stats folded in."""
  return ((kernel * scale[:, None, :]).astype(np.float32),
          (bias - mean * scale).astype(np.float32))


class NormalizedLayout:
  """A `ParamLayout` whose flat vectors are a genome followed by its VBN statistics.

  `expand` returns the folded (normalized) kernels and biases, so
  `single_network.SingleNetwork(NormalizedLayout(base), flat)` is the plain
  network with the normalization baked in (the exported elite).
  """

  def __init__(self, base: population_net.ParamLayout):
    self.base = base
    self.config = base.config
    self.observation_shape = base.observation_shape
    self.num_actions = base.num_actions
    self.head = base.head
    self.layers = base.layers
    self.genome_dim = base.dim
    self.stats_dim = stats_dim(base)
    self.dim = self.genome_dim + self.stats_dim

  def expand(self, flat: np.ndarray) -> List[Tuple[np.ndarray, np.ndarray]]:
    flat = np.asarray(flat, np.float32)
    if flat.ndim != 2 or flat.shape[1] != self.dim:
      raise ValueError(f"flat genome + VBN statistics must be [n, {self.dim}] "
                       f"({self.genome_dim} + {self.stats_dim}), got {flat.shape}.")
    expanded = self.base.expand(flat[:, :self.genome_dim])
    stats = unflatten_stats(self.base, flat[:, self.genome_dim:])
    weight_dtype = getattr(self.config, "weight_dtype", "float32")
    for i, (mean, scale) in zip(hidden_layers(self.base), stats):
      kernel, bias = expanded[i]
      # The normalization multiplies the kernel the population network holds
      # (rounded when it stores bfloat16), as `VirtualBatchNorm.apply` does.
      expanded[i] = fold(single_network.round_kernel(kernel, weight_dtype), bias, mean, scale)
    return expanded

  def describe(self) -> str:
    return self.base.describe() + f" + VBN ({self.stats_dim} statistics)"


class VirtualBatchNorm:
  """Computes each loaded network's reference-batch statistics and folds them in.

  Args:
    network: a `population_net.PopulationNetwork`.
    reference: [R, *observation_shape] the reference batch.
    config: a `VBNConfig` (its `epsilon` and `max_rows` are used here).
  """

  def __init__(self, network, reference: np.ndarray, config: VBNConfig = VBNConfig()):
    layout = network.layout
    reference = np.asarray(reference)
    if reference.ndim < 1 or tuple(reference.shape[1:]) != tuple(layout.observation_shape):
      shape = ", ".join(map(str, layout.observation_shape))
      raise ValueError(f"VBN reference batch must be [R, {shape}], got {reference.shape}.")
    if reference.shape[0] < 2:
      raise ValueError(f"VBN reference batch needs >= 2 observations, got {reference.shape[0]}.")
    if any(getattr(network, "compact", ())):  # a column scale breaks the circulant
      raise ValueError("virtual batch norm folds into expanded kernels: build the network "
                       "without compact_circulant.")
    self.network = network
    self.config = config
    self.reference = reference
    self.hidden = hidden_layers(layout)
    self._reference = tf.constant(reference)
    self._chunk = max(1, config.max_rows // reference.shape[0])
    self._stats = tf.function(self._chunk_stats,
                              input_signature=[tf.TensorSpec([None], tf.int32)])
    specs = [tf.TensorSpec([network.capacity, layout.layers[i].n], tf.float32)
             for i in self.hidden]
    self._fold = tf.function(self._fold_all, input_signature=[specs, specs])

  def _fold_all(self, means, scales):
    """Folds [capacity, N] statistics into every hidden layer's variables.

    Whole-variable reads and assigns: a sliced assign (or a gather on a
    variable) would switch it to copy-on-read mode for good, see
    `PopulationNetwork.load`. With bfloat16 kernels the product of the stored
    (rounded) kernel and the scale is rounded once, as in
    `NormalizedLayout.expand`.
    """
    net = self.network
    for i, mean, scale in zip(self.hidden, means, scales):
      kernel, bias = net.kernels[i], net.biases[i]
      kernel.assign(tf.cast(tf.cast(kernel.value(), tf.float32) * scale[:, None, :],
                            kernel.dtype))
      bias.assign(bias.value() - mean * scale)

  def _chunk_stats(self, nets):
    """(mean, scale) [len(nets), N] per hidden layer, for networks `nets`."""
    net = self.network
    r = self.reference.shape[0]
    count = tf.shape(nets)[0]
    index = tf.repeat(nets, r)
    obs = tf.tile(self._reference, tf.concat([[count], tf.ones([self.reference.ndim - 1],
                                                                tf.int32)], 0))
    h = population_net.preprocess(obs)
    out = []
    for i in self.hidden:
      layer = net.layout.layers[i]
      if layer.conv is not None:
        ks, stride = layer.conv
        y = pop_ops.population_conv2d(h, net.kernels[i], index, None, kernel_size=ks,
                                      stride=stride, input_dtype=net.conv_input_dtype,
                                      use_op=net.use_op)
      else:
        y = pop_ops.population_matmul(tf.reshape(h, [-1, 1, layer.k]), net.kernels[i],
                                      index, None, use_op=net.use_op)[:, 0, :]
      per_net = tf.reshape(y, [count, -1, layer.n])   # [n, R * positions, N]
      mean, var = tf.nn.moments(per_net, axes=[1])
      scale = tf.math.rsqrt(var + self.config.epsilon)
      bias = tf.gather(net.biases[i].value(), nets)  # dense read, see `_fold_all`
      normed = (per_net - mean[:, None, :]) * scale[:, None, :] + bias[:, None, :]
      h = tf.nn.relu(tf.reshape(normed, tf.shape(y)))
      out.append((mean, scale))
    return out

  def statistics(self, count: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Statistics of the (unnormalized) networks 0..count-1 as loaded."""
    if not 1 <= count <= self.network.loaded:
      raise ValueError(f"VBN statistics for {count} networks, but {self.network.loaded} "
                       f"are loaded.")
    parts = [self._stats(np.arange(s, min(s + self._chunk, count), dtype=np.int32))
             for s in range(0, count, self._chunk)]
    return [(np.concatenate([p[j][0].numpy() for p in parts]),
             np.concatenate([p[j][1].numpy() for p in parts]))
            for j in range(len(self.hidden))]

  def apply(self, count: int) -> np.ndarray:
    """Normalizes networks 0..count-1, just loaded; returns their stats [count, S].

    Call once after each `network.load`: the statistics are folded into the
    loaded weights, so a second call would normalize twice.
    """
    stats = self.statistics(count)
    pad = self.network.capacity - count
    # Unloaded networks keep scale 1, shift 0.
    self._fold([np.pad(m, [[0, pad], [0, 0]]) for m, _ in stats],
               [np.pad(s, [[0, pad], [0, 0]], constant_values=1.0) for _, s in stats])
    return flatten_stats(stats)
