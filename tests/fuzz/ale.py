"""Fuzz calls of the ALE ops (library `ale`): a small pool of emulator batches
per worker, whose state (which slots need a reset, which have an
observation) the fuzzer tracks, so that an ALE call's input depends on the
calls of its worker before it (`--replay` replays them)."""

import json
import tempfile

import numpy as np
import tensorflow as tf

from tests.fuzz import cases
from tests.fuzz.cases import FuncCase


class AleState(cases.EnvPool):
  """The worker's emulator batches and what each slot may do next."""

  def __init__(self, rng):
    super().__init__()
    from tfrl.envs import atari_env  # pylint: disable=import-outside-toplevel
    from tfrl.ops import ale  # pylint: disable=import-outside-toplevel
    self.ale = ale
    self.rom_directory = atari_env.default_rom_directory()
    for _ in range(2):
      self.create(valid_config(rng))

  def create(self, config):
    handle = self.ale.env_create(rom_directory=self.rom_directory, **config)
    actions = self.ale.action_set(handle).numpy()
    native = not config["resize"]
    env = dict(handle=handle, config=config, num_actions=len(actions),
               height=210 if native else config["height"],
               width=160 if native else config["width"],
               channels=(1 if config["grayscale"] else 3) * config["stack"],
               needs_reset=[True] * config["num_envs"],
               has_obs=[False] * config["num_envs"], actions=actions)
    return self.add(env)


def valid_config(rng):
  resize = bool(rng.random() < 0.8)
  return dict(
      game=str(rng.choice(["pong", "breakout", "space_invaders"])),
      num_envs=int(rng.integers(1, 4)), frame_skip=int(rng.integers(1, 6)),
      max_pool=bool(rng.random() < 0.7), grayscale=bool(rng.random() < 0.7), resize=resize,
      height=int(rng.integers(1, 100)) if resize else 84,
      width=int(rng.integers(1, 100)) if resize else 84, stack=int(rng.integers(1, 6)),
      noop_max=int(rng.choice([0, 1, 30])), fire_reset=bool(rng.random() < 0.5),
      repeat_action_probability=float(rng.choice([0.0, 0.25, 1.0])),
      full_action_space=bool(rng.random() < 0.3), episodic_life=bool(rng.random() < 0.3),
      max_episode_frames=int(rng.choice([0, 30, 108000])),
      seed=int(rng.integers(-2**62, 2**62)))


def emulators(rng):
  """The worker's AleState, made with `rng` on first use."""
  return AleState.of_worker(rng)


def _slots(rng, env, allow=None):
  """A random subset of slots (no repeats), optionally only those `allow` admits."""
  n = env["config"]["num_envs"]
  return cases.random_slots(rng, [s for s in range(n) if allow is None or allow(s)])


def _bad_indices(rng, env):
  return cases.bad_indices(rng, env["config"]["num_envs"])


