"""Where a benchmark figure comes from: commit, command, machine and date."""

import datetime
import os
import platform
import subprocess
import sys

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


def provenance() -> dict:
  """The record every benchmark JSON carries."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return {
      "commit": _git("rev-parse", "HEAD"),
      "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
      "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
      "cpu_model": cpu_model(),
      "cores": os.cpu_count(),
      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "python": platform.python_version(),
      "tensorflow": tf.__version__,
  }
