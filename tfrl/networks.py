"""Networks built from `tfrl.layers` by a `LayerPlan`, so one flag swaps the
dense-layer variant everywhere.

Stable layer names, addressable by `--layer_plan` (globs allowed):
  AtariTorso / NatureTorso: `<torso name>/conv_<i>`, `<torso name>/dense_0`
  MLPTorso:                 `<torso name>/dense_<i>`
  ActorCritic heads:        `policy`, `value`
The default torso name is `torso` (so `torso/dense_0`).

Mixed precision: a torso built with `compute_dtype=tf.bfloat16` computes its
layers (and ActorCritic its heads) in bfloat16 on float32 variables, and
ActorCritic returns float32 logits and values (see `tfrl.precision`). The
default float32 builds exactly the graph they built before that option.
"""

import dataclasses
from typing import Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl import precision
from tfrl.layers import spec as spec_lib


@dataclasses.dataclass(frozen=True)
class ConvNetShape:
  """A conv net's layer sizes: `convs` (filters, kernel size, stride), then one
  dense layer of `dense` units. Padding is the user's (the population ops of
  `tfrl.neuroevolution` are VALID only)."""

  convs: Tuple[Tuple[int, int, int], ...]
  dense: int


# The one definition of each conv net, read by the torsos below and by the
# population networks (`tfrl.neuroevolution.population_net`, archs small/large).
CONV_NETS = {
    "atari": ConvNetShape(convs=((16, 8, 4), (32, 4, 2)), dense=256),  # GA3C / DQN 2013
    "nature": ConvNetShape(convs=((32, 8, 4), (64, 4, 2), (64, 3, 1)), dense=512),  # DQN 2015
}


class _ConvTorso(tf.Module):
  """uint8 [B, H, W, C] -> scaled to [0, 1] -> convs -> flatten -> dense,
  in `compute_dtype` from the scaled input on."""

  _SHAPE: ConvNetShape
  _PADDING = "VALID"

  def __init__(self, plan=None, *, compute_dtype=tf.float32, name="torso"):
    super().__init__(name=name)
    self.compute_dtype = precision.check_compute_dtype(compute_dtype, type(self).__name__)
    plan = spec_lib.as_plan(plan)
    self.convs = []
    for i, (filters, kernel, stride) in enumerate(self._SHAPE.convs):
      path = f"{name}/conv_{i}"
      self.convs.append(tl.make_conv2d(filters, kernel, stride, plan.spec_for(path),
                                       activation="relu", padding=self._PADDING, name=path))
    path = f"{name}/dense_0"
    self.dense = tl.make_dense(self._SHAPE.dense, plan.spec_for(path), activation="relu",
                               name=path)

  def __call__(self, obs):
    x = tf.convert_to_tensor(obs)
    x = tf.cast(x, tf.float32) / 255.0 if x.dtype == tf.uint8 else tf.cast(x, tf.float32)
    x = precision.to_compute(x, self.compute_dtype)
    for conv in self.convs:
      x = conv(x)
    x = tf.reshape(x, [-1, x.shape[1] * x.shape[2] * x.shape[3]])
    return self.dense(x)


class AtariTorso(_ConvTorso):
  """GA3C (Babaeizadeh et al. 2017) network: conv 8x8x16 /4, conv 4x4x32 /2
  (SAME padding, as in GA3C's NetworkVP), dense 256; input [B, 84, 84, 4]."""

  _SHAPE = CONV_NETS["atari"]
  _PADDING = "SAME"


class NatureTorso(_ConvTorso):
  """DQN Nature (Mnih et al. 2015) network: 32 8x8 /4, 64 4x4 /2, 64 3x3 /1
  (VALID), dense 512."""

  _SHAPE = CONV_NETS["nature"]
  _PADDING = "VALID"


# The conv torsos by CONV_NETS' names (GA3C's --torso).
CONV_TORSOS = {"atari": AtariTorso, "nature": NatureTorso}


