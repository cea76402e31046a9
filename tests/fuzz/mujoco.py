"""Fuzz calls of the MuJoCo ops (library `mujoco`), checked against gymnasium.

Each worker keeps a small pool of simulation batches and, for every slot, a
gymnasium env of the same task (unwrapped, with the batch's frame skip): the
reference. A valid reset or step of a slot does the same to its reference
(a reset: `mj_resetData`, the drawn qpos and qvel, `mj_forward`, as
gymnasium's reset does once it has drawn them; a step: gymnasium's `step`),
and the op's observations must equal gymnasium's bit for bit, its rewards
equal gymnasium's rounded to float32 (NaN where gymnasium's is NaN: a NaN
action), its terminations gymnasium's and its truncations the batch's
`max_episode_steps`. Actions hold NaN, +-inf and huge values now and then
(`cases.SPECIALS`): MuJoCo then clamps or zeroes the controls, as it does
under gymnasium. TensorFlow's threads read subnormal floats as zero (see
checks.py), so the op reads a subnormal action (|a| < 1.2e-38) as 0: the
reference gets it as 0 too (the observations would otherwise differ by
~1e-38). Like the ALE calls, a call's input depends on the calls of its
worker before it (`--replay` replays them).
"""

import json

import numpy as np
import tensorflow as tf

from tests.fuzz import cases
from tests.fuzz.cases import FuncCase
from tests.fuzz.checks import daz

# The gymnasium ids the ops serve, by the ops' task name.
TASKS = {"half_cheetah": "HalfCheetah-v5", "humanoid": "Humanoid-v5"}


class Slot:
  """A slot of a batch and its gymnasium reference."""

  def __init__(self, reference):
    self.reference = reference
    self.needs_reset = True
    self.played = True      # the op's `played`: true before the first reset
    self.steps = 0
    self.obs = None         # the reference's last observation (None: zeros)


class MujocoState(cases.EnvPool):
  """The worker's simulation batches (with their references)."""

  def __init__(self, rng):
    super().__init__()
    import gymnasium as gym  # pylint: disable=import-outside-toplevel
    import mujoco  # pylint: disable=import-outside-toplevel
    from tfrl.ops import mujoco as ops  # pylint: disable=import-outside-toplevel
    self.gym, self.mujoco, self.ops = gym, mujoco, ops
    self.models = {}
    for task, env_id in TASKS.items():
      env = gym.make(env_id).unwrapped
      self.models[task] = env.fullpath
      env.close()
    for _ in range(2):
      self.create(valid_config(rng))

  def create(self, config):
    handle = self.ops.env_create(model_path=self.models[config["task"]], **config)
    slots = [Slot(self.gym.make(TASKS[config["task"]], frame_skip=config["frame_skip"])
                  .unwrapped) for _ in range(config["num_envs"])]
    env = dict(handle=handle, config=config, slots=slots,
               nq=slots[0].reference.model.nq, nv=slots[0].reference.model.nv,
               nu=slots[0].reference.model.nu,
               init=(slots[0].reference.init_qpos, slots[0].reference.init_qvel))
    return self.add(env)

  def release(self, env):
    for slot in env["slots"]:
      slot.reference.close()


def valid_config(rng):
  return dict(task=str(rng.choice(list(TASKS))), num_envs=int(rng.integers(1, 5)),
              frame_skip=int(rng.integers(1, 7)),
              max_episode_steps=int(rng.choice([0, 1, 3, 20, 1000])))


def simulations(rng):
  """The worker's MujocoState, made with `rng` on first use."""
  return MujocoState.of_worker(rng)


def _slots(rng, env, allow=None):
  """A random subset of slots (no repeats), optionally only those `allow` admits."""
  return cases.random_slots(
      rng, [s for s, slot in enumerate(env["slots"]) if allow is None or allow(slot)])


def _bad_indices(rng, env):
  return cases.bad_indices(rng, len(env["slots"]))


def _same(got, want):
  """Whether two arrays are equal bit for bit but for NaN's sign and payload."""
  got, want = np.asarray(got), np.asarray(want)
  return got.shape == want.shape and bool(np.all((got == want) | (np.isnan(got) &
                                                                  np.isnan(want))))


