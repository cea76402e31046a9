"""Where a profiler trace's time went: op types by self time, per thread group.

  python benchmarks/profile_summary.py LOGDIR/profile [--top=12] [--output=x.json]

Reads the newest run's `.xplane.pb` files under the directory (what
`--profile_steps` of GA3C and `--profile_generation` of the neuroevolution
entry points write), and for every host thread sums each event's self time
(its duration less that of the events nested in it), keyed by op type: the
part of a TensorFlow op's trace name after ':' (`model/conv/Conv2D:Conv2D` ->
`Conv2D`), or the whole name with its `#...#` arguments and digits removed.
Threads are grouped by name without digits (`tf_inter_op_0`..`_7` -> one
group). Prints, per group, the busiest op types with their share of the
group's traced time; the span is the trace's first to last event.
"""

import collections
import glob
import json
import os
import re
import sys

from absl import app
from absl import flags

_TOP = flags.DEFINE_integer("top", 12, "Op types shown per thread group.")
_MIN_SHARE = flags.DEFINE_float("min_share", 0.02, "Thread groups below this share of "
                                "all traced time are summed into one line.")
_OUTPUT = flags.DEFINE_string("output", "", "Optional JSON of the summary.")


def newest_run(profile_dir):
  """The .xplane.pb files of the newest run under a profile directory."""
  runs = glob.glob(os.path.join(profile_dir, "**", "*.xplane.pb"), recursive=True)
  if not runs:
    raise app.UsageError(f"no .xplane.pb under {profile_dir}: is it a run's profile "
                         "directory (LOGDIR/profile)?")
  newest = max({os.path.dirname(p) for p in runs}, key=os.path.getmtime)
  return sorted(glob.glob(os.path.join(newest, "*.xplane.pb")))


def op_type(name):
  name = name.split("#", 1)[0]
  if ":" in name and "::" not in name:
    name = name.rsplit(":", 1)[1]
  return re.sub(r"_?\d+", "", name) or "?"


def thread_group(name):
  return re.sub(r"[_\-/]?\d+", "", name) or "?"


def self_times(events, names):
  """{op type: picoseconds of self time} of one thread's events."""
  out = collections.Counter()
  stack = []  # [(end, key)] of the open events enclosing the current one
  for start, duration, key in sorted(((e.offset_ps, e.duration_ps, names(e)) for e in events),
                                     key=lambda t: (t[0], -t[1])):
    while stack and stack[-1][0] <= start:
      stack.pop()
    if stack:
      out[stack[-1][1]] -= duration  # the parent's time spent in this child
    out[key] += duration
    stack.append((start + duration, key))
  return out


def summarize(paths):
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  groups = collections.defaultdict(collections.Counter)
  threads = collections.defaultdict(set)
  first, last = None, None
  for path in paths:
    with open(path, "rb") as f:
      space = xplane_pb2.XSpace.FromString(f.read())
    for plane in space.planes:
      if not plane.name.startswith("/host:"):
        continue
      meta = plane.event_metadata
      names = lambda e, meta=meta: op_type(meta[e.metadata_id].name)  # pylint: disable=cell-var-from-loop
      for line in plane.lines:
        if not line.events:
          continue
        group = thread_group(line.name)
        threads[group].add(line.name)
        groups[group].update(self_times(line.events, names))
        base = line.timestamp_ns * 1000
        lo = base + min(e.offset_ps for e in line.events)
        hi = base + max(e.offset_ps + e.duration_ps for e in line.events)
        first = lo if first is None else min(first, lo)
        last = hi if last is None else max(last, hi)
  total = sum(sum(c.values()) for c in groups.values()) or 1
  rows = []
  for group, counter in sorted(groups.items(), key=lambda kv: -sum(kv[1].values())):
    busy = sum(counter.values())
    rows.append({"threads": group, "thread_count": len(threads[group]),
                 "seconds": busy / 1e12, "share_of_traced": busy / total,
                 "ops": [{"op": op, "seconds": ps / 1e12, "share": ps / (busy or 1)}
                         for op, ps in counter.most_common() if ps > 0]})
  return {"span_seconds": ((last or 0) - (first or 0)) / 1e12, "groups": rows}


def main(argv):
  if len(argv) != 2:
    raise app.UsageError("give one profile directory, e.g. /tmp/tfrl_ga3c/profile")
  paths = newest_run(argv[1])
  summary = summarize(paths)
  summary["files"] = paths
  print(f"trace: {os.path.dirname(paths[0])}  span {summary['span_seconds']:.2f} s")
  rest = 0.0
  for group in summary["groups"]:
    if group["share_of_traced"] < _MIN_SHARE.value:
      rest += group["seconds"]
      continue
    print(f"\n{group['threads']} ({group['thread_count']} threads): "
          f"{group['seconds']:.2f} s traced, {group['share_of_traced']:.0%} of all")
    for op in group["ops"][:_TOP.value]:
      print(f"  {op['op'][:48]:<48} {op['seconds']:8.3f} s {op['share']:6.1%}")
  if rest:
    print(f"\nother thread groups: {rest:.2f} s")
  if _OUTPUT.value:
    with open(_OUTPUT.value, "w") as f:
      json.dump(summary, f, indent=1)
    print(f"JSON: {_OUTPUT.value}")


if __name__ == "__main__":
  sys.exit(app.run(main))
