"""AtariEnv: a batch of Atari emulators stepped by TensorFlow ops."""

import collections
import os
from typing import Optional, Tuple, Union

import tensorflow as tf

from tfrl.envs import game_ids
from tfrl.envs.protocol import ATARI_FIELDS, EnvProtocol
from tfrl.ops import ale as ale_ops

AtariStep = collections.namedtuple(
    "AtariStep", ["obs", "reward", "terminated", "truncated", "game_over"])
AtariStep.__doc__ = """One step of a set of slots.

game_over: the slot's game ended or hit the frame cap; with auto_reset the
slot was reset, so `obs` is the first observation of a new game. With
episodic_life, `terminated` marks lost lives too; `game_over` only whole games.
"""


def default_rom_directory() -> str:
  """ale-py's ROM directory (ROMs ship inside the ale-py wheel)."""
  from ale_py import roms  # pylint: disable=import-outside-toplevel
  return os.path.dirname(roms.get_rom_path("pong"))


class AtariEnv:
  """`num_envs` Atari emulators of one game behind TF ops, auto-resetting.

      env = AtariEnv("PongNoFrameskip-v4", num_envs=16)          # a game id, or
      env = AtariEnv(EnvProtocol(game="ALE/Pong-v5"), 16)         # its protocol

  The emulators live in a TF resource. `reset`, `step` and `observe` take an
  optional `indices` vector so that several agents can each drive their own
  slots of one batch, concurrently; each call spreads its slots over TF's
  intra-op thread pool. Everything works eagerly and inside `tf.function`.

  How episodes are played is the env protocol's (`tfrl.envs.EnvProtocol`:
  frame skip, sticky actions, no-op start, episodic life, action set, frame
  cap), resolved there once: give one, or a game name with the protocol's
  fields as keywords (`AtariEnv("Pong", 8, noop_max=0)`). Preprocessing
  follows the DQN protocol (as gymnasium's AtariPreprocessing): `frame_skip`
  frames per step with rewards summed, max over the last two frames,
  grayscale, area resize to `screen_size`, `stack` frames on the channel axis
  (oldest first), uniform 1..`noop_max` no-ops and FIRE on reset.

  Args:
    protocol: an Atari `EnvProtocol`, or a game: 'Pong', 'pong', or a
      gymnasium id ('PongNoFrameskip-v4', 'ALE/Pong-v5'; a v5 id defaults to
      sticky actions 0.25, v4 to none).
    num_envs: number of emulators (slots).
    seed: slot i's emulator is seeded from (seed, i).
    auto_reset: start a new game in a slot as soon as its game ends. Without
      it a finished slot keeps its final observation and must be reset before
      it steps again (the gymnasium VectorEnv adapter works this way).
    enforce_frame_cap: False leaves the protocol's frame cap to the caller
      (the population evaluator); ALE's own 108,000 frames still apply.
    max_pool: max over the last two frames of each step.
    grayscale: one luminance channel (else RGB).
    screen_size: an int (square), (height, width), or None for the native
      210x160 screen.
    stack: frames per observation.
    fire_reset: press FIRE on reset in games that need it.
    rom_directory: where the ROMs are; ale-py's by default.
    **protocol_fields: with a game name, the protocol's fields
      (`frame_skip`, `repeat_action_probability`, `noop_max`,
      `episodic_life`, `full_action_space`, `max_episode_frames`).
  """

  def __init__(self, protocol: Union[EnvProtocol, str], num_envs: int, *, seed: int = 0,
               auto_reset: bool = True, enforce_frame_cap: bool = True,
               max_pool: bool = True, grayscale: bool = True,
               screen_size: Union[int, Tuple[int, int], None] = 84, stack: int = 4,
               fire_reset: bool = True, rom_directory: Optional[str] = None,
               **protocol_fields):
    protocol = atari_protocol(protocol, protocol_fields)
    _check_int("num_envs", num_envs, 1)
    _check_int("stack", stack, 1)
    if screen_size is None:
      height, width, resize = 210, 160, False
    elif isinstance(screen_size, int):
      height = width = screen_size
      resize = True
    else:
      height, width = screen_size
      resize = True
    if resize:
      _check_int("screen height", height, 1)
      _check_int("screen width", width, 1)

    rom_id = game_ids.parse_game(protocol.game).rom_id
    self.protocol = protocol
    self.game = rom_id
    self.num_envs = num_envs
    self.frame_skip = protocol.frame_skip
    self.auto_reset = auto_reset
    self.max_episode_steps = protocol.max_episode_steps if enforce_frame_cap else None
    self._channels = (1 if grayscale else 3) * stack
    self._handle = ale_ops.env_create(
        game=rom_id, rom_directory=rom_directory or default_rom_directory(),
        num_envs=num_envs, frame_skip=protocol.frame_skip, max_pool=max_pool,
        grayscale=grayscale, resize=resize, height=height, width=width,
        stack=stack, noop_max=protocol.noop_max, fire_reset=fire_reset,
        repeat_action_probability=float(protocol.repeat_action_probability),
        full_action_space=protocol.full_action_space,
        episodic_life=protocol.episodic_life, max_episode_frames=protocol.ale_frame_cap,
        max_episode_steps=self.max_episode_steps or 0, seed=seed)
    self.action_set = ale_ops.action_set(self._handle).numpy().tolist()
    self.num_actions = len(self.action_set)
    self.observation_shape = (height, width, self._channels)
    self.observation_dtype = tf.uint8
    self.action_dtype = tf.int32
    self.action_shape = ()
    self._all = tf.range(num_envs, dtype=tf.int32)

  @property
  def handle(self) -> tf.Tensor:
    """The emulators' resource, for calling `tfrl.ops.ale` directly (None once closed)."""
    return self._handle

  def _indices(self, indices) -> tf.Tensor:
    if indices is None:
      return self._all
    return tf.convert_to_tensor(indices, tf.int32)

  def observe(self, indices=None) -> tf.Tensor:
    """uint8 observations [len(indices), height, width, channels]."""
    height, width, channels = self.observation_shape
    return ale_ops.observe(self._handle, self._indices(indices), height=height,
                           width=width, channels=channels)

  def reset(self, indices=None, only_played: bool = False, seeds=None) -> tf.Tensor:
    """Starts new games in the slots `indices` (all by default); returns obs.

    With `only_played`, slots still at the start of a game they have not
    stepped in (just reset, or auto-reset when their last game ended) keep
    that game, which saves the emulator frames of another reset sequence.
    `seeds` (one int in [0, 2^31) per index) re-seeds each slot first: its
    new game (no-op start, sticky actions, power-on RAM) then depends on
    the seed alone, whatever the slot played before.
    """
    indices = self._indices(indices)
    seeds = (tf.zeros([0], tf.int64) if seeds is None
             else tf.convert_to_tensor(seeds, tf.int64))
    ale_ops.reset(self._handle, indices, seeds, only_played=only_played)
    return self.observe(indices)

  def step_detailed(self, actions, indices=None) -> AtariStep:
    """Like `step`, also telling which slots finished a whole game."""
    indices = self._indices(indices)
    actions = tf.convert_to_tensor(actions, tf.int32)
    reward, terminated, truncated, game_over = ale_ops.step(
        self._handle, indices, actions, auto_reset=self.auto_reset)
    return AtariStep(self.observe(indices), reward, terminated, truncated,
                     game_over)

  def step(self, actions, indices=None):
    """Steps slots `indices` (all by default) with `actions`.

    Returns (obs, reward, terminated, truncated). A slot whose game ended is
    reset at once, so its `obs` is the first of the next game (without
    auto_reset, a finished slot must be reset before it steps again).
    """
    return tuple(self.step_detailed(actions, indices)[:4])

  def close(self) -> None:
    """Frees the emulators; the env cannot be used afterwards."""
    handle, self._handle = getattr(self, "_handle", None), None
    if handle is not None:
      # Eagerly, whatever graph is being built: the garbage collector may call
      # __del__ while a tf.function is traced, inside TF's graph lock, where
      # adding the op to that graph deadlocks (and would free nothing).
      with tf.init_scope():
        tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass  # Interpreter shutdown: the process frees the emulators anyway.


# The protocol's fields AtariEnv takes as keywords with a game name.
PROTOCOL_KEYWORDS = ATARI_FIELDS + ("max_episode_frames",)


def atari_protocol(protocol: Union[EnvProtocol, str], fields) -> EnvProtocol:
  """The resolved Atari protocol of AtariEnv's arguments (see AtariEnv)."""
  if isinstance(protocol, EnvProtocol):
    if fields:
      raise TypeError(f"AtariEnv got a protocol and also {sorted(fields)}: set them in "
                      "the protocol.")
  else:
    unknown = sorted(set(fields) - set(PROTOCOL_KEYWORDS))
    if unknown:
      raise TypeError(f"AtariEnv got unexpected argument(s) {unknown}; the protocol's "
                      f"are {list(PROTOCOL_KEYWORDS)}.")
    protocol = EnvProtocol(game=protocol, **fields)
  if not protocol.is_atari:
    raise ValueError(f"AtariEnv plays Atari games; {protocol.env} is a gymnasium id "
                     "(make_env makes its env).")
  return protocol.resolved()


def _check_int(name: str, value, minimum: int) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
