"""Pong race scores (race_pong.py --modes=score): each library's games from its own logs.

Score = the undiscounted full-game return, rolling mean of the last `window` games:
- tfrl: its `episode/rolling_score` summary (the race passes --score_window);
  its episodes are whole games unless the run has --episodic_life (read from
  its flags.txt, recorded, and warned about: then they are lives);
- Stable-Baselines3: its Monitor CSVs (`<log>/<algo>/PongNoFrameskip-v4_1/<env>.monitor.csv`,
  columns r, l, t after a `#{"t_start": ...}` line). rl-zoo3 wraps Monitor
  around the raw env, inside AtariWrapper, so a row is a whole game
  (AtariWrapper's life-loss episodes and reward clipping sit outside it; Pong
  has no lives anyway), r is the unclipped return and l counts emulator frames.
"""

import json
import os
import statistics

import numpy as np

from benchmarks import charts
from benchmarks.peers import runs

TARGET = 18


def monitor_episodes(rundir):
  """SB3's finished games from its Monitor CSVs: [(end wall time, return, frames)]."""
  episodes = []
  for root, _, files in os.walk(os.path.join(rundir, "logs")):
    for name in files:
      if not name.endswith(".monitor.csv"):
        continue
      with open(os.path.join(root, name)) as f:
        t_start = json.loads(f.readline()[1:])["t_start"]
        f.readline()  # r,l,t
        for line in f:
          parts = line.strip().split(",")
          if len(parts) >= 3:
            episodes.append((t_start + float(parts[2]), float(parts[0]), int(parts[1])))
  return sorted(episodes)


def tfrl_curve(rundir, start, window):
  del window  # the run's own --score_window
  scores = runs.scalars(rundir, ["episode/rolling_score"])
  episodes = {p["step"]: p["value"] for p in runs.scalars(rundir, ["counters/episodes"])}
  return [{"minutes": (p["wall_time"] - start) / 60, "frames": p["step"],
           "episodes": int(episodes.get(p["step"], 0)), "score": p["value"]} for p in scores]


def tfrl_episodic_life(rundir):
  """Whether the tfrl run ended episodes at lost lives (its flags.txt): then its
  rolling score is over lives, not whole games, and is not the race's score."""
  try:
    with open(os.path.join(rundir, "flags.txt")) as f:
      return any(line.strip() == "--episodic_life" for line in f)
  except OSError:
    return None


def sb3_curve(rundir, start, window, frame_points):
  """`frame_points`: (wall time, step) points of the run's log and frames per step."""
  episodes = monitor_episodes(rundir)
  points, per_step = frame_points
  rolling = runs.rolling_mean([e[1] for e in episodes], window)
  frames_at = np.cumsum([e[2] for e in episodes]) if episodes else []
  if points:  # frames at each game's end, from the training log's step counter
    times = [p["wall_time"] for p in points]
    steps = [p["step"] * per_step for p in points]
    frames_at = np.interp([e[0] for e in episodes], times, steps)
  return [{"minutes": (e[0] - start) / 60, "frames": int(frames), "episodes": i + 1,
           "score": s, "game_return": e[1]}
          for i, (e, s, frames) in enumerate(zip(episodes, rolling, frames_at))]


def summarize_curve(curve, minutes, window):
  inside = [c for c in curve if c["minutes"] <= minutes]
  full = [c for c in inside if c["episodes"] >= window]
  reached = next((c for c in full if c["score"] >= TARGET), None)
  last = inside[-1] if inside else None
  return {"score_at_end": last and last["score"], "episodes_at_end": last and last["episodes"],
          "frames_at_end": last and last["frames"],
          "minutes_to_18": reached and reached["minutes"],
          "frames_to_18": reached and reached["frames"]}


def over_seeds(results):
  """Per row: the end scores of its seeds, their mean and range."""
  by_row = {}
  for r in results:
    if r.get("score_at_end") is not None:
      by_row.setdefault(r["row"], []).append((r["seed"], r["score_at_end"]))
  return {row: {"seeds": [s for s, _ in pairs], "scores_at_end": [v for _, v in pairs],
                "mean": statistics.fmean(v for _, v in pairs),
                "min": min(v for _, v in pairs), "max": max(v for _, v in pairs)}
          for row, pairs in by_row.items()}


def chart(record, path, window):
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
  rows = sorted({r["row"] for r in record["score"]})
  styles = ("-", "--", ":", "-.")
  for r in record["score"]:
    curve = r["curve"]
    colour = charts.OURS if r["row"] == "tfrl" else charts.PEER
    ax.plot([c["minutes"] for c in curve], [c["score"] for c in curve], color=colour,
            ls=styles[rows.index(r["row"]) % len(styles)], lw=1.1,
            label=f"{r['row']} (seed {r['seed']})")
  ax.axhline(TARGET, color="#cccccc", lw=0.8, ls="--")
  ax.set_xlabel("minutes (wall clock, from process start)")
  ax.set_ylabel(f"rolling mean of {window} full games")
  ax.set_title(f"Pong score against wall clock\n{charts.machine(record)}", fontsize=10)
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path)
  plt.close(fig)