def gen_ale_env_create(rng):
  state = emulators(rng)
  config = valid_config(rng)
  mutation = None
  if rng.random() < 0.6:
    mutation = str(rng.choice([
        "game_name", "unknown_game", "rom_directory", "num_envs", "frame_skip", "stack",
        "height", "width", "noop_max", "repeat_action_probability", "max_episode_frames",
        "observation_memory"]))
  expect = cases.invalid()
  rom_directory = state.rom_directory
  if mutation == "game_name":
    config["game"] = str(rng.choice(["Pong", "../pong", "", "pong.bin", "po ng"]))
  elif mutation == "unknown_game":
    config["game"] = "no_such_game"
    expect = (tf.errors.NotFoundError,)
  elif mutation == "rom_directory":
    rom_directory = str(rng.choice(["/nonexistent/roms", tempfile.gettempdir()]))
    expect = (tf.errors.NotFoundError,)
  elif mutation == "num_envs":
    config["num_envs"] = int(rng.choice([0, -1, 4097, 2**40]))
    expect = cases.invalid_or_type()
  elif mutation == "frame_skip":
    config["frame_skip"] = int(rng.choice([0, -5, 1001, 2**31 - 1, 2**32, 2**62]))
    expect = cases.invalid_or_type()
  elif mutation == "stack":
    config["stack"] = int(rng.choice([0, 65, 2**31, 2**32]))
    expect = cases.invalid_or_type()
  elif mutation in ("height", "width"):
    config["resize"] = True
    config[mutation] = int(rng.choice([0, 1025, 2**31]))
    expect = cases.invalid_or_type()
  elif mutation == "noop_max":
    config["noop_max"] = int(rng.choice([-1, 100001, 2**31 - 1, 2**40]))
    expect = cases.invalid_or_type()
  elif mutation == "repeat_action_probability":
    config["repeat_action_probability"] = float(rng.choice([-0.1, 1.5, np.nan, np.inf]))
  elif mutation == "max_episode_frames":
    config["max_episode_frames"] = -1
    expect = cases.invalid_or_type()
  elif mutation == "observation_memory":
    # 64 slots x 1024 x 1024 x RGB x 64 frames = 12.9 GB of observations.
    config.update(num_envs=64, resize=True, height=1024, width=1024, grayscale=False,
                  stack=64)
  detail = json.dumps({k: v for k, v in config.items() if k != "seed"})

  if mutation is not None:
    return cases.bad_create_case(
        lambda: state.ale.env_create(rom_directory=rom_directory, **config), mutation, expect,
        detail)

  def run():
    env = state.create(config)
    if not 2 <= env["num_actions"] <= 18 or np.any(env["actions"] < 0) or np.any(
        env["actions"] > 17):
      return f"action set {env['actions']}"
    return None
  return FuncCase(run, None, detail=detail)




def gen_ale_reset(rng):
  state = emulators(rng)
  env = state.pick(rng)
  idx = _slots(rng, env)
  seeded = rng.random() < 0.4
  seeds = (rng.integers(0, 2**31, size=len(idx)) if seeded else np.zeros(0)).astype(np.int64)
  only_played = bool(rng.random() < 0.3)
  handle = env["handle"]
  mutation = None
  expect = cases.invalid()
  if rng.random() < 0.4:
    mutation = str(rng.choice(["indices", "seeds_range", "seeds_length", "seeds_rank",
                               "handle", "indices_dtype"]))
  if mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    seeds = np.zeros(0, np.int64)
  elif mutation == "seeds_range":
    idx = np.array([0], np.int32)
    seeds = np.array([int(rng.choice([-1, 2**31, 2**62, -2**63]))], np.int64)
  elif mutation == "seeds_length":
    idx = np.array([0], np.int32)
    seeds = np.zeros(2, np.int64)
  elif mutation == "seeds_rank":
    idx = np.array([0], np.int32)
    seeds = np.zeros((1, 1), np.int64)
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx, seeds = np.array([0], np.int32), np.zeros(0, np.int64)
  elif mutation == "indices_dtype":
    expect = (TypeError, tf.errors.InvalidArgumentError)

  def call():
    indices = tf.constant(idx, tf.int64 if mutation == "indices_dtype" else tf.int32)
    state.ale.reset(handle, indices, tf.constant(seeds, tf.int64), only_played=only_played)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} seeds {seeds.tolist()}")

  def run():
    call()
    for s in idx:
      env["needs_reset"][s] = False
      env["has_obs"][s] = True
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()} seeded={seeded}")


