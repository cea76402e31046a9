"""A race round starts only on a quiet machine, and says what the load was.

Every run of a race (race_pong.py, race_mujoco.py) goes through `before_run`:
it reads the load average, waits up to `settle_seconds` for the 1-minute
figure to fall to `max_per_core` x cores (the run before it leaves its own load
behind for a minute or two), and raises `TooBusy` if it does not. `after_run`
reads it again. Both land in the run's JSON record.

The load is read from a file in /proc/loadavg's format (what os.getloadavg
reads), so that a test can hand it another file instead of loading the machine.
"""

import dataclasses
import os
import time
from typing import Callable, Tuple

LOADAVG = "/proc/loadavg"
MAX_LOAD_PER_CORE = 0.5


class TooBusy(RuntimeError):
  """The machine's load stayed over the limit: the round is not run or reported."""


@dataclasses.dataclass(frozen=True)
class Gate:
  """Where the load is read, the limit per core and how long to wait for it."""
  path: str = LOADAVG
  max_per_core: float = MAX_LOAD_PER_CORE
  settle_seconds: float = 300.0
  cores: int = os.cpu_count() or 1

  def __post_init__(self):
    if self.max_per_core <= 0 or self.settle_seconds < 0 or self.cores < 1:
      raise ValueError(f"load gate: max_per_core must be > 0, settle_seconds >= 0 and "
                       f"cores >= 1; got {self.max_per_core}, {self.settle_seconds}, "
                       f"{self.cores}")

  @property
  def limit(self) -> float:
    return self.max_per_core * self.cores

  def settings(self) -> dict:
    return {"load_file": self.path, "max_load_per_core": self.max_per_core,
            "limit_1min": self.limit, "settle_seconds": self.settle_seconds,
            "cores": self.cores}


def define_gate_flags():
  """The flags of the gate, the same in every race: (load_file, max_load_per_core,
  settle_seconds) flag holders."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  return (
      flags.DEFINE_string("load_file", LOADAVG,
                          "Where the load average is read (/proc/loadavg's format)."),
      flags.DEFINE_float("max_load_per_core", MAX_LOAD_PER_CORE,
                         "A run starts only at a 1-minute load average up to this times "
                         "the cores."),
      flags.DEFINE_float("settle_seconds", 300.0, "How long a run waits for that load."))


def read_load(path: str = LOADAVG) -> Tuple[float, float, float]:
  """The 1, 5 and 15-minute load averages from a /proc/loadavg-style file."""
  try:
    with open(path) as f:
      fields = f.read().split()
    return float(fields[0]), float(fields[1]), float(fields[2])
  except (OSError, ValueError, IndexError) as e:
    raise TooBusy(f"cannot read the load average from {path}: {e}") from e


def refusal(what: str, load: Tuple[float, float, float], gate: Gate, waited: float) -> str:
  """The one line a refused round prints."""
  return (f"refused: {what} not run: load average {load[0]:.2f} (1 min) is over "
          f"{gate.max_per_core:g} per core x {gate.cores} cores = {gate.limit:g} "
          f"after waiting {waited:.0f} s; stop what else runs and start again")


def before_run(what: str, gate: Gate, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.time, poll: float = 5.0) -> dict:
  """Waits for a quiet machine; the load record of the run's start, or TooBusy."""
  start = clock()
  while True:
    load = read_load(gate.path)
    waited = clock() - start
    if load[0] <= gate.limit:
      return {"load_average_start": list(load), "waited_for_quiet_seconds": round(waited, 1)}
    if waited >= gate.settle_seconds:
      raise TooBusy(refusal(what, load, gate, waited))
    sleep(min(poll, max(gate.settle_seconds - waited, 0.0)))


def after_run(gate: Gate) -> dict:
  """The load record of the run's end."""
  try:
    return {"load_average_end": list(read_load(gate.path))}
  except TooBusy as e:
    return {"load_average_end": None, "load_average_end_error": str(e)}
