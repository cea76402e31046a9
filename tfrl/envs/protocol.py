"""How an env is made: one protocol for every entry point, and the one `make_env`.

    protocol = EnvProtocol(game="ALE/Pong-v5")          # or EnvProtocol(env="CartPole-v1")
    env = make_env(protocol, num_envs=16, seed=0)       # AtariEnv or GymEnv

Each field is a flag of the same name in every entry point (`tfrl.ga3c`,
`tfrl.ga`, `tfrl.es`, `tfrl.random_search`, `tfrl.td3`, `tfrl.evaluate`);
an entry point may have its own defaults (GA3C's game is
PongNoFrameskip-v4, neuroevolution's pong). A run's protocol is part of its
identity (checkpoints record it, a resume with another one is refused) and
travels with its exported policy, so `tfrl.evaluate` replays it.

The frame cap, `max_episode_frames`:
  * None (the default): the env's own limit. Atari: ALE's 108,000 frames (30
    minutes of play), counted by the emulator from the reset, its no-op and
    FIRE frames included; a gymnasium env: the limit its id registers.
  * N > 0: on top of that, an episode is truncated after N frames of play:
    ceil(N / frame_skip) steps (a gymnasium env: N steps), counted from its
    first step, as gymnasium's TimeLimit counts them. Atari episodes still end
    at ALE's 108,000 frames at the latest.
  * 0: no cap at all (Atari; a gymnasium env keeps its registered limit).
The env enforces it (`AtariEnv(max_episode_steps=)`, gymnasium's TimeLimit),
but for neuroevolution's population evaluator, which counts the same steps
itself (`make_env(..., enforce_frame_cap=False)`) to plan its graph calls.
"""

import dataclasses
import json
import re
from typing import Any, Dict, Mapping, Optional, Union

from tfrl import flagconfig
from tfrl.envs import game_ids

# ALE's standard cap (30 minutes at 60 Hz): AtariEnv's own max_episode_frames.
ALE_MAX_EPISODE_FRAMES = 108_000
# The fields that only Atari games have; a gymnasium protocol keeps their defaults.
ATARI_FIELDS = ("frame_skip", "repeat_action_probability", "noop_max", "episodic_life",
                "full_action_space")


@dataclasses.dataclass(frozen=True)
class EnvProtocol:
  """How an env is made; each field is the flag of its name (see module docstring)."""

  game: Optional[str] = flagconfig.field(
      None, "Atari game, played on AtariEnv (the compiled ALE ops): an ALE name (pong, "
      "Pong) or a gymnasium id (PongNoFrameskip-v4; ALE/Pong-v5 defaults to sticky "
      "actions 0.25).")
  env: Optional[str] = flagconfig.field(
      None, "A gymnasium env id (e.g. CartPole-v1), played on GymEnv, instead of --game.")
  frame_skip: int = flagconfig.field(
      4, "Atari: emulator frames per step (rewards summed, max over the last two frames).")
  repeat_action_probability: Optional[float] = flagconfig.field(
      None, "Atari: sticky-action probability (ALE v5's protocol: 0.25); default: the "
      "game id's (ALE/X-v5: 0.25, the others 0).")
  noop_max: int = flagconfig.field(
      30, "Atari: an episode starts with 1..N no-op frames (uniform); 0: none.")
  episodic_life: bool = flagconfig.field(
      False, "Atari: a lost life ends a training episode (the game goes on).")
  full_action_space: bool = flagconfig.field(
      False, "Atari: all 18 actions rather than the game's minimal set.")
  max_episode_frames: Optional[int] = flagconfig.field(
      None, "Frame cap per episode: truncated after this many frames of play "
      "(ceil(N / frame_skip) steps; gymnasium: N steps), on top of the env's own limit "
      "(Atari: ALE's 108000 frames; gymnasium: its id's). Default: the env's own "
      "only; 0: none at all (Atari).")

  def __post_init__(self):
    for name in ("game", "env"):
      if getattr(self, name) == "":
        object.__setattr__(self, name, None)
    if bool(self.game) == bool(self.env):
      raise ValueError("Give exactly one of --game (Atari) or --env (gymnasium id).")
    if self.env:
      # Not used by gymnasium envs: their defaults, so that equal envs have
      # equal protocols whatever an entry point's Atari defaults are.
      defaults = EnvProtocol.__dataclass_fields__
      for name in ATARI_FIELDS:
        object.__setattr__(self, name, defaults[name].default)
    else:
      game_ids.parse_game(self.game)  # a ValueError naming the bad name
    _check_int("frame_skip", self.frame_skip, 1)
    _check_int("noop_max", self.noop_max, 0)
    if self.max_episode_frames is not None:
      _check_int("max_episode_frames", self.max_episode_frames, 0)
    p = self.repeat_action_probability
    if p is not None and not 0.0 <= p <= 1.0:
      raise ValueError(f"--repeat_action_probability must be in [0, 1], got {p}.")

  @classmethod
  def from_flag_values(cls, values: Dict[str, Any], defaults: Mapping[str, Any]):
    """The protocol of the flags: --env replaces the entry point's default --game
    (which a run's flags file repeats); both given otherwise is an error."""
    values = dict(values)
    if values.get("env") and values.get("game") == defaults.get("game"):
      values["game"] = None
    return cls(**values)

  @property
  def is_atari(self) -> bool:
    return bool(self.game)

  @property
  def name(self) -> str:
    """The game or gymnasium id."""
    return self.game or self.env

  @property
  def frames_per_step(self) -> int:
    """Emulator frames per env step (a gymnasium step counts as one)."""
    return self.frame_skip if self.is_atari else 1

  @property
  def max_episode_steps(self) -> Optional[int]:
    """The cap in env steps, ceil(max_episode_frames / frames_per_step); None: no
    cap of the protocol's own (the env's limit only)."""
    if not self.max_episode_frames:
      return None
    return -(-self.max_episode_frames // self.frames_per_step)

  def resolved(self) -> "EnvProtocol":
    """The same protocol with the game id's defaults written out (sticky actions)."""
    if not self.is_atari or self.repeat_action_probability is not None:
      return self
    implied = game_ids.parse_game(self.game).repeat_action_probability
    return dataclasses.replace(self, repeat_action_probability=implied or 0.0)

  def to_json(self) -> Dict[str, Any]:
    """The fields as a dict of JSON values (`from_json` reads it back)."""
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, data: Union[str, Mapping[str, Any]]) -> "EnvProtocol":
    """The protocol of `to_json`'s dict (or its JSON text); ValueError if it is not one."""
    if isinstance(data, str):
      try:
        data = json.loads(data)
      except ValueError as e:
        raise ValueError(f"an env protocol must be a JSON object: {e}") from None
    if not isinstance(data, Mapping):
      raise ValueError(f"an env protocol must be a JSON object, got {type(data).__name__}.")
    unknown = sorted(set(data) - set(cls.__dataclass_fields__))
    if unknown:
      raise ValueError(f"unknown env protocol field(s) {unknown}; known: "
                       f"{sorted(cls.__dataclass_fields__)}.")
    return cls(**data)

  def identity(self) -> Dict[str, Any]:
    """What a checkpoint records of the protocol; a resume must match it."""
    return self.resolved().to_json()

  def describe(self) -> str:
    """One line for logs, e.g. "pong (frame skip 4, sticky 0.0, no-ops <= 30)"."""
    p = self.resolved()
    cap = {None: "", 0: ", no frame cap"}.get(p.max_episode_frames,
                                              f", cap {p.max_episode_frames} frames")
    if not p.is_atari:
      return p.env + cap
    extras = "".join((", episodic life" if p.episodic_life else "",
                      ", full action set" if p.full_action_space else ""))
    return (f"{p.game} (frame skip {p.frame_skip}, sticky {p.repeat_action_probability:g}, "
            f"no-ops <= {p.noop_max}{extras}{cap})")


