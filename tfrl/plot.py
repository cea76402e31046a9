"""Learning curves from the TensorBoard event files tfrl writes.

    python -m tfrl.plot --logdir=/tmp/tfrl_ga3c_pong --out=pong.png
    python -m tfrl.plot --logdir=runs/gst_s0 --label=gst --logdir=runs/gst_s1 --label=gst \\
        --logdir=runs/dense_s0 --label=dense --logdir=runs/dense_s1 --label=dense \\
        --out=halfcheetah.png --x=frames

Draws one panel per `--x` (default both): the score against frames (env steps
for TD3) and against wall-clock time. Each `--logdir` is one run; runs given
the same `--label` are seeds of one configuration and are drawn as their mean
with a band (`--band=minmax|std|none`) over the range of x all of them cover;
a label with one run is drawn as it is.

The score tag is found per run from the tags it holds, unless `--tag` names
one: GA3C's `episode/rolling_score`, `ga/elite`, `es/elite`,
`random_search/elite`, TD3's `eval/return` (or `train/episode_return` when
the run evaluated fewer than twice, e.g. `--eval_every=0`). For x = frames the
neuroevolution tags, written per generation, are placed at the generation's
`<algorithm>/frames`; every other tag at its step (GA3C: frames, TD3: env
steps). Wall-clock time is counted from the run's first event, with the
pauses between a run and its `--resume` left out; points a resumed run wrote
again (from its checkpoint's step on) replace the earlier ones, as
TensorBoard does.

A `--logdir` may also name a CSV file of one run's scalars, such as a curve
a benchmark kept in its JSON after the run's folder was gone: a header
`step,seconds,<tag>,<tag>,...` and a row per step, where `seconds` is the
run's own clock (an empty cell: the tag has no point at that step).

The y axis is labelled in words for the tags tfrl writes ("rolling score
(100 episodes)" for `episode/rolling_score`, the count read from the run's
`flags.txt`), and with the tag itself for any other; `--ylabel` and
`--xlabel` (the frames axis) replace them.
"""

import csv
import dataclasses
import glob
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags
import numpy as np

from tfrl import cli
from tfrl import flagconfig

PROG = "tfrl.plot"
EVENT_GLOB = "events.out.tfevents.*"

# The score tag of each system, in the order they are looked for.
GA3C_SCORE = "episode/rolling_score"
NEUROEVOLUTION_SCORES = ("ga/elite", "es/elite", "random_search/elite")
TD3_EVAL, TD3_TRAIN = "eval/return", "train/episode_return"
DEFAULT_TAGS = (GA3C_SCORE, *NEUROEVOLUTION_SCORES, TD3_EVAL, TD3_TRAIN)

# Axis words for the tags tfrl writes. "{flag}" is the run's value of that
# flag, from its flags.txt; a run without one gets the words before " (".
TAG_WORDS = {
    GA3C_SCORE: "rolling score ({score_window} episodes)",
    "ga/elite": "elite score (mean of {elite_episodes} episodes)",
    "random_search/elite": "elite score (mean of {elite_episodes} episodes)",
    "es/elite": "centre's score (mean of {center_episodes} episodes)",
    TD3_EVAL: "evaluation return (mean of {eval_episodes} episodes)",
    TD3_TRAIN: "training episode return",
}
# GA, ES and random search write these per generation as "<algorithm>/<key>".
GENERATION_WORDS = {
    "best": "best individual's score", "mean": "population's mean score",
    "frames": "frames", "frames_per_second": "frames/s",
    "generation_seconds": "seconds per generation", "nan_returns": "NaN returns",
}


