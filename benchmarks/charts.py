"""Draws benchmark result JSON as charts (PNG) for the docs.

    python benchmarks/charts.py env benchmarks/results/env_throughput_zen4.json \\
        docs/images/env_throughput.png
    python benchmarks/charts.py ga benchmarks/results/ga_throughput_zen4.json \\
        docs/images/ga_throughput.png
    python benchmarks/charts.py ga3c benchmarks/results/ga3c_throughput_zen4.json \\
        docs/images/ga3c_throughput.png
    python benchmarks/charts.py tradeoff benchmarks/results/td3_study_halfcheetah_zen5.json \\
        docs/images/td3_halfcheetah_tradeoff.png
    python benchmarks/charts.py curve benchmarks/results/ga3c_pong_zen4.json \\
        docs/images/ga3c_pong.png --ylabel="rolling score (100 episodes)" \\
        --title="GA3C on Pong: rolling score over 100 episodes" \\
        --label="GA3C, flags/ga3c_pong.flags, Zen 4 VM (2 cores)"
    python benchmarks/charts.py curve benchmarks/results/ga_frostbite_zen4.json \\
        docs/images/ga_frostbite.png --ylabel="elite score (mean of 5 episodes)" \\
        --title="Deep GA on Frostbite: elite score" \\
        --label="GA, flags/ga_frostbite_small.flags, Zen 4 VM (2 cores)"

`tradeoff`: a `td3_study.py` JSON's eval return against average compression,
one point per finished run (seed), one marker per preset. `env`: frames/s of
each row of `env_throughput.py` (tfrl's rows in one colour, the peers in
another). `ga`: each GA run's median round ratio to the
best env-only run of `ga_throughput.py`. `ga3c`: env-only against training
frames/s of `ga3c_throughput.py`. The machine and date come from the JSON's
provenance and go into the title. `curve`: a learning curve stored in the
JSON's `curve` (points with `frames`, `seconds` and the score field, `--y`),
drawn by `tfrl.plot` against frames and wall-clock time. Rows and axes are
labelled in words; `--xlabel` / `--ylabel` replace the value axis's and the
other axis's labels (for `curve`: the frames axis and the score axis).
"""

import json
import os
import re

from absl import app
from absl import flags
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

_XLABEL = flags.DEFINE_string("xlabel", "", "Label of the value axis (curve: the frames axis); "
                              "empty: the chart's own words.")
_YLABEL = flags.DEFINE_string("ylabel", "", "Label of the other axis (curve: the score axis); "
                              "empty: none for bar charts, the score field in words for curve.")
_TITLE = flags.DEFINE_string("title", "", "Title; empty: the chart's own (bar charts: with the "
                             "machine and date).")
_LABEL = flags.DEFINE_string("label", "", "curve: the legend label; empty: the JSON's file name.")
_Y = flags.DEFINE_string("y", "", "curve: the score field of each point; empty: rolling_score "
                         "or elite, whichever the points hold.")

OURS, PEER = "#1f77b4", "#999999"

# curve: a score field in words when --ylabel gives none, and its tfrl tag.
CURVE_FIELDS = {"rolling_score": ("rolling score", "episode/rolling_score"),
                "elite": ("elite score", "ga/elite")}
PRECISION_WORDS = {"float32": "float32", "bfloat16": "bfloat16 kernels",
                   "bfloat16_conv_inputs": "bfloat16 kernels + conv inputs"}
ENV_ROW_WORDS = {"tfrl op env, tf.function": "tfrl op env, tf.function loop"}


def machine(record, date=True):
  """The CPU model, cores and (by default) date of a record's provenance, for a chart's title."""
  prov = record.get("provenance", record)
  cpu = prov.get("cpu_model") or record.get("processor") or "?"
  if ";" in cpu:  # "AMD EPYC (family 25, model 17; avx2, ...)": the flags are too long
    cpu = cpu.split(";")[0] + ")"
  line = f"{cpu}, {prov.get('cores', record.get('cores', '?'))} cores"
  return f"{line}, {(prov.get('date') or '')[:10]}" if date else line


def _bars(labels, values, colours, xlabel, title, out, fmt="{:,.0f}"):
  height = 0.45 * len(labels) + 1.2
  fig, ax = plt.subplots(figsize=(7.5, height), dpi=100)
  ys = range(len(labels))[::-1]
  ax.barh(list(ys), values, color=colours)
  ax.set_yticks(list(ys), labels)
  ax.set_xlabel(_XLABEL.value or xlabel)
  if _YLABEL.value:
    ax.set_ylabel(_YLABEL.value)
  ax.set_title(_TITLE.value or title, fontsize=10)
  for y, v in zip(ys, values):
    ax.text(v, y, " " + fmt.format(v), va="center", fontsize=8)
  ax.set_xlim(0, max(values) * 1.18)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  fig.savefig(out)
  plt.close(fig)


def env_chart(record, out):
  rows = [r for r in record["results"] if r.get("frames_per_second")]
  labels = [f"{ENV_ROW_WORDS.get(r['name'], r['name'])} ({r['num_envs']})" for r in rows]
  values = [r["frames_per_second"] for r in rows]
  colours = [OURS if r["name"].startswith("tfrl") else PEER for r in rows]
  _bars(labels, values, colours, "frames/s (best round; emulators in brackets)",
        f"Pong env throughput\n{machine(record)}", out)


