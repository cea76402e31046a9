"""MujocoEnv: gymnasium's MuJoCo locomotion tasks stepped by TF ops.

`GymEnv` steps each gymnasium env in Python through `tf.numpy_function`; on
2 cores that Python, not the physics, bounds the neuroevolution evaluator
(docs/neuroevolution_mujoco.md, "Throughput on MuJoCo"). The MuJoCo ops step a
batch of simulations in C++ on TF's thread pool: the same model file, the
same MuJoCo calls per step as gymnasium's `MujocoEnv` (ctrl, frame_skip x
mj_step, mj_rnePostConstraint), then the task's v5 observation and reward.

Episodes are gymnasium's: a reset draws the initial state in Python with
gymnasium's own random stream of the slot (seeded as `GymEnv` seeds it), so
for the same seeds and actions the observations are bit for bit those of
`GymEnv` and the rewards equal (tests/envs/test_mujoco_env.py). `make_env`
picks this env for the ids in `TASKS` when the ops are built, unless the
protocol's `env_implementation` is gymnasium or a render mode asks for
gymnasium's renderer (`tfrl.envs.protocol.implementation`).
"""

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf
from gymnasium.utils import seeding

from tfrl.envs.gym_batch import GymBatch, check_reset_seeds, slot_seed
from tfrl.envs.gym_make import make_gymnasium


@dataclasses.dataclass(frozen=True)
class Task:
  """A gymnasium id the ops serve: the C++ task and its reset noise (v5 defaults)."""
  name: str
  reset_noise_scale: float
  qvel_noise: str  # "normal" (scale x standard normal) or "uniform" (+-scale)


TASKS = {
    "HalfCheetah-v5": Task("half_cheetah", 0.1, "normal"),
    "Humanoid-v5": Task("humanoid", 1e-2, "uniform"),
}


def ops_available() -> bool:
  """Whether the MuJoCo op library is built and loads (and mujoco is installed)."""
  try:
    from tfrl.ops import mujoco as _  # pylint: disable=import-outside-toplevel
  except ImportError:
    return False
  return True


class MujocoEnv(GymBatch):
  """`num_envs` simulations of one MuJoCo task behind TF ops, with `GymEnv`'s
  interface and episodes (see the module docstring); auto-resetting unless
  `auto_reset=False`. `max_episode_steps` truncates on top of the id's own
  limit, as in `GymEnv`."""

  def __init__(self, env_id: str, num_envs: int, *, seed: int = 0,
               auto_reset: bool = True, max_episode_steps: Optional[int] = None):
    from tfrl.ops import mujoco as mujoco_ops  # pylint: disable=import-outside-toplevel
    if env_id not in TASKS:
      raise ValueError(f"MujocoEnv serves {sorted(TASKS)}, not '{env_id}'.")
    super().__init__(env_id, num_envs, seed, auto_reset)
    self._ops = mujoco_ops
    self._task = TASKS[env_id]
    # One gymnasium env: the spaces, the model file, the initial state.
    reference = make_gymnasium(env_id)
    self._set_spaces(reference)
    unwrapped = reference.unwrapped
    limits = [n for n in (reference.spec.max_episode_steps, max_episode_steps) if n]
    self._init_qpos = unwrapped.init_qpos.copy()
    self._init_qvel = unwrapped.init_qvel.copy()
    self._handle = mujoco_ops.env_create(
        model_path=unwrapped.fullpath, task=self._task.name, num_envs=num_envs,
        frame_skip=unwrapped.frame_skip, max_episode_steps=min(limits, default=0))
    reference.close()
    self._rngs = [None] * num_envs  # gymnasium's np_random of each slot

  def _initial_state(self, rng: np.random.Generator):
    """The episode start gymnasium's reset_model draws from `rng`."""
    scale = self._task.reset_noise_scale
    qpos = self._init_qpos + rng.uniform(low=-scale, high=scale, size=self._init_qpos.size)
    if self._task.qvel_noise == "normal":
      noise = scale * rng.standard_normal(self._init_qvel.size)
    else:
      noise = rng.uniform(low=-scale, high=scale, size=self._init_qvel.size)
    return qpos, self._init_qvel + noise

  def _np_starts(self, indices, seeds, played, only_played):
    """(slots to reset, their qpos, their qvel), drawn as GymEnv's slots reset."""
    # The indices were checked by the observe op that gave `played`.
    check_reset_seeds(indices, seeds)
    chosen, qpos, qvel = [], [], []
    for k, i in enumerate(indices.tolist()):
      seed = int(seeds[k]) if seeds.size else None
      if seed is None and only_played and not played[k]:
        continue
      if seed is None and self._rngs[i] is None:
        seed = slot_seed(self._seed, i)  # Deterministic per slot, once.
      if seed is not None:
        self._rngs[i], _ = seeding.np_random(seed)
      start = self._initial_state(self._rngs[i])
      chosen.append(i)
      qpos.append(start[0])
      qvel.append(start[1])
    shape = lambda rows, n: np.asarray(rows, np.float64).reshape(len(rows), n)
    return (np.asarray(chosen, np.int32), shape(qpos, self._init_qpos.size),
            shape(qvel, self._init_qvel.size))

  def _reset(self, indices, seeds, only_played):
    _, played = self._ops.observe(self._handle, indices)
    chosen, qpos, qvel = tf.numpy_function(
        lambda i, s, p: self._np_starts(i, s, p, only_played), [indices, seeds, played],
        [tf.int32, tf.float64, tf.float64], stateful=True, name="MujocoStarts")
    first = self._ops.reset(self._handle, chosen, qpos, qvel)
    with tf.control_dependencies([first]):
      obs, _ = self._ops.observe(self._handle, indices)
    return obs

  def _step(self, actions, indices):
    actions = tf.reshape(actions, [-1] + list(self.action_shape))
    obs, reward, terminated, truncated = self._ops.step(self._handle, indices, actions)
    if self.auto_reset:
      done = terminated | truncated
      obs = tf.cond(tf.reduce_any(done),
                    lambda: tf.tensor_scatter_nd_update(
                        obs, tf.where(done), self.reset(tf.boolean_mask(indices, done))),
                    lambda: obs)
    return obs, reward, terminated, truncated

  def render(self, index: int = 0):
    raise NotImplementedError(
        "MujocoEnv does not render: make the env with render_mode='rgb_array' (GymEnv).")

  def close(self) -> None:
    if self._handle is not None:
      tf.raw_ops.DestroyResourceOp(resource=self._handle, ignore_lookup_error=True)
      self._handle = None
