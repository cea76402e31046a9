"""Where a benchmark figure comes from: commit, command, machine and date.

Every benchmark that writes JSON puts `provenance()` in it. The shell
benchmarks take the record when they start:

    python benchmarks/provenance.py "STEPS=70000 benchmarks/gst_halfcheetah.sh" > provenance.json
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


def cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown"


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


if __name__ == "__main__":
  # The record as JSON on stdout; the arguments, if any, are the command.
  print(json.dumps(provenance(" ".join(sys.argv[1:]) or None), indent=1))
