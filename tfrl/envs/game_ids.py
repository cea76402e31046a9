"""Game names: 'Pong', 'PongNoFrameskip-v4', 'ALE/Pong-v5' -> ROM id + protocol."""

import dataclasses
import re
from typing import Optional

_GYM_ID = re.compile(
    r"^(?:ALE/)?(?P<name>[A-Za-z0-9]+?)(?P<variant>NoFrameskip|Deterministic)?"
    r"(?:-ram)?-v(?P<version>\d+)$")


@dataclasses.dataclass(frozen=True)
class GameProtocol:
  """The ROM id and the defaults a gymnasium id implies."""
  rom_id: str
  repeat_action_probability: Optional[float] = None
  full_action_space: Optional[bool] = None


def to_rom_id(name: str) -> str:
  """'SpaceInvaders' -> 'space_invaders'; 'pong' stays 'pong'."""
  if name.islower() or "_" in name:
    return name.lower()
  return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def parse_game(game: str) -> GameProtocol:
  """Parses a game name or gymnasium id.

  'ALE/X-v5' implies sticky actions (0.25), as in gymnasium's v5 protocol; the
  v4 ids (with or without NoFrameskip / Deterministic) imply no sticky actions.
  Frame skip is always tfrl's own (the `frame_skip` argument).
  """
  if not isinstance(game, str) or not game:
    raise ValueError(f"game must be a non-empty string, got {game!r}.")
  match = _GYM_ID.match(game)
  if match is None:
    if not re.fullmatch(r"[A-Za-z0-9_]+", game):
      raise ValueError(
          f"unknown game '{game}': use an ALE name such as 'Pong' or 'pong', or a "
          "gymnasium id such as 'PongNoFrameskip-v4' or 'ALE/Pong-v5'.")
    return GameProtocol(rom_id=to_rom_id(game))
  rom_id = to_rom_id(match.group("name"))
  if int(match.group("version")) >= 5:
    return GameProtocol(rom_id, repeat_action_probability=0.25,
                        full_action_space=False)
  return GameProtocol(rom_id, repeat_action_probability=0.0, full_action_space=False)
