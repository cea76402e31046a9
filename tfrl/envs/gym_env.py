"""A batch of any gymnasium environments behind the AtariEnv interface.

The fallback for non-Atari tasks (CartPole, Pendulum, MuJoCo): each call steps
the Python environments through `tf.numpy_function`, so the learners that are
written against `AtariEnv` run unchanged, eagerly or inside `tf.function`.
"""

import threading
from typing import Optional

import numpy as np
import tensorflow as tf

from tfrl.envs.gym_batch import GymBatch, check_reset_seeds, slot_seed
from tfrl.envs.gym_make import make_gymnasium


class GymEnv(GymBatch):
  """`num_envs` copies of one gymnasium environment, auto-resetting.

  Its attributes are `GymBatch`'s (spaces, shapes, dtypes, `render_mode`).

  With `auto_reset=False` a finished slot keeps its final observation until
  it is reset (the neuroevolution evaluator resets each new episode itself,
  with that episode's seed). `max_episode_steps` truncates episodes after
  that many steps, on top of the env id's own limit (`make_gymnasium`).
  """

  def __init__(self, env_id: str, num_envs: int, *, seed: int = 0,
               auto_reset: bool = True, max_episode_steps: Optional[int] = None,
               **make_kwargs):
    super().__init__(env_id, num_envs, seed, auto_reset)
    self._envs = [make_gymnasium(env_id, max_episode_steps, **make_kwargs)
                  for _ in range(num_envs)]
    self._set_spaces(self._envs[0])
    self._seeded = [False] * num_envs
    self._played = [True] * num_envs  # stepped since the slot's last reset
    self._locks = [threading.Lock() for _ in range(num_envs)]
    self._obs = np.zeros((num_envs,) + self.observation_shape,
                         self.observation_space.dtype)

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

  def _reset(self, indices, seeds, only_played):
    return tf.numpy_function(lambda i, s: self._np_reset(i, s, only_played),
                             [indices, seeds], self.observation_dtype, stateful=True,
                             name="GymReset")

  def _step(self, actions, indices):
    return tf.numpy_function(self._np_step, [indices, actions],
                             [self.observation_dtype, tf.float32, tf.bool, tf.bool],
                             stateful=True, name="GymStep")

  def render(self, index: int = 0):
    """Slot `index`'s gymnasium `render()` (an RGB array with render_mode="rgb_array")."""
    return self._envs[index].render()

  def close(self) -> None:
    for env in self._envs:
      env.close()
