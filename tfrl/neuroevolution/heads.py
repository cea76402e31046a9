"""The population network's head: what its outputs mean for the env's action space.

    head = heads.for_env(env, squash="tanh")   # Discrete or Box, from the env
    actions = head.actions(outputs)            # [B] int32 or [B, D] float32

  * Discrete(n): n logits; the action is their argmax (int32), and the exported
    policy also gives `probs` (their softmax).
  * Box(low, high, (D,)), finite bounds: D outputs y, one per action dimension,
    scaled to the bounds and clipped (float32 [B, D]):
        tanh:   a = clip(mid + half * tanh(y), low, high)
        linear: a = clip(mid + half * y, low, high)
    with mid = (high + low) / 2 and half = (high - low) / 2. tanh keeps every
    output inside the bounds smoothly; linear saturates at them.

Any other action space (MultiDiscrete, a Box of another rank, a Box with an
infinite bound, whose outputs could not be scaled) is refused in one line.
The same ops run in the population network and in the exported policy.
"""

import dataclasses
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution.settings import SQUASHES



@dataclasses.dataclass(frozen=True)
class ActionHead:
  """`size` outputs; `low` / `high` (per dimension) for a Box, None for Discrete."""

  size: int
  low: Optional[Tuple[float, ...]] = None
  high: Optional[Tuple[float, ...]] = None
  squash: str = "tanh"

  def __post_init__(self):
    if int(self.size) < 1:
      raise ValueError(f"an action head needs >= 1 output, got {self.size}.")
    if self.squash not in SQUASHES:
      raise ValueError(f"--action_head must be one of {SQUASHES}, got {self.squash!r}.")
    if (self.low is None) != (self.high is None):
      raise ValueError("a Box head needs both low and high bounds.")
    if self.low is not None:
      low, high = np.asarray(self.low, np.float64), np.asarray(self.high, np.float64)
      if low.shape != (self.size,) or high.shape != (self.size,):
        raise ValueError(f"a Box head of {self.size} outputs needs {self.size} bounds "
                         f"each, got {low.shape} and {high.shape}.")
      if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"the continuous head scales its outputs to the action bounds, "
                         f"which must be finite; got low={low.tolist()}, "
                         f"high={high.tolist()}.")
      if np.any(low > high):
        raise ValueError(f"action bounds with low > high: {low.tolist()} > {high.tolist()}.")

  @property
  def is_discrete(self) -> bool:
    return self.low is None

  def _scale(self):
    """(mid, half, low, high) float32 constants of a Box head."""
    low, high = np.asarray(self.low, np.float64), np.asarray(self.high, np.float64)
    return tuple(tf.constant(v.astype(np.float32))
                 for v in ((high + low) / 2, (high - low) / 2, low, high))

  def actions(self, outputs: tf.Tensor) -> tf.Tensor:
    """The actions of the network outputs [B, size]: [B] int32 or [B, D] float32."""
    if self.is_discrete:
      return tf.argmax(outputs, axis=-1, output_type=tf.int32)
    mid, half, low, high = self._scale()
    y = tf.tanh(outputs) if self.squash == "tanh" else outputs
    return tf.clip_by_value(mid + half * y, low, high)

  def policy_outputs(self, outputs: tf.Tensor) -> dict:
    """The exported policy's outputs (`tfrl.export`): probs and action, or action."""
    if self.is_discrete:
      return {"probs": tf.nn.softmax(outputs, axis=-1), "action": self.actions(outputs)}
    return {"action": self.actions(outputs)}

  def describe(self) -> str:
    if self.is_discrete:
      return f"discrete({self.size})"
    return f"box({self.size}, {self.squash})"


def discrete(num_actions: int) -> ActionHead:
  return ActionHead(int(num_actions))


def for_space(space, squash: str = "tanh") -> ActionHead:
  """The head of a gymnasium action space; ValueError (one line) if it has none."""
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  if isinstance(space, gym.spaces.Discrete):
    return discrete(space.n)
  if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
    return ActionHead(int(space.shape[0]), tuple(float(v) for v in space.low),
                      tuple(float(v) for v in space.high), squash)
  raise ValueError(f"the population network's head serves Discrete and 1-D Box action "
                   f"spaces, not {space}.")


def for_env(env, squash: str = "tanh") -> ActionHead:
  """The head of a batched env: its `action_space` (GymEnv), else `num_actions`."""
  space = getattr(env, "action_space", None)
  if space is not None:
    return for_space(space, squash)
  return discrete(env.num_actions)
