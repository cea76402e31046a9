"""A batch of any gymnasium environments behind the AtariEnv interface.

The fallback for non-Atari tasks (CartPole, Pendulum, MuJoCo): each call steps
the Python environments through `tf.numpy_function`, so the learners that are
written against `AtariEnv` run unchanged, eagerly or inside `tf.function`.
"""

import threading
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.envs.gym_make import make_gymnasium


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


class GymEnv:
  """`num_envs` copies of one gymnasium environment, auto-resetting.

  Attributes:
    num_envs: number of slots.
    num_actions: size of a Discrete action space (None for a Box space).
    action_shape: shape of one action ([] for Discrete).
    action_dtype: tf.int32 for Discrete, tf.float32 for Box.
    observation_shape: shape of one observation.
    observation_dtype: tf dtype of the observations.
    render_mode: the gymnasium envs' render mode (`render_mode=` of make_kwargs).

  With `auto_reset=False` a finished slot keeps its final observation until
  it is reset (the neuroevolution evaluator resets each new episode itself,
  with that episode's seed). `max_episode_steps` truncates episodes after
  that many steps, on top of the env id's own limit (`make_gymnasium`).
  """

  def __init__(self, env_id: str, num_envs: int, *, seed: int = 0,
               auto_reset: bool = True, max_episode_steps: Optional[int] = None,
               **make_kwargs):
    if not isinstance(num_envs, int) or num_envs < 1:
      raise ValueError(f"num_envs must be a positive int, got {num_envs!r}.")
    self._envs = [make_gymnasium(env_id, max_episode_steps, **make_kwargs)
                  for _ in range(num_envs)]
    self.env_id = env_id
    self.num_envs = num_envs
    self.auto_reset = auto_reset
    self._seed = seed
    self._seeded = [False] * num_envs
    self._played = [True] * num_envs  # stepped since the slot's last reset
    self._locks = [threading.Lock() for _ in range(num_envs)]
    space = self._envs[0].observation_space
    self.observation_space = space
    self.action_space = self._envs[0].action_space
    self.observation_shape = tuple(space.shape)
    self.observation_dtype = tf.as_dtype(space.dtype)
    self.render_mode = getattr(self._envs[0], "render_mode", None)
    self._obs = np.zeros((num_envs,) + self.observation_shape, space.dtype)
    if isinstance(self.action_space, gym.spaces.Discrete):
      self.num_actions = int(self.action_space.n)
      self.action_shape = ()
      self.action_dtype = tf.int32
    elif isinstance(self.action_space, gym.spaces.Box):
      self.num_actions = None
      self.action_shape = tuple(self.action_space.shape)
      self.action_dtype = tf.float32
    else:
      raise ValueError(
          f"GymEnv supports Discrete and Box action spaces, got {self.action_space}.")

  def _indices(self, indices):
    if indices is None:
      return tf.range(self.num_envs, dtype=tf.int32)
    return tf.convert_to_tensor(indices, tf.int32)

  def _check_indices(self, indices: np.ndarray) -> None:
    bad = indices[(indices < 0) | (indices >= self.num_envs)]
    if bad.size:
      raise ValueError(
          f"env index {int(bad[0])} is out of range: allowed 0..{self.num_envs - 1}.")
    if len(np.unique(indices)) != len(indices):
      raise ValueError(f"duplicate env indices in {indices.tolist()}.")

  def _reset_slot(self, i: int, seed=None) -> None:
    if seed is None and not self._seeded[i]:
      seed = slot_seed(self._seed, i)  # Deterministic per slot, once.
    self._seeded[i] = True
    self._obs[i], _ = self._envs[i].reset(seed=seed)
    self._played[i] = False

  def _np_reset(self, indices, seeds, only_played=False):
    self._check_indices(indices)
    check_reset_seeds(indices, seeds)
    for k, i in enumerate(indices):
      with self._locks[i]:
        if seeds.size:
          self._reset_slot(int(i), int(seeds[k]))
        elif not (only_played and not self._played[int(i)]):
          self._reset_slot(int(i))
    return self._obs[indices]

  def _np_step(self, indices, actions):
    self._check_indices(indices)
    n = len(indices)
    reward = np.zeros(n, np.float32)
    terminated = np.zeros(n, bool)
    truncated = np.zeros(n, bool)
    for k, i in enumerate(indices):
      i = int(i)
      with self._locks[i]:
        action = actions[k]
        if self.num_actions is not None:
          if not 0 <= int(action) < self.num_actions:
            raise ValueError(
                f"action {int(action)} for env {i} is outside the action set "
                f"0..{self.num_actions - 1}.")
          action = int(action)
        obs, r, term, trunc, _ = self._envs[i].step(action)
        self._played[i] = True
        reward[k], terminated[k], truncated[k] = r, term, trunc
        if (term or trunc) and self.auto_reset:
          self._reset_slot(i)
        else:
          self._obs[i] = obs
    return self._obs[indices], reward, terminated, truncated

  def reset(self, indices=None, only_played: bool = False, seeds=None) -> tf.Tensor:
    """Resets the slots in `indices` (all by default); returns their observations.

    With `only_played`, slots still at the start of an episode they have not
    stepped in (just reset, or reset when their last episode ended) keep it.
    `seeds` (one int in [0, 2^31) per index) seeds each slot's new episode.
    """
    indices = self._indices(indices)
    seeds = (tf.zeros([0], tf.int64) if seeds is None
             else tf.convert_to_tensor(seeds, tf.int64))
    obs = tf.numpy_function(lambda i, s: self._np_reset(i, s, only_played),
                            [indices, seeds], self.observation_dtype, stateful=True,
                            name="GymReset")
    obs.set_shape([None] + list(self.observation_shape))
    return obs

  def step(self, actions, indices=None):
    """Steps the slots in `indices`; returns (obs, reward, terminated, truncated).

    Finished slots are reset at once (with auto_reset): their returned
    observation is the first one of the next episode.
    """
    indices = self._indices(indices)
    actions = tf.convert_to_tensor(actions, self.action_dtype)
    obs, reward, terminated, truncated = tf.numpy_function(
        self._np_step, [indices, actions],
        [self.observation_dtype, tf.float32, tf.bool, tf.bool],
        stateful=True, name="GymStep")
    obs.set_shape([None] + list(self.observation_shape))
    for t in (reward, terminated, truncated):
      t.set_shape([None])
    return obs, reward, terminated, truncated

  def render(self, index: int = 0):
    """Slot `index`'s gymnasium `render()` (an RGB array with render_mode="rgb_array")."""
    return self._envs[index].render()

  def close(self) -> None:
    for env in self._envs:
      env.close()