def _check_int(name: str, value, minimum: int) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f"--{name} must be an int >= {minimum}, got {value!r}.")


def make_env(protocol: EnvProtocol, num_envs: int, seed: int = 0, *,
             auto_reset: bool = True, enforce_frame_cap: bool = True, **overrides):
  """The batched env of `protocol`: `AtariEnv` for a game, `GymEnv` for an env id
  (`MujocoEnv`, the same episodes stepped by the MuJoCo ops, for the MuJoCo
  tasks it serves: `tfrl.envs.mujoco_env.use_ops`).

  Args:
    protocol: the `EnvProtocol`.
    num_envs: slots.
    seed: slot i's env is seeded from (seed, i).
    auto_reset: start a new episode in a slot as soon as one ends.
    enforce_frame_cap: False: the caller ends episodes at the protocol's frame
      cap itself (the population evaluator); the env keeps only its own limit.
    **overrides: the env's own settings that are not part of the protocol
      (Atari's screen: `screen_size`, `grayscale`, `max_pool`, `stack`;
      gymnasium's `render_mode`).

  Raises:
    ValueError: one line naming an unknown or unusable game or env.
    ImportError: the ALE ops are not built (how to build them).
  """
  steps = protocol.max_episode_steps if enforce_frame_cap else None
  if not protocol.is_atari:
    # pylint: disable=import-outside-toplevel
    from tfrl.envs import mujoco_env
    from tfrl.envs.gym_env import GymEnv
    if mujoco_env.use_ops(protocol.env, **overrides):
      # The same episodes as GymEnv's, stepped in C++ (tfrl/envs/mujoco_env.py).
      return mujoco_env.MujocoEnv(protocol.env, num_envs, seed=seed, auto_reset=auto_reset,
                                  max_episode_steps=steps)
    try:
      return GymEnv(protocol.env, num_envs, seed=seed, auto_reset=auto_reset,
                    max_episode_steps=steps, **overrides)
    except ValueError as e:
      raise ValueError(f"unknown or unusable --env={protocol.env}: "
                       f"{str(e).splitlines()[0]}") from None
  # Imported here: it needs the compiled ALE ops (an ImportError that says how
  # to build them), which gymnasium envs do not.
  from tfrl.envs.atari_env import AtariEnv  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  p = protocol.resolved()
  try:
    return AtariEnv(
        p.game, num_envs, frame_skip=p.frame_skip, noop_max=p.noop_max,
        repeat_action_probability=p.repeat_action_probability,
        full_action_space=p.full_action_space, episodic_life=p.episodic_life,
        max_episode_frames=0 if p.max_episode_frames == 0 else ALE_MAX_EPISODE_FRAMES,
        max_episode_steps=steps, seed=seed, auto_reset=auto_reset, **overrides)
  except (ValueError, RuntimeError) as e:
    message = str(e)
  except tf.errors.OpError as e:
    message = e.message  # a missing ROM, with the op's context in {{...}}
  message = re.sub(r"^\{\{[^}]*\}\}\s*", "", (message.strip().splitlines() or ["?"])[0])
  raise ValueError(f"unknown or unusable --game={protocol.game}: "
                   f"{message.split('; available')[0][:300]}")