@dataclasses.dataclass(frozen=True)
class PlotConfig:
  """What to draw; `logdirs` / `labels` come from the repeated --logdir / --label."""
  out: str = flagconfig.field("curve.png", "PNG to write (its folder is created).")
  tag: str = flagconfig.field(
      "", "Scalar tag to plot in every run; empty: each run's score tag (see the module doc).")
  x: Tuple[str, ...] = flagconfig.field(
      ("frames", "wall"), "x axes, one panel each: frames (env steps for TD3) and/or wall.")
  band: str = flagconfig.field("minmax", "Spread drawn around the mean of runs with one label.",
                               choices=("minmax", "std", "none"))
  width: int = flagconfig.field(0, "Image width in pixels; 0: 420 per panel.")
  height: int = flagconfig.field(320, "Image height in pixels.")
  dpi: int = flagconfig.field(100, "Dots per inch (sets the font size relative to the image).")
  title: str = flagconfig.field("", "Figure title; empty: none.")
  ylabel: str = flagconfig.field(
      "", "y axis label; empty: the tag in words (e.g. 'rolling score (100 episodes)').")
  xlabel: str = flagconfig.field(
      "", "Label of the frames axis; empty: its unit (frames, env steps or step).")
  logdirs: Tuple[str, ...] = flagconfig.field(
      (), "A run's TensorBoard directory (or CSV of scalars); repeat for more runs.",
      flag="logdir", multi=True)
  labels: Tuple[str, ...] = flagconfig.field(
      (), "Legend label of each --logdir, in the same order; runs with one label are averaged "
      "(seeds of one config).", flag="label", multi=True)

  def __post_init__(self):
    if not self.logdirs:
      raise ValueError(
          "--logdir is required (a run's TensorBoard directory; repeat it for more runs).")
    if self.labels and len(self.labels) != len(self.logdirs):
      raise ValueError(f"{len(self.labels)} --label for {len(self.logdirs)} --logdir: give one "
                       "per --logdir, in the same order, or none.")
    bad = [x for x in self.x if x not in ("frames", "wall")]
    if bad or not self.x:
      raise ValueError(f"--x={','.join(self.x)}: each must be 'frames' or 'wall'.")
    if self.width < 0 or self.height <= 0 or self.dpi <= 0:
      raise ValueError("--width must be >= 0, --height and --dpi > 0.")


@dataclasses.dataclass
class Curve:
  """One run's points of one tag, with both x axes."""
  logdir: str
  tag: str
  steps: np.ndarray    # the summary step of each point
  values: np.ndarray
  frames: np.ndarray   # x for --x=frames
  seconds: np.ndarray  # x for --x=wall
  x_unit: str          # "frames", "env steps" or "step"
  words: str = ""      # the tag in words, for the y axis

  def xs(self, axis: str) -> np.ndarray:
    return self.frames if axis == "frames" else self.seconds


@dataclasses.dataclass
class Scalars:
  """A run's scalars: tag -> (steps, run seconds, values), in step order."""
  logdir: str
  series: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]


def event_files(logdir: str) -> List[str]:
  files = sorted(glob.glob(os.path.join(logdir, EVENT_GLOB)))
  if files:
    return files
  if not os.path.isdir(logdir):
    raise FileNotFoundError(f"--logdir={logdir} does not exist.")
  nested = sorted({os.path.dirname(p) for p in
                   glob.glob(os.path.join(logdir, "**", EVENT_GLOB), recursive=True)})
  hint = (f" (its subfolders {', '.join(nested[:4])}{' ...' if len(nested) > 4 else ''} have "
          "some: pass each as --logdir)") if nested else ""
  raise FileNotFoundError(f"--logdir={logdir} holds no TensorBoard event files "
                          f"({EVENT_GLOB}){hint}.")


def _read_file(path: str):
  """(wall times of all events, [(tag, step, wall, value)]) of one event file."""
  # pylint: disable=import-outside-toplevel
  from tensorboard.backend.event_processing import event_file_loader
  from tensorboard.util import tensor_util
  times, points = [], []
  for event in event_file_loader.EventFileLoader(path).Load():
    times.append(event.wall_time)
    for value in event.summary.value:
      if value.HasField("tensor"):
        array = tensor_util.make_ndarray(value.tensor)
      elif value.HasField("simple_value"):
        array = np.asarray(value.simple_value)
      else:
        continue
      if array.ndim == 0 and array.dtype.kind in "fiub":
        points.append((value.tag, int(event.step), event.wall_time, float(array)))
  return times, points