def gen_mujoco_env_create(rng):
  state = simulations(rng)
  config = valid_config(rng)
  model_path = state.models[config["task"]]
  mutation = None
  if rng.random() < 0.6:
    mutation = str(rng.choice(["unknown_task", "model_path", "other_task_model", "num_envs",
                               "frame_skip", "max_episode_steps"]))
  expect = cases.invalid()
  if mutation == "unknown_task":
    config["task"] = str(rng.choice(["ant", "", "HalfCheetah-v5", "half_cheetah "]))
  elif mutation == "model_path":
    model_path = str(rng.choice(["/nonexistent/model.xml", "", "/dev/null", "/etc"]))
  elif mutation == "other_task_model":
    model_path = state.models["humanoid" if config["task"] == "half_cheetah"
                              else "half_cheetah"]
  elif mutation == "num_envs":
    config["num_envs"] = int(rng.choice([0, -1, 4097, 2**40]))
    expect = cases.invalid_or_type()
  elif mutation == "frame_skip":
    config["frame_skip"] = int(rng.choice([0, -5, 1001, 2**31 - 1, 2**62]))
    expect = cases.invalid_or_type()
  elif mutation == "max_episode_steps":
    config["max_episode_steps"] = int(rng.choice([-1, -2**31]))
    expect = cases.invalid_or_type()
  detail = json.dumps(dict(config, model_path=model_path))

  if mutation is not None:
    return cases.bad_create_case(
        lambda: state.ops.env_create(model_path=model_path, **config), mutation, expect, detail)

  def run():
    env = state.create(config)
    n = config["num_envs"]
    obs, played = state.ops.observe(env["handle"], tf.range(n))
    if obs.shape[0] != n or np.any(obs.numpy() != 0) or not np.all(played.numpy()):
      return f"a new batch observes {obs.numpy()} played {played.numpy()}"
    return None
  return FuncCase(run, None, detail=detail)


def _starts(rng, env, k):
  """[k, nq] and [k, nv] initial states: the task's, with noise of any scale."""
  qpos0, qvel0 = env["init"]
  scale = float(rng.choice([0.0, 0.01, 0.1, 1.0]))
  return (qpos0 + scale * rng.standard_normal((k, env["nq"])),
          qvel0 + scale * rng.standard_normal((k, env["nv"])))


def gen_mujoco_reset(rng):
  state = simulations(rng)
  env = state.pick(rng)
  idx = _slots(rng, env)
  qpos, qvel = _starts(rng, env, len(idx))
  handle = env["handle"]
  mutation = None
  expect = cases.invalid()
  if rng.random() < 0.4:
    mutation = str(rng.choice(["indices", "qpos_shape", "qvel_shape", "qpos_non_finite",
                               "qvel_non_finite", "handle", "qpos_dtype"]))
  if mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    qpos, qvel = _starts(rng, env, idx.shape[0])
  elif mutation in ("qpos_shape", "qvel_shape"):
    idx = np.array([0], np.int32)
    qpos, qvel = _starts(rng, env, 1)
    bad = np.zeros((1, (env["nq"] if mutation == "qpos_shape" else env["nv"]) + 1))
    bad = bad if rng.random() < 0.5 else np.zeros((2, bad.shape[1] - 1))
    qpos, qvel = (bad, qvel) if mutation == "qpos_shape" else (qpos, bad)
  elif mutation in ("qpos_non_finite", "qvel_non_finite"):
    idx = np.array([0], np.int32)
    qpos, qvel = _starts(rng, env, 1)
    target = qpos if mutation == "qpos_non_finite" else qvel
    target[0, int(rng.integers(0, target.shape[1]))] = rng.choice([np.nan, np.inf, -np.inf])
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx = np.array([0], np.int32)
    qpos, qvel = _starts(rng, env, 1)
  elif mutation == "qpos_dtype":
    expect = cases.invalid_or_type()

  def call():
    dtype = tf.float32 if mutation == "qpos_dtype" else tf.float64
    return state.ops.reset(handle, tf.constant(idx, tf.int32), tf.constant(qpos, dtype),
                           tf.constant(qvel, tf.float64))

  detail = f"slots {idx.tolist()} qpos {np.asarray(qpos).shape}"
  if mutation is not None:
    return FuncCase(call, mutation, expect, detail)

  def run():
    obs = call().numpy()
    for k, s in enumerate(idx):
      slot = env["slots"][s]
      reference = slot.reference
      state.mujoco.mj_resetData(reference.model, reference.data)
      reference.set_state(qpos[k], qvel[k])
      slot.obs = reference._get_obs()  # pylint: disable=protected-access
      slot.needs_reset, slot.played, slot.steps = False, False, 0
      if not _same(obs[k], slot.obs):
        return f"slot {s}: observation {obs[k]} != gymnasium's {slot.obs}"
    return None
  return FuncCase(run, None, detail=detail)


