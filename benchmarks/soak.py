"""Soak: GA3C and the GA side by side for an hour, their memory and files sampled.

  python benchmarks/soak.py --minutes=60

Starts `python -m tfrl.ga3c` and `python -m tfrl.ga` on their presets (each
with a fresh logdir), samples every --sample_seconds the resident memory
(VmRSS) and the open file descriptors of each process, and stops both with
SIGINT at the end (their final checkpoints are written as on any Ctrl-C).
Memory is flat when it grows by less than 5% between --warmup_minutes and
the end. Prints a table and writes JSON (--output) with every sample.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MINUTES = flags.DEFINE_float("minutes", 60.0, "How long both runs play.")
_WARMUP = flags.DEFINE_float("warmup_minutes", 15.0,
                             "Growth is measured from this point to the end.")
_SAMPLE = flags.DEFINE_float("sample_seconds", 10.0, "Seconds between samples.")
_OUTPUT = flags.DEFINE_string("output", "soak.json", "JSON results path.")

RUNS = {
  "ga3c": ["-m", "tfrl.ga3c", "--flagfile=flags/ga3c_pong.flags"],
  "ga": ["-m", "tfrl.ga", "--flagfile=flags/ga_frostbite_small.flags"],
}


def sample(pid: int):
  """(RSS bytes, open file descriptors) of a live process, or None."""
  try:
    with open(f"/proc/{pid}/status") as f:
      rss = next(int(line.split()[1]) * 1024 for line in f
                 if line.startswith("VmRSS:"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
  except (OSError, StopIteration):
    return None
  return rss, fds


def at(samples, minute):
  """The first sample at or after `minute`."""
  return next((s for s in samples if s["minute"] >= minute), samples[-1])


def main(argv):
  del argv
  record = provenance.provenance()
  work = tempfile.mkdtemp(prefix="tfrl_soak_")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  procs, logs = {}, {}
  for name, args in RUNS.items():
    logs[name] = open(os.path.join(work, f"{name}.log"), "w")
    procs[name] = subprocess.Popen(
        [sys.executable, *args, f"--logdir={os.path.join(work, name)}"],
        cwd=_ROOT, env=env, stdout=logs[name], stderr=subprocess.STDOUT)
  samples = {name: [] for name in RUNS}
  start = time.time()
  try:
    while time.time() - start < _MINUTES.value * 60:
      minute = (time.time() - start) / 60
      for name, proc in procs.items():
        got = sample(proc.pid) if proc.poll() is None else None
        if got is not None:
          samples[name].append({"minute": minute, "rss": got[0], "fds": got[1]})
      if any(proc.poll() is not None for proc in procs.values()):
        break
      time.sleep(_SAMPLE.value)
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    for proc in procs.values():
      try:
        proc.wait(timeout=300)
      except subprocess.TimeoutExpired:
        proc.kill()
    for f in logs.values():
      f.close()

  rows = []
  print(f"\n{'run':<6} | {'exit':>4} | {'minutes':>7} | {'RSS at warm-up MiB':>18} | "
          f"{'RSS at end MiB':>14} | {'growth':>7} | {'fds warm-up/end':>15} | flat (< 5%)")
  for name, runs in samples.items():
    if not runs:
      rows.append({"run": name, "exit": procs[name].returncode, "samples": 0})
      print(f"{name:<6} | {procs[name].returncode!s:>4} | no samples")
      continue
    warm, end = at(runs, _WARMUP.value), runs[-1]
    growth = end["rss"] / warm["rss"] - 1.0
    rows.append({"run": name, "exit": procs[name].returncode,
                 "minutes": end["minute"], "rss_warmup": warm["rss"],
                 "rss_end": end["rss"], "rss_at_15_min": at(runs, 15)["rss"],
                 "growth_after_warmup": growth, "fds_warmup": warm["fds"],
                 "fds_end": end["fds"], "flat": growth < 0.05, "samples": runs})
    print(f"{name:<6} | {procs[name].returncode!s:>4} | {end['minute']:>7.1f} | "
          f"{warm['rss'] / 2**20:>18.0f} | {end['rss'] / 2**20:>14.0f} | "
          f"{growth:>6.1%} | {warm['fds']:>7}/{end['fds']:<7} | {growth < 0.05}")
  with open(_OUTPUT.value, "w") as f:
    json.dump({"provenance": record, "minutes": _MINUTES.value,
                   "warmup_minutes": _WARMUP.value, "logs": work, "results": rows}, f,
                  indent=1)
  print(f"logs in {work}; wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