def ga_run_words(run):
  """A `ga_throughput.py` row name in words ("env-only groups=2 loop" ->
  "env-only, graph loop, 2 slot groups"); a name it does not know as it is."""
  env = re.fullmatch(r"env-only groups=(\d+)( loop)?", run)
  if env:
    how = "graph loop" if env.group(2) else "one call per step"
    return f"env-only, {how}, {env.group(1)} slot groups"
  ga = re.fullmatch(r"GA (\w+) (\w+) (\w+) g=(\d+) eps=(\d+)", run)
  if ga:
    arch, precision, inference, _, episodes = ga.groups()
    return (f"GA, {arch} net, {PRECISION_WORDS.get(precision, precision)},\n"
            f"{inference} inference, {episodes} episodes per network")
  return run


def ga_chart(record, out):
  rows = record["results"]
  labels = [ga_run_words(r["run"]) for r in rows]
  values = [r["median_round_wall_ratio"] for r in rows]
  colours = [PEER if r["run"].startswith("env-only") else OURS for r in rows]
  _bars(labels, values, colours, "median round ratio to the best env-only frames/s",
        f"GA generation vs env-only\n{machine(record)}", out, fmt="{:.2f}")


def ga3c_chart(record, out):
  labels = ["env only (random actions)", "GA3C training end to end"]
  values = [record["env_only_frames_per_second"], record["training"]["frames_per_second"]]
  _bars(labels, values, [PEER, OURS], f"frames/s ({record['emulators']} emulators)",
        f"GA3C on Pong\n{machine(record)}", out)


def curve_chart(record, out, path):
  """`record["curve"]` drawn as tfrl.plot draws a run, against frames and wall time."""
  from tfrl import plot  # pylint: disable=import-outside-toplevel
  points = record["curve"]
  field = _Y.value or next((f for f in CURVE_FIELDS if f in points[0]), "")
  if field not in points[0]:
    raise app.UsageError(f"{path}: its curve's points have no '{field or 'rolling_score'}' "
                         f"(they hold {', '.join(points[0])}): pass --y.")
  words, tag = CURVE_FIELDS.get(field, (field, field))
  column = lambda key: np.asarray([p[key] for p in points], np.float64)
  curve = plot.Curve(path, tag, np.arange(len(points)), column(field), column("frames"),
                     column("seconds"), "frames", _YLABEL.value or words)
  config = plot.PlotConfig(logdirs=(path,), out=out, title=_TITLE.value,
                           xlabel=_XLABEL.value, ylabel=_YLABEL.value)
  label = _LABEL.value or os.path.basename(path)
  fig = plot.draw([(label, [curve])], config)
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  fig.savefig(out, dpi=config.dpi)


def tradeoff_chart(record, out):
  """A `td3_study.py` JSON: eval return against average compression, one point
  per finished run, one marker per preset (the first preset's mean return, the
  dense baseline, as a dashed line, and 95% of it dotted)."""
  done = [r for r in record["runs"] if r.get("completed") and r.get("eval_return") is not None]
  if not done:
    raise app.UsageError("the study JSON holds no finished run to draw")
  fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=100)
  markers = "osD^v<>P*X"
  for i, preset in enumerate(record["presets"]):
    mine = [r for r in done if r["preset"] == preset]
    if mine:
      ax.scatter([100 * (r["average_compression_ratio"] or 0.0) for r in mine],
                 [r["eval_return"] for r in mine], marker=markers[i % len(markers)],
                 s=45, label=f"{preset} ({len(mine)} seed{'s' if len(mine) > 1 else ''})")
  baseline = [r["eval_return"] for r in done if r["preset"] == record["presets"][0]]
  if baseline:
    mean = float(np.mean(baseline))
    ax.axhline(mean, color=PEER, linestyle="--", linewidth=1)
    ax.axhline(0.95 * mean, color=PEER, linestyle=":", linewidth=1)
  ax.set_xlabel(_XLABEL.value or "average compression over training (%)")
  ax.set_ylabel(_YLABEL.value or "eval return (10 deterministic episodes)")
  ax.set_title(_TITLE.value or f"Return against compression, one point per seed\n"
               f"{machine(record)}", fontsize=10)
  ax.legend(fontsize=8, loc="lower left")
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  fig.savefig(out)
  plt.close(fig)


CHARTS = {"env": env_chart, "ga": ga_chart, "ga3c": ga3c_chart, "tradeoff": tradeoff_chart}


def main(argv):
  kinds = [*CHARTS, "curve"]
  if len(argv) != 4 or argv[1] not in kinds:
    raise app.UsageError(f"usage: charts.py {{{'|'.join(kinds)}}} RESULT.json OUT.png [flags]")
  kind, path, out = argv[1:]
  with open(path) as f:
    record = json.load(f)
  if kind == "curve":
    curve_chart(record, out, path)
  else:
    CHARTS[kind](record, out)
  print(f"wrote {out}")


if __name__ == "__main__":
  app.run(main)
