"""A /proc/loadavg-style file for the benchmarks' quiet gate (--load_file), so
a test decides the load the gate reads instead of the machine.

Import it as `from tests import load_average`, with the repository root on
sys.path.
"""

import os


def write(directory: str, one_minute: float) -> str:
  """Writes `directory`/loadavg with `one_minute` as every average; its path."""
  path = os.path.join(directory, "loadavg")
  with open(path, "w") as f:
    f.write(f"{one_minute:.2f} {one_minute:.2f} {one_minute:.2f} 1/100 4242\n")
  return path
