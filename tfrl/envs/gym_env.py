"""A batch of any gymnasium environments behind the AtariEnv interface.

The fallback for non-Atari tasks (CartPole, Pendulum, MuJoCo): each call steps
the Python environments through `tf.numpy_function`, so the learners that are
written against `AtariEnv` run unchanged, eagerly or inside `tf.function`.
The envs live in this process, or (`processes=N`) in N child processes that
each step a block of the slots (`tfrl.envs.env_processes`).
"""

import threading
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl import env_worker
from tfrl.envs import env_processes
# Re-exported: made here for GymEnv, in tfrl.gym_make for processes without TF.
from tfrl.gym_make import make_gymnasium  # pylint: disable=unused-import


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

  `processes=N` (> 0) steps the envs in N child processes, each a contiguous
  block of the slots (`np.array_split`, as the neuroevolution evaluator cuts
  its slot groups), with the same results as in this process. It pays where
  gymnasium's Python is most of a step and several threads step at once
  (MuJoCo tasks in the evaluator's slot groups); for cheap envs a round trip
  to a child costs more than their step. `close()` ends the children.
  """

  def __init__(self, env_id: str, num_envs: int, *, seed: int = 0,
               auto_reset: bool = True, max_episode_steps: Optional[int] = None,
               processes: int = 0, **make_kwargs):
    if not isinstance(num_envs, int) or num_envs < 1:
      raise ValueError(f"num_envs must be a positive int, got {num_envs!r}.")
    if not isinstance(processes, int) or processes < 0:
      raise ValueError(f"processes must be an int >= 0, got {processes!r}.")
    first = make_gymnasium(env_id, max_episode_steps, **make_kwargs)
    self.env_id = env_id
    self.num_envs = num_envs
    self.auto_reset = auto_reset
    self._seed = seed
    self._seeded = np.zeros(num_envs, bool)
    self._played = np.ones(num_envs, bool)  # stepped since the slot's last reset
    space = first.observation_space
    self.observation_space = space
    self.action_space = first.action_space
    self.observation_shape = tuple(space.shape)
    self.observation_dtype = tf.as_dtype(space.dtype)
    self.render_mode = getattr(first, "render_mode", None)
    if isinstance(self.action_space, gym.spaces.Discrete):
      self.num_actions = int(self.action_space.n)
      self.action_shape = ()
      self.action_dtype = tf.int32
    elif isinstance(self.action_space, gym.spaces.Box):
      self.num_actions = None
      self.action_shape = tuple(self.action_space.shape)
      self.action_dtype = tf.float32
    else:
      first.close()
      raise ValueError(
          f"GymEnv supports Discrete and Box action spaces, got {self.action_space}.")
    self._envs, self._processes = [], None
    if processes:
      first.close()  # it gave the spaces; the children make their own envs
      self._processes = env_processes.EnvProcesses(dict(
          env_id=env_id, max_episode_steps=max_episode_steps, make_kwargs=make_kwargs,
          auto_reset=auto_reset, discrete=self.num_actions is not None,
          shapes=(self.observation_shape, space.dtype, self.action_shape,
                  np.int64 if self.num_actions is not None else np.float32)),
          num_envs, processes)
    else:
      self._envs = [first] + [make_gymnasium(env_id, max_episode_steps, **make_kwargs)
                              for _ in range(num_envs - 1)]
      self._locks = [threading.Lock() for _ in range(num_envs)]
      self._obs = np.zeros((num_envs,) + self.observation_shape, space.dtype)

  @property
  def processes(self) -> int:
    """The child processes that step the envs (0: this process)."""
    return len(self._processes.pids) if self._processes else 0

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

  def _reset_seeds(self, indices, seeds, only_played) -> np.ndarray:
    """Each index's reset: its seed, `env_worker.NO_SEED` (its own stream) or
    `env_worker.KEEP` (not reset); marks the reset slots seeded and unplayed."""
    plan = np.empty(len(indices), np.int64)
    for k, i in enumerate(indices):
      if seeds.size:
        plan[k] = seeds[k]
      elif only_played and not self._played[i]:
        plan[k] = env_worker.KEEP
      elif not self._seeded[i]:
        plan[k] = slot_seed(self._seed, int(i))  # Deterministic per slot, once.
      else:
        plan[k] = env_worker.NO_SEED
    reset = indices[plan != env_worker.KEEP]
    self._seeded[reset] = True
    self._played[reset] = False
    return plan

  def _np_reset(self, indices, seeds, only_played=False):
    self._check_indices(indices)
    if seeds.size and seeds.shape != indices.shape:
      raise ValueError(f"seeds must be empty or one per index ({indices.size}), got "
                       f"{seeds.size}.")
    if seeds.size and (seeds.min() < 0 or seeds.max() > 0x7FFFFFFF):
      raise ValueError(f"seeds must be in [0, 2^31), got {seeds.tolist()}.")
    plan = self._reset_seeds(indices, seeds, only_played)
    if self._processes:
      return self._processes.reset(indices, plan)
    for i, seed in zip(indices, plan):
      if seed != env_worker.KEEP:
        with self._locks[i]:
          self._obs[i], _ = self._envs[i].reset(
              seed=None if seed == env_worker.NO_SEED else int(seed))
    return self._obs[indices]

  def _check_actions(self, indices, actions) -> None:
    if self.num_actions is None:
      return
    bad = np.flatnonzero((actions < 0) | (actions >= self.num_actions))
    if bad.size:
      raise ValueError(
          f"action {int(actions[bad[0]])} for env {int(indices[bad[0]])} is outside the "
          f"action set 0..{self.num_actions - 1}.")

  def _np_step(self, indices, actions):
    self._check_indices(indices)
    self._check_actions(indices, actions)
    if self._processes:
      obs, reward, terminated, truncated = self._processes.step(indices, actions)
    else:
      obs, reward, terminated, truncated = self._step_here(indices, actions)
    self._played[indices] = ~((terminated | truncated) & self.auto_reset)
    return obs, reward, terminated, truncated

  def _step_here(self, indices, actions):
    n = len(indices)
    reward = np.zeros(n, np.float32)
    terminated = np.zeros(n, bool)
    truncated = np.zeros(n, bool)
    discrete = self.num_actions is not None
    for k, i in enumerate(indices):
      with self._locks[i]:
        action = int(actions[k]) if discrete else actions[k]
        obs, r, term, trunc, _ = self._envs[i].step(action)
        reward[k], terminated[k], truncated[k] = r, term, trunc
        if (term or trunc) and self.auto_reset:
          obs, _ = self._envs[i].reset()  # seeded at its first reset
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
    if self._processes:
      return self._processes.render(index)
    return self._envs[index].render()

  def close(self) -> None:
    """Closes the envs (and ends their child processes); safe to repeat."""
    if self._processes:
      self._processes.close()
    for env in self._envs:
      env.close()
