"""TD3 actor and critic MLPs built from `tfrl.layers` by a LayerPlan.

Layer names (for `--layer_plan`): `actor/dense_<i>`, `actor/out`,
`critic_1/dense_<i>`, `critic_1/out`, `critic_2/...`. Target networks are
built with the same names (so they get the same variants).

Mixed precision (`compute_dtype=tf.bfloat16`): the input is cast to bfloat16,
so every layer's matmul runs in it (the layers cast their float32 kernels to
the input's dtype), and the last layer's output is cast back to float32
before the actor's tanh and the critics' loss (`tfrl.precision`).
"""

from typing import Sequence

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl import precision
from tfrl.layers import spec as spec_lib


def layer_shapes(obs_dim: int, action_dim: int, hidden_sizes: Sequence[int]) -> dict:
  """Network name -> layer name -> (fan-in, fan-out), for the actor and both critics
  (what `tfrl.layers.distribution.resolve` spreads a target over)."""
  def mlp(name, fan_in, fan_out):
    sizes = [fan_in, *hidden_sizes]
    layers = {f"{name}/dense_{i}": (sizes[i], sizes[i + 1]) for i in range(len(hidden_sizes))}
    layers[f"{name}/out"] = (sizes[-1], fan_out)
    return layers
  return {"actor": mlp("actor", obs_dim, action_dim),
          "critic_1": mlp("critic_1", obs_dim + action_dim, 1),
          "critic_2": mlp("critic_2", obs_dim + action_dim, 1)}


class Actor(tf.Module):
  """obs -> relu MLP -> tanh -> scaled to the action box [low, high]."""

  def __init__(self, action_low, action_high, hidden_sizes: Sequence[int], plan=None,
               *, compute_dtype=tf.float32, name="actor"):
    super().__init__(name=name)
    self.compute_dtype = precision.check_compute_dtype(compute_dtype, "Actor")
    plan = spec_lib.as_plan(plan)
    low = np.asarray(action_low, np.float32)
    high = np.asarray(action_high, np.float32)
    if low.shape != high.shape or low.ndim != 1 or not np.all(high > low):
      raise ValueError(f"Actor: need 1-D action bounds with high > low, got {low}, {high}.")
    self.action_dim = int(low.shape[0])
    self._scale = tf.constant((high - low) / 2.0)
    self._offset = tf.constant((high + low) / 2.0)
    self.hidden = [tl.make_dense(h, plan.spec_for(f"{name}/dense_{i}"), activation="relu",
                                 name=f"{name}/dense_{i}") for i, h in enumerate(hidden_sizes)]
    self.out = tl.make_dense(self.action_dim, plan.spec_for(f"{name}/out"), name=f"{name}/out")

  def __call__(self, obs):
    x = precision.to_compute(tf.cast(obs, tf.float32), self.compute_dtype)
    for layer in self.hidden:
      x = layer(x)
    return tf.tanh(tf.cast(self.out(x), tf.float32)) * self._scale + self._offset


class Critic(tf.Module):
  """(obs, action) -> Q, a relu MLP over their concatenation."""

  def __init__(self, hidden_sizes: Sequence[int], plan=None, *, compute_dtype=tf.float32,
               name="critic"):
    super().__init__(name=name)
    self.compute_dtype = precision.check_compute_dtype(compute_dtype, "Critic")
    plan = spec_lib.as_plan(plan)
    self.hidden = [tl.make_dense(h, plan.spec_for(f"{name}/dense_{i}"), activation="relu",
                                 name=f"{name}/dense_{i}") for i, h in enumerate(hidden_sizes)]
    self.out = tl.make_dense(1, plan.spec_for(f"{name}/out"), name=f"{name}/out")

  def __call__(self, obs, action):
    x = tf.concat([tf.cast(obs, tf.float32), tf.cast(action, tf.float32)], axis=-1)
    x = precision.to_compute(x, self.compute_dtype)
    for layer in self.hidden:
      x = layer(x)
    return tf.squeeze(tf.cast(self.out(x), tf.float32), axis=-1)


class DeterministicPolicy(tf.Module):
  """Export wrapper: `__call__(obs) -> {"action": actor(obs)}` (tfrl.export format)."""

  def __init__(self, actor: Actor, name=None):
    super().__init__(name=name)
    self.actor = actor

  def __call__(self, obs):
    return {"action": self.actor(obs)}