def _run_clock(spans: Sequence[Tuple[float, float]]):
  """Maps a wall time to seconds of the run, leaving out time between spans."""
  merged = []
  for start, end in sorted(spans):
    if merged and start <= merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], end)
    else:
      merged.append([start, end])
  offsets = np.cumsum([0.0] + [e - s for s, e in merged[:-1]])

  def seconds(t: float) -> float:
    i = max(0, int(np.searchsorted([s for s, _ in merged], t, side="right")) - 1)
    return float(offsets[i] + min(max(t - merged[i][0], 0.0), merged[i][1] - merged[i][0]))

  return seconds


def read_csv_scalars(path: str) -> Scalars:
  """A run's scalars from a CSV file (`step,seconds,<tag>,...`, see the module doc)."""
  with open(path, newline="") as f:
    rows = list(csv.reader(f))
  header = rows[0] if rows else []
  if header[:2] != ["step", "seconds"] or len(header) < 3:
    raise ValueError(f"--logdir={path}: a CSV of scalars starts with the header "
                     f"'step,seconds,<tag>,...'; this one has '{','.join(header)}'.")
  series = {}
  for column, tag in enumerate(header[2:], start=2):
    try:
      kept = sorted((int(row[0]), float(row[1]), float(row[column]))
                    for row in rows[1:] if len(row) > column and row[column] != "")
    except ValueError as e:
      raise ValueError(f"--logdir={path}: column '{tag}': {e}") from None
    if kept:
      steps, seconds, values = (np.asarray(c) for c in zip(*kept))
      series[tag] = (steps.astype(np.int64), seconds.astype(np.float64),
                     values.astype(np.float64))
  return Scalars(path, series)


def read_scalars(logdir: str) -> Scalars:
  """Every scalar of a run's event files (files in the order they were written),
  or of its CSV file."""
  if logdir.endswith(".csv") and os.path.isfile(logdir):
    return read_csv_scalars(logdir)
  files = []
  for path in event_files(logdir):
    times, points = _read_file(path)
    if times:
      files.append((min(times), max(times), points))
  files.sort(key=lambda f: f[0])
  clock = _run_clock([(start, end) for start, end, _ in files])
  series: Dict[str, List[Tuple[int, float, float]]] = {}
  for _, _, points in files:
    first_step: Dict[str, int] = {}
    for tag, step, wall, value in points:
      kept = series.setdefault(tag, [])
      if tag not in first_step:
        # A resumed run writes again from its checkpoint's step: drop what the
        # earlier files wrote from there on (TensorBoard's purge).
        first_step[tag] = step
        kept[:] = [p for p in kept if p[0] < step]
      kept.append((step, clock(wall), value))
  out = {}
  for tag, kept in series.items():
    kept.sort(key=lambda p: p[0])
    steps, seconds, values = (np.asarray(c) for c in zip(*kept))
    out[tag] = (steps.astype(np.int64), seconds.astype(np.float64), values.astype(np.float64))
  return Scalars(logdir, out)


def run_flags(logdir: str) -> Dict[str, str]:
  """The `--name=value` lines of the run's flags.txt ({} without one)."""
  try:
    with open(os.path.join(logdir, "flags.txt")) as f:
      lines = f.read().splitlines()
  except OSError:
    return {}
  pairs = (line[2:].split("=", 1) for line in lines if line.startswith("--") and "=" in line)
  return {name: value for name, value in pairs}


