"""Where a benchmark figure comes from: commit, command, machine and date.

Every benchmark that writes JSON puts `provenance()` in it. The shell
benchmarks take the record when they start:

    python benchmarks/provenance.py "STEPS=70000 benchmarks/gst_halfcheetah.sh" > provenance.json

Benchmarks whose runs span sittings (`--append`) add to an earlier record:
`earlier_record` checks that it measured the same thing, `add_sitting` keeps
each sitting's provenance.
"""

import datetime
import json
import os
import platform
import subprocess
import sys
from typing import Optional

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args) -> str:
  try:
    return subprocess.run(["git", *args], cwd=_ROOT, capture_output=True, text=True,
                          timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return ""


def checkout_commit(path: str) -> Optional[str]:
  """The commit a git checkout at `path` is at (a peer's sources), or None."""
  return _git("-C", path, "rev-parse", "HEAD") or None


_ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vbmi", "avx512_bf16",
              "amx_tile", "amx_bf16")


def cpu_fields() -> dict:
  """The first CPU's /proc/cpuinfo fields ({} where there is none)."""
  fields = {}
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  return fields


def cpu_model() -> str:
  """'<model name> (family F, model M; <ISA extensions of note>)'."""
  fields = cpu_fields()
  if not fields:
    return platform.processor() or "unknown"
  flags = set(fields.get("flags", "").split())
  isa = ", ".join(f for f in _ISA_FLAGS if f in flags)
  return (f"{fields.get('model name', 'unknown')} (family {fields.get('cpu family', '?')}, "
          f"model {fields.get('model', '?')}; {isa})")


def provenance(command: Optional[str] = None) -> dict:
  """The record every benchmark JSON carries; `command` defaults to this process's."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return {
      "commit": _git("rev-parse", "HEAD"),
      "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
      "command": command or " ".join([os.path.basename(sys.executable)] + sys.argv),
      "cpu_model": cpu_model(),
      "cores": os.cpu_count(),
      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "python": platform.python_version(),
      "tensorflow": tf.__version__,
  }


def earlier_record(path: str, same: dict) -> dict:
  """The JSON at `path` that --append adds to; its values of `same`'s keys must
  equal `same`'s. Raises absl's UsageError (one line) otherwise."""
  from absl import app  # pylint: disable=import-outside-toplevel
  try:
    with open(path) as f:
      earlier = json.load(f)
  except (OSError, ValueError) as e:
    raise app.UsageError(f"--append needs a readable JSON at --output={path}: {e}") from e
  theirs = {k: earlier.get(k) for k in same}
  if same != theirs:
    raise app.UsageError(f"--append: {path} holds {theirs}, this sitting {same}")
  return earlier


def add_sitting(record: dict, sitting: dict) -> None:
  """Lists `sitting` (a provenance) among the sittings of an appended-to record."""
  record.setdefault("sittings", [record["provenance"]]).append(sitting)


if __name__ == "__main__":
  # The record as JSON on stdout; the arguments, if any, are the command.
  print(json.dumps(provenance(" ".join(sys.argv[1:]) or None), indent=1))
