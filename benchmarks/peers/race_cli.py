"""The command line the races share (race_pong.py, race_mujoco.py), around their runs.

- `define_output_flags`: where a race writes (--workdir, --output, --chart) and
  how (--dry_run, --append), the same flags in each race.
- `gate`: the quiet gate (benchmarks/peers/quiet.py) from its flags; bad
  settings are a usage error.
- `start`: the checks, the work folder and the record of what will run; for a
  dry run that record is written and nothing runs.
- `running`: around a race's runs: a refused run leaves the record so far in
  <workdir>/partial.json and exits 3; a finished race records the load at its end.
- `fmt`: a figure for a table, "-" for none.
"""

import contextlib
import dataclasses
import os
import sys
import tempfile
from typing import Callable, Iterator, Optional, Sequence, Tuple

from absl import app
from absl import flags

from benchmarks.peers import quiet
from benchmarks.peers import runs

REFUSED_EXIT = 3


@dataclasses.dataclass(frozen=True)
class OutputFlags:
  """The flag holders of `define_output_flags`."""
  race: str
  workdir: flags.FlagHolder
  output: flags.FlagHolder
  chart: flags.FlagHolder
  dry_run: flags.FlagHolder
  append: flags.FlagHolder

  def chart_path(self) -> str:
    return self.chart.value or os.path.splitext(self.output.value)[0] + ".png"


def define_output_flags(race: str, dry_run_records: str, append_help: str) -> OutputFlags:
  """The output flags of the race `race` (its JSON defaults to <race>.json);
  `dry_run_records` lists what its dry run's record holds."""
  return OutputFlags(
      race=race,
      workdir=flags.DEFINE_string("workdir", "",
                                  "Where runs write (default: a new temp dir)."),
      output=flags.DEFINE_string("output", f"{race}.json", "JSON path."),
      chart=flags.DEFINE_string("chart", "",
                                "Chart PNG (default: the JSON path with .png)."),
      dry_run=flags.DEFINE_bool("dry_run", False, "Write the record of what would run "
                                f"({dry_run_records}) and run nothing."),
      append=flags.DEFINE_bool("append", False, append_help))


def gate(gate_flags: Sequence[flags.FlagHolder]) -> quiet.Gate:
  """The gate of quiet.define_gate_flags()'s holders (load file, limit, settle)."""
  load_file, max_load, settle = gate_flags
  try:
    return quiet.Gate(load_file.value, max_load.value, settle.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from e


def start(argv: Sequence[str], out: OutputFlags, check_flags: Callable[[], quiet.Gate],
          new_record: Callable[[quiet.Gate, str], dict]
          ) -> Optional[Tuple[quiet.Gate, dict, str]]:
  """(gate, record, workdir) of a race about to run; None after a dry run."""
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  race_gate = check_flags()
  workdir = out.workdir.value or tempfile.mkdtemp(prefix=f"tfrl_{out.race}_")
  record = new_record(race_gate, workdir)
  if out.dry_run.value:
    record["dry_run"] = True
    runs.write_json(record, out.output.value)
    print(f"dry run, nothing ran; JSON: {out.output.value}")
    return None
  return race_gate, record, workdir


@contextlib.contextmanager
def running(race_gate: quiet.Gate, record: dict, workdir: str) -> Iterator[None]:
  """Around the runs: quiet.TooBusy writes `record` as <workdir>/partial.json,
  prints its one line and exits with REFUSED_EXIT; otherwise the record gets
  the load average at the end."""
  try:
    yield
  except quiet.TooBusy as e:
    runs.write_json(record, os.path.join(workdir, "partial.json"))
    print(str(e), file=sys.stderr, flush=True)
    sys.exit(REFUSED_EXIT)
  record["load_average_end"] = list(quiet.read_load(race_gate.path))


def fmt(value, spec: str) -> str:
  return "-" if value is None else format(value, spec)