def tag_words(tag: str, flag_values: Dict[str, str]) -> str:
  """`tag` in words (see TAG_WORDS), or the tag itself for one tfrl does not name."""
  words = TAG_WORDS.get(tag)
  if words is None:
    prefix, _, key = tag.partition("/")
    if prefix in ("ga", "es", "random_search") and key in GENERATION_WORDS:
      return GENERATION_WORDS[key]
    return tag
  try:
    return words.format(**flag_values)
  except KeyError:  # the run wrote no flags.txt (or not that flag)
    return words.split(" (", 1)[0]


def default_tag(scalars: Scalars) -> str:
  """The run's score tag (see the module doc)."""
  series = scalars.series
  for tag in DEFAULT_TAGS:
    if tag not in series:
      continue
    if tag == TD3_EVAL and len(series[tag][0]) < 2 and TD3_TRAIN in series:
      continue
    return tag
  raise ValueError(f"--logdir={scalars.logdir}: none of the score tags "
                   f"{', '.join(DEFAULT_TAGS)}; pass --tag= one of its scalars: "
                   f"{', '.join(sorted(series)) or '(none)'}.")


def load_curve(logdir: str, tag: Optional[str] = None) -> Curve:
  """The run's curve of `tag` (default: its score tag) on both x axes."""
  scalars = read_scalars(logdir)
  tag = tag or default_tag(scalars)
  if tag not in scalars.series:
    raise ValueError(f"--logdir={logdir} has no scalar '{tag}'; its scalars: "
                     f"{', '.join(sorted(scalars.series)) or '(none)'}.")
  steps, seconds, values = scalars.series[tag]
  prefix = tag.split("/", 1)[0]
  frames_tag = f"{prefix}/frames"
  if "/" in tag and frames_tag in scalars.series and tag != frames_tag:
    # Written per generation: x is the generation's frame count.
    by_step = dict(zip(scalars.series[frames_tag][0].tolist(),
                       scalars.series[frames_tag][2].tolist()))
    keep = np.asarray([s in by_step for s in steps.tolist()], bool)
    steps, seconds, values = steps[keep], seconds[keep], values[keep]
    frames = np.asarray([by_step[s] for s in steps.tolist()], np.float64)
    x_unit = "frames"
  else:
    frames = steps.astype(np.float64)
    if GA3C_SCORE in scalars.series or "counters/episodes" in scalars.series:
      x_unit = "frames"
    elif TD3_EVAL in scalars.series or TD3_TRAIN in scalars.series:
      x_unit = "env steps"
    else:
      x_unit = "step"
  if not len(steps):
    raise ValueError(f"--logdir={logdir}: no points of '{tag}' to plot.")
  return Curve(logdir, tag, steps, values, frames, seconds, x_unit,
               tag_words(tag, run_flags(logdir)))


def default_labels(logdirs: Sequence[str]) -> List[str]:
  """Each run's own label: its folder's name, or its path below the runs' common folder."""
  paths = [os.path.abspath(d) for d in logdirs]
  if len(paths) == 1:
    return [os.path.basename(paths[0]) or paths[0]]
  common = os.path.commonpath(paths)
  labels = [os.path.relpath(p, common) for p in paths]
  return [p if label == "." else label for p, label in zip(paths, labels)]


def group_curves(curves: Sequence[Curve],
                 labels: Sequence[str]) -> List[Tuple[str, List[Curve]]]:
  """Runs by label, in the order labels first appear (no labels: one run each)."""
  if not labels:
    labels = default_labels([c.logdir for c in curves])
  groups: Dict[str, List[Curve]] = {}
  for label, curve in zip(labels, curves):
    groups.setdefault(label, []).append(curve)
  return list(groups.items())


