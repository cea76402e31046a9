"""`python -m tfrl.plot` on the event files of a real (short) GA run, and on
hand-made event files for seeds, resumes and errors."""

import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image
import tensorflow as tf

from tfrl import plot

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")


def _run(args, check=True):
  out = subprocess.run([sys.executable, *args], env=_ENV, cwd=_ROOT, capture_output=True,
                       text=True, timeout=180)
  if check and out.returncode != 0:
    raise AssertionError(f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
  return out


def _scalars_by_summary_iterator(logdir):
  """tag -> [(step, wall_time, value)], read with TF's own reader (not tfrl.plot's)."""
  out = {}
  for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for v in event.summary.value:
        if v.HasField("tensor") and not v.tensor.tensor_shape.dim:
          out.setdefault(v.tag, []).append(
              (event.step, event.wall_time, float(tf.make_ndarray(v.tensor))))
  return out


def _write_events(path, wall_start, points):
  """An event file of scalars [(tag, step, seconds after wall_start, value)]."""
  from tensorboard.compat.proto import event_pb2, summary_pb2  # pylint: disable=g-import-not-at-top
  with tf.io.TFRecordWriter(path) as w:
    w.write(event_pb2.Event(wall_time=wall_start, file_version="brain.Event:2")
            .SerializeToString())
    for tag, step, seconds, value in points:
      summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
      w.write(event_pb2.Event(wall_time=wall_start + seconds, step=step, summary=summary)
              .SerializeToString())


class PlotGaRunTest(tf.test.TestCase):
  """A 3-generation GA run on CartPole, plotted."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.run_dir = os.path.join(cls.tmp, "ga")
    _run(["-m", "tfrl.ga", "--env=CartPole-v1", "--population=8", "--generations=3",
          "--num_envs=8", "--hidden=8", "--noise_table_size=100000", "--truncation=3",
          "--elite_candidates=2", "--elite_episodes=2", "--noexport",
          f"--logdir={cls.run_dir}"])

  def test_cli_writes_a_png_of_the_requested_size(self):
    out_png = os.path.join(self.tmp, "plots", "curve.png")
    out = _run(["-m", "tfrl.plot", f"--logdir={self.run_dir}", f"--out={out_png}",
                "--width=640", "--height=300"])
    self.assertIn(out_png, out.stdout)
    with Image.open(out_png) as image:
      image.verify()
    with Image.open(out_png) as image:
      self.assertEqual(image.format, "PNG")
      self.assertEqual(image.size, (640, 300))
      # Not a blank canvas: the lines put more than one colour on it.
      self.assertGreater(len(image.convert("RGB").getcolors(maxcolors=1 << 20)), 10)
    self.assertLess(os.path.getsize(out_png), 100_000)

  def test_plotted_points_are_the_event_files_scalars(self):
    fig = plot.plot(plot.PlotConfig(logdirs=(self.run_dir,),
                                    out=os.path.join(self.tmp, "inproc.png")))
    events = _scalars_by_summary_iterator(self.run_dir)
    elite, frames = events["ga/elite"], events["ga/frames"]
    self.assertLen(elite, 3)
    self.assertEqual([s for s, _, _ in elite], [1, 2, 3])  # one point per generation
    frames_at = {s: v for s, _, v in frames}
    start = min(e.wall_time for p in glob.glob(os.path.join(self.run_dir, "events.out.*"))
                for e in tf.compat.v1.train.summary_iterator(p))
    by_frames, by_wall = fig.axes
    (line,) = by_frames.lines
    np.testing.assert_array_equal(line.get_xdata(), [frames_at[s] for s, _, _ in elite])
    np.testing.assert_allclose(line.get_ydata(), [v for _, _, v in elite], rtol=1e-6)
    (line,) = by_wall.lines
    np.testing.assert_allclose(line.get_xdata(), [t - start for _, t, _ in elite], atol=1e-3)
    np.testing.assert_allclose(line.get_ydata(), [v for _, _, v in elite], rtol=1e-6)
    # The tag in words, with the run's --elite_episodes read from its flags.txt.
    self.assertEqual(by_frames.get_ylabel(), "elite score (mean of 2 episodes)")
    self.assertEqual(by_frames.get_xlabel(), "frames")
    self.assertEqual(by_wall.get_xlabel(), "wall-clock seconds")

  def test_another_tag_and_one_axis(self):
    fig = plot.plot(plot.PlotConfig(logdirs=(self.run_dir,), tag="ga/best", x=("frames",),
                                    out=os.path.join(self.tmp, "best.png")))
    events = _scalars_by_summary_iterator(self.run_dir)
    (ax,) = fig.axes
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [v for _, _, v in events["ga/best"]],
                               rtol=1e-6)
    self.assertEqual(ax.get_ylabel(), "best individual's score")

  def test_a_csv_of_the_runs_scalars_draws_the_same_frames_curve(self):
    # The CSV is written from TF's own reader of the run's events.
    events = _scalars_by_summary_iterator(self.run_dir)
    start = min(t for points in events.values() for _, t, _ in points)
    tags = ["ga/frames", "ga/elite"]
    rows = {}
    for tag in tags:
      for step, wall, value in events[tag]:
        rows.setdefault(step, {"seconds": wall - start})[tag] = value
    path = os.path.join(self.tmp, "curve.csv")
    with open(path, "w") as f:
      f.write("step,seconds," + ",".join(tags) + "\n")
      for step, row in sorted(rows.items()):
        f.write(f"{step},{row['seconds']},{','.join(repr(row[t]) for t in tags)}\n")
    from_events = plot.plot(plot.PlotConfig(logdirs=(self.run_dir,), x=("frames",),
                                            out=os.path.join(self.tmp, "events.png")))
    from_csv = plot.plot(plot.PlotConfig(logdirs=(path,), x=("frames",),
                                         out=os.path.join(self.tmp, "csv.png")))
    (a,), (b,) = from_events.axes[0].lines, from_csv.axes[0].lines
    self.assertLen(b.get_xdata(), 3)
    np.testing.assert_array_equal(b.get_xdata(), a.get_xdata())
    np.testing.assert_array_equal(b.get_ydata(), a.get_ydata())
    self.assertEqual(from_csv.axes[0].get_ylabel(), "elite score")  # no flags.txt beside it
    bad = os.path.join(self.tmp, "bad.csv")
    with open(bad, "w") as f:
      f.write("frames,ga/elite\n1,2\n")
    out = _run(["-m", "tfrl.plot", f"--logdir={bad}", f"--out={os.path.join(self.tmp, 'z.png')}"],
               check=False)
    self.assertEqual(out.returncode, 2, out.stderr)
    self.assertEqual(out.stderr.strip().splitlines()[-1],
                     f"tfrl.plot: error: --logdir={bad}: a CSV of scalars starts with the "
                     "header 'step,seconds,<tag>,...'; this one has 'frames,ga/elite'.")

  def test_unknown_tag_is_one_line(self):
    out = _run(["-m", "tfrl.plot", f"--logdir={self.run_dir}", "--tag=ga/nope",
                f"--out={os.path.join(self.tmp, 'x.png')}"], check=False)
    self.assertEqual(out.returncode, 2, out.stderr)
    self.assertNotIn("Traceback", out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith("tfrl.plot: error: "), last)
    self.assertIn("has no scalar 'ga/nope'", last)
    self.assertIn("ga/elite", last)  # lists what there is
    self.assertFalse(os.path.exists(os.path.join(self.tmp, "x.png")))

  def test_logdir_without_event_files_is_one_line(self):
    empty = os.path.join(self.tmp, "empty")
    os.makedirs(empty)
    out = _run(["-m", "tfrl.plot", f"--logdir={empty}", f"--out={os.path.join(self.tmp, 'y.png')}"],
               check=False)
    self.assertEqual(out.returncode, 2, out.stderr)
    self.assertNotIn("Traceback", out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    self.assertEqual(last, f"tfrl.plot: error: --logdir={empty} holds no TensorBoard event "
                     "files (events.out.tfevents.*).")


class PlotHandMadeEventsTest(tf.test.TestCase):
  """Event files with known steps and wall times."""

  test_session = None

  def _td3_run(self, name, returns, wall_start=1000.0):
    logdir = os.path.join(self.get_temp_dir(), name)
    os.makedirs(logdir)
    _write_events(os.path.join(logdir, "events.out.tfevents.1.host.1.0.v2"), wall_start,
                  [("eval/return", 1000 * i, 10.0 * i, r) for i, r in enumerate(returns)])
    return logdir

  def test_seeds_of_one_label_are_averaged_with_a_band(self):
    a = self._td3_run("a", [0.0, 10.0, 20.0])
    b = self._td3_run("b", [2.0, 14.0, 30.0])
    c = self._td3_run("c", [5.0, 5.0, 5.0])
    fig = plot.plot(plot.PlotConfig(logdirs=(a, b, c), labels=("gst", "gst", "dense"),
                                    out=os.path.join(self.get_temp_dir(), "seeds.png")))
    ax = fig.axes[0]
    self.assertEqual([l.get_label() for l in ax.lines], ["gst (mean of 2)", "dense"])
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [0, 1000, 2000])
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [1.0, 12.0, 25.0])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [5.0, 5.0, 5.0])
    self.assertEqual(ax.get_xlabel(), "env steps")
    self.assertEqual(ax.get_ylabel(), "evaluation return")  # no flags.txt: no episode count
    self.assertLen(ax.collections, 1)  # one band, for the label with two runs
    curves = [plot.load_curve(a), plot.load_curve(b)]
    x, mean, low, high = plot.aggregate(curves, "frames", "minmax")
    np.testing.assert_allclose(low, [0.0, 10.0, 20.0])
    np.testing.assert_allclose(high, [2.0, 14.0, 30.0])
    _, _, low, high = plot.aggregate(curves, "frames", "std")
    np.testing.assert_allclose(high - mean, [1.0, 2.0, 5.0])

  def test_seeds_on_different_x_are_interpolated_over_their_common_range(self):
    a, b = plot.load_curve(self._td3_run("a", [0.0, 10.0, 20.0])), None
    b_dir = os.path.join(self.get_temp_dir(), "b")
    os.makedirs(b_dir)
    _write_events(os.path.join(b_dir, "events.out.tfevents.1.h.1.0.v2"), 0.0,
                  [("eval/return", s, s / 100.0, v) for s, v in ((500, 0.0), (2500, 40.0))])
    b = plot.load_curve(b_dir)
    x, mean, _, _ = plot.aggregate([a, b], "frames")
    np.testing.assert_array_equal(x, [500, 1000, 2000])
    np.testing.assert_allclose(mean, [(5.0 + 0.0) / 2, (10.0 + 10.0) / 2, (20.0 + 30.0) / 2])

  def test_resume_replaces_rewritten_steps_and_leaves_out_the_pause(self):
    logdir = os.path.join(self.get_temp_dir(), "resumed")
    os.makedirs(logdir)
    # First process: steps 0-3 over 30 s; stopped, resumed an hour later from
    # the checkpoint at step 2, which it writes again.
    _write_events(os.path.join(logdir, "events.out.tfevents.100.h.1.0.v2"), 100.0,
                  [("episode/rolling_score", s, 10.0 * s, float(s)) for s in range(4)])
    _write_events(os.path.join(logdir, "events.out.tfevents.3700.h.2.0.v2"), 3700.0,
                  [("episode/rolling_score", s, 10.0 * (s - 1), 100.0 + s) for s in (2, 3, 4)])
    curve = plot.load_curve(logdir)
    self.assertEqual(curve.tag, "episode/rolling_score")
    self.assertEqual(curve.x_unit, "frames")
    np.testing.assert_array_equal(curve.steps, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(curve.values, [0.0, 1.0, 102.0, 103.0, 104.0])
    # 30 s of the first process, then the second's own clock (its first event
    # at 0 s of it, step 2 at 10 s).
    np.testing.assert_allclose(curve.seconds, [0.0, 10.0, 40.0, 50.0, 60.0])

  def test_axis_words_and_label_flags(self):
    logdir = os.path.join(self.get_temp_dir(), "ga3c")
    os.makedirs(logdir)
    _write_events(os.path.join(logdir, "events.out.tfevents.1.h.1.0.v2"), 0.0,
                  [(t, s, s, 1.0) for s in (1, 2) for t in ("episode/rolling_score", "loss/total")])
    self.assertEqual(plot.load_curve(logdir).words, "rolling score")
    with open(os.path.join(logdir, "flags.txt"), "w") as f:
      f.write("--game=PongNoFrameskip-v4\n--score_window=10\n--nodynamic_adjustment\n")
    self.assertEqual(plot.load_curve(logdir).words, "rolling score (10 episodes)")
    self.assertEqual(plot.load_curve(logdir, "loss/total").words, "loss/total")  # not named
    out = os.path.join(self.get_temp_dir(), "labels.png")
    fig = plot.plot(plot.PlotConfig(logdirs=(logdir,), out=out))
    by_frames, by_wall = fig.axes
    self.assertEqual(by_frames.get_ylabel(), "rolling score (10 episodes)")
    self.assertEqual(by_wall.get_xlabel(), "wall-clock seconds")
    fig = plot.plot(plot.PlotConfig(logdirs=(logdir,), out=out, ylabel="Pong score",
                                    xlabel="emulator frames"))
    by_frames, by_wall = fig.axes
    self.assertEqual([a.get_ylabel() for a in fig.axes], ["Pong score", "Pong score"])
    self.assertEqual(by_frames.get_xlabel(), "emulator frames")
    self.assertEqual(by_wall.get_xlabel(), "wall-clock seconds")

  def test_default_tags(self):
    td3 = self._td3_run("td3_one_eval", [7.0])
    _write_events(os.path.join(td3, "events.out.tfevents.2.host.1.1.v2"), 1001.0,
                  [("train/episode_return", s, 0.0, 1.0) for s in (1000, 2000)])
    self.assertEqual(plot.load_curve(td3).tag, "train/episode_return")
    es = os.path.join(self.get_temp_dir(), "es")
    os.makedirs(es)
    _write_events(os.path.join(es, "events.out.tfevents.1.h.1.0.v2"), 0.0,
                  [(t, g, g, v) for g in (1, 2) for t, v in (("es/elite", 3.0 * g),
                                                              ("es/frames", 500.0 * g))])
    curve = plot.load_curve(es)
    self.assertEqual(curve.tag, "es/elite")
    np.testing.assert_array_equal(curve.frames, [500.0, 1000.0])
    other = os.path.join(self.get_temp_dir(), "other")
    os.makedirs(other)
    _write_events(os.path.join(other, "events.out.tfevents.1.h.1.0.v2"), 0.0,
                  [("loss/total", 1, 0.0, 1.0)])
    with self.assertRaisesRegex(ValueError, "pass --tag= one of its scalars: loss/total"):
      plot.load_curve(other)

  def test_bad_flags(self):
    with self.assertRaisesRegex(ValueError, "--logdir is required"):
      plot.PlotConfig()
    with self.assertRaisesRegex(ValueError, "one per --logdir"):
      plot.PlotConfig(logdirs=("a", "b"), labels=("x",))
    with self.assertRaisesRegex(ValueError, "'frames' or 'wall'"):
      plot.PlotConfig(logdirs=("a",), x=("time",))


class ChartsTest(tf.test.TestCase):
  """benchmarks/charts.py draws result JSON with rows and axes in words."""

  test_session = None

  def test_curve_chart_draws_the_points_of_the_json(self):
    tmp = self.get_temp_dir()
    record = {"curve": [{"frames": 1000 * i, "seconds": 30.0 * i, "rolling_score": -21.0 + i}
                        for i in range(1, 6)]}
    with open(os.path.join(tmp, "pong.json"), "w") as f:
      json.dump(record, f)
    out = os.path.join(tmp, "pong.png")
    _run(["benchmarks/charts.py", "curve", os.path.join(tmp, "pong.json"), out,
          "--ylabel=rolling score (100 episodes)", "--label=GA3C"])
    with Image.open(out) as image:
      self.assertEqual(image.size, (840, 320))
    bad = _run(["benchmarks/charts.py", "curve", os.path.join(tmp, "pong.json"), out,
                "--y=elite"], check=False)
    self.assertNotEqual(bad.returncode, 0)
    self.assertIn("have no 'elite'", bad.stderr)

  def test_ga_rows_in_words(self):
    # In a subprocess: charts.py defines its absl flags when imported.
    words = subprocess.run(
        [sys.executable, "-c", "import charts; print(charts.ga_run_words(%r)); "
         "print(charts.ga_run_words(%r)); print(charts.ga_run_words('other'))"
         % ("env-only groups=2 loop", "GA large bfloat16 incremental g=2 eps=8")],
        env=dict(_ENV, PYTHONPATH=os.pathsep.join([os.path.join(_ROOT, "benchmarks"), _ROOT])),
        capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    self.assertEqual(words, ["env-only, graph loop, 2 slot groups",
                             "GA, large net, bfloat16 kernels,",
                             "incremental inference, 8 episodes per network", "other"])


if __name__ == "__main__":
  tf.test.main()