class MLPTorso(tf.Module):
  """Flatten -> dense(h) -> activation, for each h in hidden_sizes."""

  def __init__(self, hidden_sizes: Sequence[int], plan=None, *, activation="relu",
               compute_dtype=tf.float32, name="torso"):
    super().__init__(name=name)
    self.compute_dtype = precision.check_compute_dtype(compute_dtype, type(self).__name__)
    hidden_sizes = tuple(hidden_sizes)
    if not hidden_sizes or any(not isinstance(h, int) or h < 1 for h in hidden_sizes):
      raise ValueError(f"MLPTorso: hidden_sizes must be positive ints, got {hidden_sizes!r}.")
    plan = spec_lib.as_plan(plan)
    self.hidden = []
    for i, units in enumerate(hidden_sizes):
      path = f"{name}/dense_{i}"
      self.hidden.append(tl.make_dense(units, plan.spec_for(path), activation=activation,
                                       name=path))

  def __call__(self, obs):
    x = tf.cast(tf.convert_to_tensor(obs), tf.float32)
    if x.shape.rank != 2:
      x = tf.reshape(x, [tf.shape(x)[0], -1]) if x.shape[1:].num_elements() is None else \
          tf.reshape(x, [-1, x.shape[1:].num_elements()])
    x = precision.to_compute(x, self.compute_dtype)
    for layer in self.hidden:
      x = layer(x)
    return x


class ActorCritic(tf.Module):
  """Shared torso with a policy head (`policy`) and a value head (`value`).

  `__call__(obs)` returns `(logits [B, A], value [B])`, float32 whatever
  the torso's `compute_dtype` (the heads compute in it too).
  """

  def __init__(self, num_actions: int, torso: tf.Module, plan=None, *, name="actor_critic"):
    super().__init__(name=name)
    if not isinstance(num_actions, int) or num_actions < 1:
      raise ValueError(f"ActorCritic: num_actions must be a positive int, got {num_actions!r}.")
    if not callable(torso):
      raise ValueError(f"ActorCritic: torso must be callable, got {torso!r}.")
    plan = spec_lib.as_plan(plan)
    self.num_actions = num_actions
    self.torso = torso
    self.policy = tl.make_dense(num_actions, plan.spec_for("policy"), name="policy")
    self.value = tl.make_dense(1, plan.spec_for("value"), name="value")

  @property
  def compute_dtype(self) -> tf.DType:
    """The dtype the torso and heads compute in (float32 for torsos without one)."""
    return getattr(self.torso, "compute_dtype", tf.float32)

  def __call__(self, obs):
    h = self.torso(obs)
    logits = tf.cast(self.policy(h), tf.float32)   # no op when already float32
    return logits, tf.cast(tf.squeeze(self.value(h), axis=-1), tf.float32)


def _orthogonal(shape, gain: float, seed) -> tf.Tensor:
  """An orthogonal matrix of [prod(shape[:-1]), shape[-1]], reshaped to `shape`, times `gain`."""
  rows, cols = int(np.prod(shape[:-1])), int(shape[-1])
  a = tf.random.stateless_normal([max(rows, cols), min(rows, cols)], seed=seed)
  q, r = tf.linalg.qr(a)
  q *= tf.sign(tf.linalg.diag_part(r))  # a uniform draw over orthogonal matrices
  q = q if rows >= cols else tf.transpose(q)
  return gain * tf.reshape(q[:rows, :cols], shape)


def orthogonal_init(network: ActorCritic, *, hidden_gain: float = float(np.sqrt(2.0)),
                    policy_gain: float = 0.01, value_gain: float = 1.0, seed: int = 0) -> int:
  """Re-initialises the plain dense and conv kernels of a built ActorCritic
  orthogonally (Saxe et al. 2014), biases to zero: gain sqrt(2) for the
  torso's ReLU layers, 0.01 for the policy head (near-uniform first policy),
  1 for the value head, as PPO's Atari setting does. Compressed layers
  (circulant, pruned) keep their own initialisation. Returns how many
  layers it set."""
  gains = {id(network.policy): policy_gain, id(network.value): value_gain}
  count = 0
  for i, layer in enumerate(tl.layers_of(network)):
    if type(layer).__name__ not in ("Dense", "Conv2D") or not hasattr(layer, "kernel"):
      continue
    gain = gains.get(id(layer), hidden_gain)
    layer.kernel.assign(_orthogonal(layer.kernel.shape, gain, seed=[seed, i]))
    if getattr(layer, "bias", None) is not None:
      layer.bias.assign(tf.zeros_like(layer.bias))
    count += 1
  return count