def gen_ale_step(rng):
  state = emulators(rng)
  env = state.pick(rng)
  # Slots that may step, mostly; now and then one that needs a reset (bad).
  idx = _slots(rng, env, allow=lambda s: not env["needs_reset"][s])
  actions = rng.integers(0, env["num_actions"], size=len(idx)).astype(np.int32)
  auto_reset = bool(rng.random() < 0.7)
  handle = env["handle"]
  mutation = None
  expect = cases.invalid()
  if rng.random() < 0.35:
    mutation = str(rng.choice(["action_range", "actions_length", "needs_reset", "indices",
                               "handle", "actions_dtype"]))
  if mutation == "action_range":
    if len(idx) == 0:
      idx = np.array([0], np.int32)
    actions = np.zeros(len(idx), np.int32)
    actions[-1] = rng.choice([env["num_actions"], -1, 2**31 - 1, -2**31])
  elif mutation == "actions_length":
    actions = np.zeros(len(idx) + 1, np.int32)
  elif mutation == "needs_reset":
    waiting = [s for s, nr in enumerate(env["needs_reset"]) if nr]
    if not waiting:
      mutation = "actions_length"
      actions = np.zeros(len(idx) + 1, np.int32)
    else:
      idx = np.array([waiting[0]], np.int32)
      actions = np.zeros(1, np.int32)
  elif mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    actions = np.zeros(idx.shape[0], np.int32)
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx, actions = np.array([0], np.int32), np.zeros(1, np.int32)
  elif mutation == "actions_dtype":
    expect = (TypeError, tf.errors.InvalidArgumentError)

  def call():
    acts = tf.constant(actions, tf.float32 if mutation == "actions_dtype" else tf.int32)
    return state.ale.step(handle, tf.constant(idx), acts, auto_reset=auto_reset)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} actions {actions.tolist()}")

  def run():
    reward, terminated, truncated, game_over = [t.numpy() for t in call()]
    k = len(idx)
    if reward.shape != (k,) or reward.dtype != np.float32 or terminated.shape != (k,):
      return f"outputs shaped {reward.shape} {terminated.shape}"
    if not np.all(np.isfinite(reward)):
      return f"reward {reward}"
    if np.any(truncated & ~game_over):
      return "truncated without game_over"
    if not env["config"]["episodic_life"] and np.any(terminated != (game_over & ~truncated)):
      return "terminated and game_over disagree"
    for s, over in zip(idx, game_over):
      if over and not auto_reset:
        env["needs_reset"][s] = True
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()} auto_reset={auto_reset}")


def gen_ale_observe(rng):
  state = emulators(rng)
  env = state.pick(rng)
  idx = _slots(rng, env, allow=lambda s: env["has_obs"][s])
  attrs = dict(height=env["height"], width=env["width"], channels=env["channels"])
  handle = env["handle"]
  mutation = None
  expect = cases.invalid()
  if rng.random() < 0.4:
    mutation = str(rng.choice(["shape_attrs", "no_observation", "indices", "handle",
                               "attr_range"]))
  if mutation == "shape_attrs":
    key = str(rng.choice(["height", "width", "channels"]))
    attrs[key] += int(rng.choice([1, -1 if attrs[key] > 1 else 2, 1000]))
    if len(idx) == 0:
      idx = np.zeros(0, np.int32)
  elif mutation == "no_observation":
    waiting = [s for s, h in enumerate(env["has_obs"]) if not h]
    if waiting:
      idx = np.array([waiting[0]], np.int32)
    else:
      mutation = "shape_attrs"
      attrs["channels"] += 1
  elif mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
  elif mutation == "handle":
    mutation, handle, expect = state.handle_mutation(rng)
    idx = np.array([0], np.int32)
  elif mutation == "attr_range":
    attrs["height"] = int(rng.choice([0, -1]))
    expect = cases.invalid_or_type()

  def call():
    return state.ale.observe(handle, tf.constant(idx), **attrs)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} {attrs}")

  def run():
    obs = call().numpy()
    want = (len(idx), env["height"], env["width"], env["channels"])
    if obs.shape != want or obs.dtype != np.uint8:
      return f"observation {obs.shape} {obs.dtype}, expected {want} uint8"
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()}")


def gen_ale_action_set(rng):
  state = emulators(rng)
  env = state.pick(rng)
  if rng.random() < 0.3:
    mutation, handle, expect = state.handle_mutation(rng)
    return FuncCase(lambda: state.ale.action_set(handle), mutation, expect)

  def run():
    actions = state.ale.action_set(env["handle"]).numpy()
    if not np.array_equal(actions, env["actions"]):
      return f"action set {actions} changed from {env['actions']}"
    return None
  return FuncCase(run)


def gen_ale_kernel_info(rng):
  state = emulators(rng)
  del rng

  def run():
    info = state.ale.kernel_info()
    names = ["grey_levels_avx512_vbmi", "grey_levels_portable", "resize_avx2",
             "resize_portable"]
    if sorted(info) != sorted(names):
      return f"paths {sorted(info)}"
    return None
  return FuncCase(run)
