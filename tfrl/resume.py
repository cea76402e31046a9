"""What a run may do with the checkpoint already in its logdir (every algorithm).

  * A fresh run never writes over a checkpoint: `refuse_fresh_run` tells the
    user to pass --resume or to pick another --logdir.
  * --resume without a checkpoint starts afresh, and says so
    (`nothing_to_resume`).
  * --resume refuses a checkpoint of a different run: each checkpoint records
    its run's identity (algorithm, env, network, ...; a flat dict of JSON
    values) and `check_same_run` names every entry that differs.
  * A checkpoint that cannot be read is `CorruptCheckpoint`: one line naming
    the file and what is wrong. Nothing is deleted or overwritten; the user
    decides what to do with it.

All of these are ValueErrors: the entry points end them in one line, exit 2.
"""

import json
from typing import List, Mapping, Optional

FIX_HINT = "pass --resume to continue it, or pick another --logdir"


class CorruptCheckpoint(ValueError):
  """A checkpoint file that is missing, truncated or unreadable."""

  def __init__(self, path: str, problem: str):
    super().__init__(f"cannot load the checkpoint {path}: {problem} (nothing was changed: "
                     f"repair or move it, or pick another --logdir)")
    self.path = path


def first_line(error: BaseException) -> str:
  """The first line of an error's message (TF errors span many)."""
  text = getattr(error, "message", None) or str(error) or type(error).__name__
  return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def refuse_fresh_run(logdir: str, what: str = "a checkpoint") -> None:
  raise ValueError(f"{logdir} already holds {what} of an earlier run; {FIX_HINT} "
                   f"(nothing was overwritten).")


def nothing_to_resume(logdir: str) -> str:
  """The line a run prints when --resume finds no checkpoint."""
  return f"--resume: no checkpoint in {logdir}; starting afresh."


def as_json(identity: Mapping) -> dict:
  """`identity` as it reads back from a JSON file (tuples become lists, ...)."""
  return json.loads(json.dumps(dict(identity)))


def _show(value) -> str:
  if value is None:
    return "(none)"
  if isinstance(value, list):
    return "[" + ", ".join(_show(v) for v in value) + "]"
  return str(value)


def mismatches(saved: Mapping, current: Mapping) -> List[str]:
  """`<entry> <checkpoint's> != <this run's>` for each entry both have that differs.

  Entries the checkpoint lacks (older checkpoints, library callers that record
  less) are not compared.
  """
  current = as_json(current)
  return [f"{key.replace('_', ' ')} {_show(saved[key])} != {_show(value)}"
          for key, value in current.items() if key in saved and saved[key] != value]


def check_same_run(saved: Optional[Mapping], current: Mapping, where: str) -> None:
  """Raises ValueError naming every difference between the identities."""
  problems = mismatches(saved or {}, current)
  if problems:
    raise ValueError(f"cannot resume {where} (checkpoint != this run): " +
                     "; ".join(problems))
