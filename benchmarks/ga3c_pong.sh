#!/usr/bin/env bash
# Long run: GA3C on Pong, then the score curve as CSV + JSON.
#
#   [PRESET=ga3c_pong_a3c] benchmarks/ga3c_pong.sh [LOGDIR] [SECONDS] [extra flags...]
#
# Defaults: PRESET=ga3c_pong (flags/PRESET.flags), LOGDIR=/tmp/tfrl_ga3c_pong,
# SECONDS=10800 (3 hours). Resumes if
# LOGDIR has a checkpoint. Writes LOGDIR/score_curve.csv and
# LOGDIR/score_curve.json ({"provenance": commit, command, CPU, cores and
# date, taken when the run or its latest resume starts; "curve": frames, wall
# seconds, rolling score, episodes}) read from the run's TensorBoard events.
# Stop early with Ctrl-C / SIGTERM: the run checkpoints and the curve is still
# written.
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
LOGDIR="${1:-/tmp/tfrl_ga3c_pong}"
SECONDS_BUDGET="${2:-10800}"
PRESET="${PRESET:-ga3c_pong}"
shift 2 2>/dev/null || shift $#
RESUME=""
if [ -f "$LOGDIR/checkpoints/checkpoint" ]; then RESUME="--resume"; fi
mkdir -p "$LOGDIR"
COMMAND="PRESET=$PRESET benchmarks/ga3c_pong.sh $LOGDIR $SECONDS_BUDGET${*:+ $*}"
"$PYTHON" benchmarks/provenance.py "$COMMAND" > "$LOGDIR/provenance.json" 2>/dev/null

"$PYTHON" -m tfrl.ga3c --flagfile="flags/$PRESET.flags" --logdir="$LOGDIR" \
  --max_seconds="$SECONDS_BUDGET" $RESUME "$@" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null' INT TERM
wait $PID; wait $PID 2>/dev/null

"$PYTHON" - "$LOGDIR" <<'PY'
import csv, glob, json, os, sys
import tensorflow as tf

logdir = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
  for event in tf.compat.v1.train.summary_iterator(path):
    for v in event.summary.value:
      if v.tag in ("episode/rolling_score", "counters/episodes"):
        value = float(tf.make_ndarray(v.tensor)) if v.HasField("tensor") else v.simple_value
        row = rows.setdefault(event.step, {"frames": event.step, "wall_time": event.wall_time})
        row[v.tag.split("/")[1]] = value
curve = [rows[k] for k in sorted(rows) if "rolling_score" in rows[k]]
if curve:
  t0 = min(r["wall_time"] for r in rows.values())
  for r in curve:
    r["seconds"] = round(r.pop("wall_time") - t0, 1)
with open(os.path.join(logdir, "provenance.json")) as f:
  record = json.load(f)
with open(os.path.join(logdir, "score_curve.json"), "w") as f:
  json.dump({"provenance": record, "curve": curve}, f, indent=1)
with open(os.path.join(logdir, "score_curve.csv"), "w", newline="") as f:
  w = csv.DictWriter(f, fieldnames=["frames", "seconds", "rolling_score", "episodes"])
  w.writeheader()
  for r in curve:
    w.writerow({k: r.get(k) for k in w.fieldnames})
last = curve[-1] if curve else {}
print(f"score curve: {len(curve)} points -> {logdir}/score_curve.csv; last: {last}")
PY
