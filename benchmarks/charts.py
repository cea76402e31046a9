"""Draws benchmark result JSON as bar charts (PNG) for the docs.

    python benchmarks/charts.py env benchmarks/results/env_throughput_zen4.json \\
        docs/images/env_throughput.png
    python benchmarks/charts.py ga benchmarks/results/ga_throughput_zen4.json \\
        docs/images/ga_throughput.png
    python benchmarks/charts.py ga3c benchmarks/results/ga3c_throughput_zen4.json \\
        docs/images/ga3c_throughput.png

`env`: frames/s of each row of `env_throughput.py` (tfrl's rows in one
colour, the peers in another). `ga`: each GA run's median round ratio to the
best env-only run of `ga_throughput.py`. `ga3c`: env-only against training
frames/s of `ga3c_throughput.py`. The machine and date come from the JSON's
provenance and go into the title.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

OURS, PEER = "#1f77b4", "#999999"


def _machine(record):
  prov = record.get("provenance", record)
  cpu = prov.get("cpu_model") or record.get("processor") or "?"
  if ";" in cpu:  # "AMD EPYC (family 25, model 17; avx2, ...)": the flags are too long
    cpu = cpu.split(";")[0] + ")"
  date = (prov.get("date") or "")[:10]
  return f"{cpu}, {prov.get('cores', record.get('cores', '?'))} cores, {date}"


def _bars(labels, values, colours, xlabel, title, out, fmt="{:,.0f}"):
  height = 0.45 * len(labels) + 1.2
  fig, ax = plt.subplots(figsize=(7.5, height), dpi=100)
  ys = range(len(labels))[::-1]
  ax.barh(list(ys), values, color=colours)
  ax.set_yticks(list(ys), labels)
  ax.set_xlabel(xlabel)
  ax.set_title(title, fontsize=10)
  for y, v in zip(ys, values):
    ax.text(v, y, " " + fmt.format(v), va="center", fontsize=8)
  ax.set_xlim(0, max(values) * 1.18)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  fig.savefig(out)
  plt.close(fig)


def env_chart(record, out):
  rows = [r for r in record["results"] if r.get("frames_per_second")]
  labels = [f"{r['name']} ({r['num_envs']})" for r in rows]
  values = [r["frames_per_second"] for r in rows]
  colours = [OURS if r["name"].startswith("tfrl") else PEER for r in rows]
  _bars(labels, values, colours, "frames/s (best round; emulators in brackets)",
        f"Pong env throughput\n{_machine(record)}", out)


def ga_chart(record, out):
  rows = record["results"]
  labels = [r["run"] for r in rows]
  values = [r["median_round_wall_ratio"] for r in rows]
  colours = [PEER if r["run"].startswith("env-only") else OURS for r in rows]
  _bars(labels, values, colours, "median round ratio to the best env-only frames/s",
        f"GA generation vs env-only\n{_machine(record)}", out, fmt="{:.2f}")


def ga3c_chart(record, out):
  labels = ["env only (random actions)", "GA3C training end to end"]
  values = [record["env_only_frames_per_second"], record["training"]["frames_per_second"]]
  _bars(labels, values, [PEER, OURS], f"frames/s ({record['emulators']} emulators)",
        f"GA3C on Pong\n{_machine(record)}", out)


CHARTS = {"env": env_chart, "ga": ga_chart, "ga3c": ga3c_chart}


def main(argv):
  if len(argv) != 4 or argv[1] not in CHARTS:
    sys.exit(f"usage: charts.py {{{'|'.join(CHARTS)}}} RESULT.json OUT.png")
  with open(argv[2]) as f:
    record = json.load(f)
  CHARTS[argv[1]](record, argv[3])
  print(f"wrote {argv[3]}")


if __name__ == "__main__":
  main(sys.argv)
