"""What the envs of a gymnasium id share: `GymEnv` (the Python envs) and
`MujocoEnv` (the MuJoCo ops) have the id's spaces, seed their slots alike and
take the same reset and step calls; each steps its slots its own way."""

import gymnasium as gym
import numpy as np
import tensorflow as tf


def check_reset_seeds(indices: np.ndarray, seeds: np.ndarray) -> None:
  """ValueError unless `seeds` is empty or one int in [0, 2^31) per index."""
  if seeds.size and seeds.shape != indices.shape:
    raise ValueError(f"seeds must be empty or one per index ({indices.size}), got "
                     f"{seeds.size}.")
  if seeds.size and (seeds.min() < 0 or seeds.max() > 0x7FFFFFFF):
    raise ValueError(f"seeds must be in [0, 2^31), got {seeds.tolist()}.")


def slot_seed(seed: int, slot: int) -> int:
  """The reset seed of slot `slot`'s first episode when none is given."""
  return seed * 100003 + slot


class GymBatch:
  """`num_envs` slots of one gymnasium id behind the AtariEnv interface.

  A subclass makes its slots, calls `_set_spaces` with one of them, and
  implements `_reset` and `_step`.

  Attributes:
    env_id: the gymnasium id.
    num_envs: number of slots.
    auto_reset: a finished slot starts its next episode at once.
    num_actions: size of a Discrete action space (None for a Box space).
    action_shape: shape of one action ([] for Discrete).
    action_dtype: tf.int32 for Discrete, tf.float32 for Box.
    observation_shape: shape of one observation.
    observation_dtype: tf dtype of the observations.
    render_mode: the gymnasium envs' render mode (None: they do not render).
  """

  def __init__(self, env_id: str, num_envs: int, seed: int, auto_reset: bool):
    if not isinstance(num_envs, int) or num_envs < 1:
      raise ValueError(f"num_envs must be a positive int, got {num_envs!r}.")
    self.env_id = env_id
    self.num_envs = num_envs
    self.auto_reset = auto_reset
    self._seed = seed

  def _set_spaces(self, env: gym.Env) -> None:
    """The spaces, shapes and dtypes of the slots, from one of them."""
    self.observation_space = env.observation_space
    self.action_space = env.action_space
    self.observation_shape = tuple(self.observation_space.shape)
    self.observation_dtype = tf.as_dtype(self.observation_space.dtype)
    self.render_mode = getattr(env, "render_mode", None)
    if isinstance(self.action_space, gym.spaces.Discrete):
      self.num_actions = int(self.action_space.n)
      self.action_shape = ()
      self.action_dtype = tf.int32
    elif isinstance(self.action_space, gym.spaces.Box):
      self.num_actions = None
      self.action_shape = tuple(self.action_space.shape)
      self.action_dtype = tf.float32
    else:
      raise ValueError(f"{type(self).__name__} supports Discrete and Box action spaces, "
                       f"got {self.action_space}.")

  def reset(self, indices=None, only_played: bool = False, seeds=None) -> tf.Tensor:
    """Resets the slots in `indices` (all by default); returns their observations.

    With `only_played`, slots still at the start of an episode they have not
    stepped in (just reset, or reset when their last episode ended) keep it.
    `seeds` (one int in [0, 2^31) per index) seeds each slot's new episode.
    """
    seeds = (tf.zeros([0], tf.int64) if seeds is None
             else tf.convert_to_tensor(seeds, tf.int64))
    obs = self._reset(self._indices(indices), seeds, only_played)
    obs.set_shape([None] + list(self.observation_shape))
    return obs

  def step(self, actions, indices=None):
    """Steps the slots in `indices`; returns (obs, reward, terminated, truncated).

    Finished slots are reset at once (with auto_reset): their returned
    observation is the first one of the next episode.
    """
    actions = tf.convert_to_tensor(actions, self.action_dtype)
    obs, reward, terminated, truncated = self._step(actions, self._indices(indices))
    obs.set_shape([None] + list(self.observation_shape))
    for t in (reward, terminated, truncated):
      t.set_shape([None])
    return obs, reward, terminated, truncated

  def _reset(self, indices: tf.Tensor, seeds: tf.Tensor, only_played: bool) -> tf.Tensor:
    """The observations of slots `indices` after `reset` (seeds: int64, maybe empty)."""
    raise NotImplementedError

  def _step(self, actions: tf.Tensor, indices: tf.Tensor):
    """(obs, reward, terminated, truncated) of `step` (actions: `action_dtype`)."""
    raise NotImplementedError

  def _indices(self, indices) -> tf.Tensor:
    if indices is None:
      return tf.range(self.num_envs, dtype=tf.int32)
    return tf.convert_to_tensor(indices, tf.int32)
