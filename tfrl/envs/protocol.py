"""What an env is: one protocol for every entry point (`make_env`, in
`tfrl/envs/make.py`, makes its env).

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
The cap is worked out here alone (`max_episode_steps`, `ale_frame_cap`); the
env enforces it (the ALE and MuJoCo ops, gymnasium's TimeLimit through
`tfrl.envs.gym_make.make_gymnasium`), but for neuroevolution's
population evaluator, which counts the same steps itself
(`make_env(..., enforce_frame_cap=False)`) to plan its graph calls.

What runs, also fields (and recorded as what ran):
  * `env_implementation`: ops (ALE for a game; the MuJoCo ops for the tasks
    they serve, `tfrl.envs.mujoco_env.TASKS`), gymnasium (an --env id's
    Python env), or auto: the ops where they serve, else gymnasium. Both
    play the same episodes bit for bit (tests/envs/test_mujoco_env.py).
  * `kernel_isa`: the ISA build the population kernels (neuroevolution's
    networks) run, `tfrl.ops.population.select_isa`: auto (the widest this
    CPU runs), amx, avx512, avx2, sse or portable. Neuroevolution's
    evaluator asks for it when it builds its population network
    (`tfrl.neuroevolution.worker.build_local`), and it is applied when the
    population library loads, so a process that never runs those kernels (an
    evaluation) never checks it against its CPU.
`resolved()` writes out what auto chose; `identity()` (what a checkpoint
records) and an exported policy's metadata hold the resolved values. The
environment variables that still change what runs are documented overrides
(`tfrl.ops.overrides`), logged when set.
"""

import dataclasses
import json
from typing import Any, Dict, Mapping, Optional, Union

from tfrl import flagconfig
from tfrl.envs import game_ids

# ALE's standard cap (30 minutes at 60 Hz): AtariEnv's own max_episode_frames.
ALE_MAX_EPISODE_FRAMES = 108_000
# The fields that only Atari games have; a gymnasium protocol keeps their defaults.
ATARI_FIELDS = ("frame_skip", "repeat_action_probability", "noop_max", "episodic_life",
                "full_action_space")
# What may step an env (`env_implementation`).
IMPLEMENTATIONS = ("auto", "ops", "gymnasium")
# The population kernels' builds (`kernel_isa`); equal to
# tfrl.ops.population.KERNEL_ISAS, which imports TensorFlow.
KERNEL_ISAS = ("auto", "amx", "avx512", "avx2", "sse", "portable")


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
  env_implementation: str = flagconfig.field(
      "auto", "What steps the env: ops (the compiled ops: ALE for --game; for --env the "
      "MuJoCo ops, which serve HalfCheetah-v5 and Humanoid-v5), gymnasium (--env only), "
      "or auto: the ops where they serve and are built, else gymnasium. Both play the "
      "same episodes; a run records the one that played.", choices=IMPLEMENTATIONS)
  kernel_isa: str = flagconfig.field(
      "auto", "The ISA build the population kernels (neuroevolution's networks) run: "
      "auto (the widest this CPU runs), amx (avx512 with AMX tiles, in a library built "
      "with TFRL_BUILD_AMX=1), avx512, avx2, sse or portable (the baseline). A run "
      "records the build that ran; TFRL_POPULATION_ISA overrides it.",
      choices=KERNEL_ISAS)

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
    _check_choice("env_implementation", self.env_implementation, IMPLEMENTATIONS)
    _check_choice("kernel_isa", self.kernel_isa, KERNEL_ISAS)
    if self.game and self.env_implementation == "gymnasium":
      raise ValueError("--env_implementation=gymnasium plays --env ids; Atari games "
                       "(--game) play on the ALE ops: use auto or ops.")

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

  @property
  def ale_frame_cap(self) -> int:
    """ALE's own cap in emulator frames, counted from the reset: 108000, or 0
    (none) with max_episode_frames=0."""
    return 0 if self.max_episode_frames == 0 else ALE_MAX_EPISODE_FRAMES

  def resolved(self) -> "EnvProtocol":
    """The protocol as a run records it: the game id's sticky actions, the env
    implementation auto picks here, and the population kernels' build once this
    process has loaded them (else `kernel_isa` as asked)."""
    changes = {}
    if self.is_atari and self.repeat_action_probability is None:
      implied = game_ids.parse_game(self.game).repeat_action_probability
      changes["repeat_action_probability"] = implied or 0.0
    if self.env_implementation == "auto":
      changes["env_implementation"] = implementation(self)
    isa = _kernel_isa(self.kernel_isa)
    if isa != self.kernel_isa:
      changes["kernel_isa"] = isa
    return dataclasses.replace(self, **changes) if changes else self

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
    """What a checkpoint records of the protocol; a resume must match it.
    Without `kernel_isa`: only neuroevolution runs the population kernels, and
    its run identity records the build it runs
    (`tfrl.neuroevolution.runner.run_identity`). Whether this process happens
    to have loaded them (a test process, a notebook) changes nothing here."""
    identity = self.resolved().to_json()
    del identity["kernel_isa"]
    return identity

  def describe(self) -> str:
    """One line for logs, e.g. "pong (frame skip 4, sticky 0.0, no-ops <= 30)"."""
    p = self.resolved()
    cap = {None: "", 0: ", no frame cap"}.get(p.max_episode_frames,
                                              f", cap {p.max_episode_frames} frames")
    if not p.is_atari:
      return f"{p.env} on {p.env_implementation}{cap}"
    extras = "".join((", episodic life" if p.episodic_life else "",
                      ", full action set" if p.full_action_space else ""))
    return (f"{p.game} (frame skip {p.frame_skip}, sticky {p.repeat_action_probability:g}, "
            f"no-ops <= {p.noop_max}{extras}{cap})")


def _check_int(name: str, value, minimum: int) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f"--{name} must be an int >= {minimum}, got {value!r}.")


def _check_choice(name: str, value, choices) -> None:
  if value not in choices:
    raise ValueError(f"--{name} must be one of {', '.join(choices)}, got {value!r}.")


def implementation(protocol: EnvProtocol, **overrides) -> str:
  """What steps the env of `protocol` made with `overrides` (gymnasium's
  `render_mode`, ...): "ops" or "gymnasium". ValueError for ops that do not
  serve it."""
  if protocol.is_atari:
    return "ops"
  # pylint: disable-next=import-outside-toplevel
  from tfrl.envs import mujoco_env  # TensorFlow: not for a protocol alone
  asked = protocol.env_implementation
  if asked == "ops":
    if protocol.env not in mujoco_env.TASKS:
      raise ValueError(f"--env_implementation=ops: the MuJoCo ops serve "
                       f"{', '.join(sorted(mujoco_env.TASKS))}, not {protocol.env}.")
    if overrides:
      raise ValueError(f"--env_implementation=ops: the MuJoCo ops do not take "
                       f"{sorted(overrides)} (a renderer): use gymnasium.")
    return "ops"
  if asked == "auto" and protocol.env in mujoco_env.TASKS and not overrides and \
      mujoco_env.ops_available():
    return "ops"
  return "gymnasium"


def _kernel_isa(asked: str) -> str:
  """The population kernels' build: the one chosen if this process has loaded
  their library, else `asked`."""
  from tfrl.ops import population  # pylint: disable=import-outside-toplevel
  return population.select_isa(asked) if population.loaded() else asked
