"""AtariEnv: a batch of Atari emulators stepped by TensorFlow ops."""

import collections
import os
from typing import Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfrl.envs import game_ids
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

  The emulators live in a TF resource. `reset`, `step` and `observe` take an
  optional `indices` vector so that several agents can each drive their own
  slots of one batch, concurrently; each call spreads its slots over TF's
  intra-op thread pool. Everything works eagerly and inside `tf.function`.

  Preprocessing follows the DQN protocol (as gymnasium's AtariPreprocessing):
  `frame_skip` frames per step with rewards summed, max over the last two
  frames, grayscale, area resize to `screen_size`, `stack` frames on the
  channel axis (oldest first), uniform 1..`noop_max` no-ops and FIRE on reset.

  Args:
    game: 'Pong', 'pong', or a gymnasium id ('PongNoFrameskip-v4',
      'ALE/Pong-v5'); a v5 id defaults to sticky actions 0.25, v4 to none.
    num_envs: number of emulators (slots).
    frame_skip: emulator frames per step.
    max_pool: max over the last two frames of each step.
    grayscale: one luminance channel (else RGB).
    screen_size: an int (square), (height, width), or None for the native
      210x160 screen.
    stack: frames per observation.
    noop_max: no-op frames on reset, uniform in 1..noop_max (0 disables).
    fire_reset: press FIRE on reset in games that need it.
    repeat_action_probability: sticky actions; None takes the id's default.
    full_action_space: 18 actions rather than the minimal set; None takes the
      id's default (False).
    episodic_life: a lost life reports `terminated` (the game continues).
    max_episode_frames: emulator frames after which episodes are truncated
      (108000 = 30 minutes), as ALE counts them: from the reset, its no-op and
      FIRE frames included; 0 disables.
    max_episode_steps: also truncate an episode after this many steps (its
      no-op start not counted), as gymnasium's TimeLimit does; None: no such
      cap. The emulators do not see it: the env counts each slot's steps in a
      variable and resets a capped slot itself (with auto_reset).
    seed: slot i's emulator is seeded from (seed, i).
    rom_directory: where the ROMs are; ale-py's by default.
    auto_reset: start a new game in a slot as soon as its game ends. Without
      it a finished slot keeps its final observation and must be reset before
      it steps again (the gymnasium VectorEnv adapter works this way).
  """

  def __init__(self, game: str, num_envs: int, *, frame_skip: int = 4,
               max_pool: bool = True, grayscale: bool = True,
               screen_size: Union[int, Tuple[int, int], None] = 84,
               stack: int = 4, noop_max: int = 30, fire_reset: bool = True,
               repeat_action_probability: Optional[float] = None,
               full_action_space: Optional[bool] = None,
               episodic_life: bool = False, max_episode_frames: int = 108000,
               max_episode_steps: Optional[int] = None,
               seed: int = 0, rom_directory: Optional[str] = None,
               auto_reset: bool = True):
    protocol = game_ids.parse_game(game)
    if repeat_action_probability is None:
      repeat_action_probability = protocol.repeat_action_probability or 0.0
    if full_action_space is None:
      full_action_space = bool(protocol.full_action_space)
    _check_int("num_envs", num_envs, 1)
    _check_int("frame_skip", frame_skip, 1)
    _check_int("stack", stack, 1)
    _check_int("noop_max", noop_max, 0)
    _check_int("max_episode_frames", max_episode_frames, 0)
    if max_episode_steps is not None:
      _check_int("max_episode_steps", max_episode_steps, 1)
    if not 0.0 <= repeat_action_probability <= 1.0:
      raise ValueError("repeat_action_probability must be in [0, 1], got "
                       f"{repeat_action_probability}.")
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

    self.game = protocol.rom_id
    self.num_envs = num_envs
    self.frame_skip = frame_skip
    self.auto_reset = auto_reset
    self._channels = (1 if grayscale else 3) * stack
    self._handle = ale_ops.env_create(
        game=protocol.rom_id,
        rom_directory=rom_directory or default_rom_directory(),
        num_envs=num_envs, frame_skip=frame_skip, max_pool=max_pool,
        grayscale=grayscale, resize=resize, height=height, width=width,
        stack=stack, noop_max=noop_max, fire_reset=fire_reset,
        repeat_action_probability=float(repeat_action_probability),
        full_action_space=full_action_space, episodic_life=episodic_life,
        max_episode_frames=max_episode_frames, seed=seed)
    self.action_set = ale_ops.action_set(self._handle).numpy().tolist()
    self.num_actions = len(self.action_set)
    self.observation_shape = (height, width, self._channels)
    self.observation_dtype = tf.uint8
    self.action_dtype = tf.int32
    self.action_shape = ()
    self._all = tf.range(num_envs, dtype=tf.int32)
    self.max_episode_steps = max_episode_steps
    # Steps of each slot's episode so far, for max_episode_steps.
    self._steps = (tf.Variable(tf.zeros([num_envs], tf.int32), trainable=False,
                               name="episode_steps") if max_episode_steps else None)

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
    if self._steps is not None:
      # Slots kept by `only_played` have not stepped since their reset: at 0 already.
      self._steps.scatter_update(tf.IndexedSlices(tf.zeros_like(indices), indices))
    return self.observe(indices)

  def step_detailed(self, actions, indices=None) -> AtariStep:
    """Like `step`, also telling which slots finished a whole game."""
    indices = self._indices(indices)
    actions = tf.convert_to_tensor(actions, tf.int32)
    reward, terminated, truncated, game_over = ale_ops.step(
        self._handle, indices, actions, auto_reset=self.auto_reset)
    if self._steps is not None:
      truncated, game_over = self._cap_steps(indices, truncated, game_over)
    return AtariStep(self.observe(indices), reward, terminated, truncated,
                     game_over)

  def _cap_steps(self, indices, truncated, game_over):
    """Truncates the episodes of `indices` that reached max_episode_steps."""
    steps = tf.gather(self._steps, indices) + 1
    capped = (steps >= self.max_episode_steps) & ~game_over
    ended = game_over | capped
    self._steps.scatter_update(tf.IndexedSlices(tf.where(ended, 0, steps), indices))
    if self.auto_reset:  # a new game, as the emulator starts one after a game over
      ale_ops.reset(self._handle, tf.boolean_mask(indices, capped),
                    tf.zeros([0], tf.int64), only_played=False)
    return truncated | capped, ended

  def step(self, actions, indices=None):
    """Steps slots `indices` (all by default) with `actions`.

    Returns (obs, reward, terminated, truncated). A slot whose game ended is
    reset at once, so its `obs` is the first of the next game (without
    auto_reset, a slot truncated by max_episode_steps must be reset before
    it steps again, as any finished slot).
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


def _check_int(name: str, value, minimum: int) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
