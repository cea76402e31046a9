"""Memory read bandwidth: one core alone, then every core at once.

  python benchmarks/memory_bandwidth.py --output=benchmarks/results/memory_bandwidth_<machine>.json

The bound behind a population of distinct networks: each env step of a slot
group reads every slot's own kernels, which no cache holds once the group's
networks outgrow it. Each process sums a --megabytes float32 array (far beyond
the caches) --repeats times and keeps its best pass; with all cores, every
core runs one such process at the same moment and the rates add up.
"""

import json
import multiprocessing
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import provenance  # pylint: disable=g-import-not-at-top

_MEGABYTES = flags.DEFINE_integer("megabytes", 1024, "Array size per process.")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Passes per process (best kept).")
_OUTPUT = flags.DEFINE_string("output", "memory_bandwidth.json", "JSON path.")


def best_read_rate(megabytes, repeats, start=None):
  """GB/s of the best of `repeats` summing passes over a fresh array."""
  data = np.ones(megabytes * 2**20 // 4, np.float32)
  if start is not None:
    start.wait()
  best = float("inf")
  for _ in range(repeats):
    t = time.perf_counter()
    data.sum()  # float32 pairwise SIMD sum: bound by the reads
    best = min(best, time.perf_counter() - t)
  return data.nbytes / best / 1e9


def _worker(args):
  megabytes, repeats, start = args
  return best_read_rate(megabytes, repeats, start)


def main(argv):
  del argv
  cores = os.cpu_count() or 1
  alone = best_read_rate(_MEGABYTES.value, _REPEATS.value)
  with multiprocessing.Manager() as manager:
    start = manager.Barrier(cores)
    with multiprocessing.Pool(cores) as pool:
      rates = pool.map(_worker, [(_MEGABYTES.value, _REPEATS.value, start)] * cores)
  record = {"provenance": provenance.provenance(), "megabytes": _MEGABYTES.value,
            "repeats": _REPEATS.value, "one_core_gb_per_s": alone,
            "all_cores": cores, "all_cores_gb_per_s_each": rates,
            "all_cores_gb_per_s_total": sum(rates)}
  print(f"read bandwidth: one core {alone:.1f} GB/s; {cores} cores at once "
        f"{sum(rates):.1f} GB/s ({', '.join(f'{r:.1f}' for r in rates)})")
  with open(_OUTPUT.value, "w") as f:
    json.dump(record, f, indent=1)
  print(f"JSON: {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