def aggregate(curves: Sequence[Curve], axis: str, band: str = "minmax"):
  """(x, mean, low, high) of runs on the union of their x within the range all cover.

  One run: its own points, with low = high = mean. Each run is linearly
  interpolated at the union of the runs' x values.
  """
  if len(curves) == 1:
    x, y = curves[0].xs(axis), curves[0].values
    return x, y, y, y
  lo = max(c.xs(axis)[0] for c in curves)
  hi = min(c.xs(axis)[-1] for c in curves)
  if lo > hi:
    raise ValueError("the runs of one --label cover no common range of x ("
                     + ", ".join(c.logdir for c in curves) + "); give them different labels.")
  grid = np.unique(np.concatenate([c.xs(axis) for c in curves]))
  grid = grid[(grid >= lo) & (grid <= hi)]
  ys = np.stack([np.interp(grid, c.xs(axis), c.values) for c in curves])
  mean = ys.mean(axis=0)
  if band == "std":
    std = ys.std(axis=0)
    return grid, mean, mean - std, mean + std
  if band == "minmax":
    return grid, mean, ys.min(axis=0), ys.max(axis=0)
  return grid, mean, mean, mean


def _scaled_seconds(groups) -> Tuple[float, str]:
  longest = max(float(c.seconds.max()) if len(c.seconds) else 0.0
                for _, cs in groups for c in cs)
  if longest >= 3 * 3600:
    return 3600.0, "hours"
  if longest >= 3 * 60:
    return 60.0, "minutes"
  return 1.0, "seconds"


def draw(groups: Sequence[Tuple[str, List[Curve]]], config: PlotConfig):
  """The figure: one panel per x axis, one line (and band) per label."""
  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure
  width = config.width or 420 * len(config.x)
  fig = Figure(figsize=(width / config.dpi, config.height / config.dpi), dpi=config.dpi,
               layout="constrained")
  axes = fig.subplots(1, len(config.x), squeeze=False)[0]
  words = sorted({c.words or c.tag for _, cs in groups for c in cs})
  units = sorted({c.x_unit for _, cs in groups for c in cs})
  scale, time_unit = _scaled_seconds(groups)
  for ax, axis in zip(axes, config.x):
    for i, (label, curves) in enumerate(groups):
      color = f"C{i % 10}"
      x, mean, low, high = aggregate(curves, axis, config.band)
      if axis == "wall":
        x = x / scale
      name = label if len(curves) == 1 else f"{label} (mean of {len(curves)})"
      ax.plot(x, mean, color=color, linewidth=1.4, label=name,
              marker="o" if len(x) == 1 else None)
      if len(curves) > 1 and config.band != "none":
        ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
    frames_label = config.xlabel or " / ".join(units)
    ax.set_xlabel(frames_label if axis == "frames" else f"wall-clock {time_unit}")
    ax.set_ylabel(config.ylabel or (words[0] if len(words) == 1 else "score"))
    ax.grid(True, alpha=0.3)
    if axis == "frames":
      ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
  axes[0].legend(fontsize="small", loc="best")
  if config.title:
    fig.suptitle(config.title)
  return fig


def plot(config: PlotConfig):
  """Reads the runs, draws them and writes `config.out`; returns the figure."""
  curves = [load_curve(logdir, config.tag or None) for logdir in config.logdirs]
  groups = group_curves(curves, config.labels)
  fig = draw(groups, config)
  folder = os.path.dirname(os.path.abspath(config.out))
  os.makedirs(folder, exist_ok=True)
  fig.savefig(config.out, dpi=config.dpi)
  return fig


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  flagconfig.define(PlotConfig, fv=fv)
  for field in dataclasses.fields(PlotConfig):
    name = flagconfig.flag_name(field)
    if name in fv:  # listed by --help
      flags.declare_key_flag(name, flag_values=fv)


def config_from_flags(fv: flags.FlagValues = flags.FLAGS) -> PlotConfig:
  return flagconfig.build(PlotConfig, fv=fv)


def main(argv):
  if len(argv) > 1:
    raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = config_from_flags()
  plot(config)
  runs = len(config.logdirs)
  print(f"{PROG}: {runs} run{'s' if runs > 1 else ''} -> {config.out}", file=sys.stdout)


if __name__ == "__main__":
  define_flags()
  cli.run(main, PROG)