def _actions(rng, env, k):
  """[k, nu] float32 actions within and past the bounds, specials now and then."""
  scale = float(rng.choice([0.5, 1.0, 2.0]))
  return cases.rand_floats(rng, (k, env["nu"]), cases.special_rate(rng), scale=scale)


def _check_step(env, idx, actions, outputs):
  """Plays the step on the references; what differs from the op's outputs."""
  obs, reward, terminated, truncated = (t.numpy() for t in outputs)
  limit = env["config"]["max_episode_steps"]
  for k, s in enumerate(idx):
    slot = env["slots"][s]
    with np.errstate(all="ignore"):
      want_obs, want_reward, want_term, _, _ = slot.reference.step(daz(actions[k]))
    slot.steps += 1
    slot.played = True
    want_trunc = 0 < limit <= slot.steps
    slot.needs_reset = bool(want_term or want_trunc)
    slot.obs = want_obs
    if not _same(obs[k], want_obs):
      return f"slot {s}: observation {obs[k]} != gymnasium's {want_obs}"
    if not _same(reward[k], np.float32(want_reward)):
      return f"slot {s}: reward {reward[k]} != gymnasium's {want_reward}"
    if (bool(terminated[k]), bool(truncated[k])) != (bool(want_term), want_trunc):
      return (f"slot {s} step {slot.steps}: terminated/truncated {terminated[k]}/"
              f"{truncated[k]}, gymnasium's {want_term}/{want_trunc}")
  return None


def gen_mujoco_step(rng):
  state = simulations(rng)
  env = state.pick(rng)
  # Slots that may step, mostly; now and then one that needs a reset (bad).
  idx = _slots(rng, env, allow=lambda slot: not slot.needs_reset)
  actions = _actions(rng, env, len(idx))
  handle = env["handle"]
  mutation = None
  expect = cases.invalid()
  if rng.random() < 0.35:
    mutation = str(rng.choice(["actions_shape", "needs_reset", "indices", "handle",
                               "actions_dtype"]))
  if mutation == "actions_shape":
    actions = np.zeros(rng.choice([(len(idx) + 1, env["nu"]), (len(idx), env["nu"] - 1),
                                   (len(idx), env["nu"] + 1)]), np.float32)
  elif mutation == "needs_reset":
    waiting = [s for s, slot in enumerate(env["slots"]) if slot.needs_reset]
    if waiting:
      idx = np.array([waiting[0]], np.int32)
      actions = np.zeros((1, env["nu"]), np.float32)
    else:
      mutation = "actions_shape"
      actions = np.zeros((len(idx) + 1, env["nu"]), np.float32)
  elif mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    actions = np.zeros((idx.shape[0], env["nu"]), np.float32)
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx, actions = np.array([0], np.int32), np.zeros((1, env["nu"]), np.float32)
  elif mutation == "actions_dtype":
    expect = cases.invalid_or_type()

  def call():
    dtype = tf.float64 if mutation == "actions_dtype" else tf.float32
    return state.ops.step(handle, tf.constant(idx, tf.int32), tf.constant(actions, dtype))

  detail = f"slots {idx.tolist()} actions {np.asarray(actions).tolist()}"[:300]
  if mutation is not None:
    return FuncCase(call, mutation, expect, detail)
  return FuncCase(lambda: _check_step(env, idx, actions, call()), None, detail=detail)


def gen_mujoco_observe(rng):
  state = simulations(rng)
  env = state.pick(rng)
  idx = _slots(rng, env)
  handle = env["handle"]
  mutation = None
  if rng.random() < 0.3:
    mutation = str(rng.choice(["indices", "handle"]))
  expect = cases.invalid()
  if mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx = np.array([0], np.int32)

  def call():
    return state.ops.observe(handle, tf.constant(idx, tf.int32))

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()}")

  def run():
    obs, played = (t.numpy() for t in call())
    for k, s in enumerate(idx):
      slot = env["slots"][s]
      want = np.zeros_like(obs[k]) if slot.obs is None else slot.obs
      if not _same(obs[k], want) or bool(played[k]) != slot.played:
        return (f"slot {s}: observes {obs[k]} played {played[k]}, expected {want} "
                f"played {slot.played}")
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()}")
