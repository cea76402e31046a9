"""A generation's time breakdown (tfrl/neuroevolution/timing.py): its parts add
up to the generation's wall time, TensorBoard holds it, and --profile_generation
traces exactly the generation it names.

The machine may be loaded (2 cores shared with builds and other tests), so no
check compares a time with a share of another. A delay of DELAY seconds is
put into each timed part (the evaluation calls' weight loading, the
checkpoint), and each part must hold its delay while what no part measured
(`other`: Python between the timers, ~ms) stays below it: a part left out of
the accounting moves its whole delay into `other`. Load stretches the parts
and the gaps between them alike, so it cannot make a gap as long as a delay
short of a stall of DELAY seconds. The parts lie inside the generation, so
they never add up to more than its wall time, under any load.
"""

import contextlib
import glob
import gzip
import os
import time
from unittest import mock

import numpy as np
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tests.neuroevolution import runs
from tfrl import es
from tfrl import ga
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import settings
from tfrl.neuroevolution import timing

# Seconds put into each timed part; what no part measures must stay below it.
DELAY = 0.2
# Float rounding of sums of perf_counter differences.
ROUNDING = 1e-6


# CartPole on 8 env slots.
_SLOTS = settings.EvaluatorSettings(num_envs=8, slot_groups=2, noise_table_size=100_000)


def _run(build, algorithm, logdir, generations, print_fn=lambda line: None, **run):
  """(its runner.Generations) of a run of `algorithm` on CartPole."""
  _, generations_run = runs.run(build(runs.config(
      algorithm, logdir, evaluator=_SLOTS, generations=generations, **run),
                                      print_fn=print_fn))
  return generations_run


def _ga(logdir, generations, overlap_elite=False, **run):
  config = ga.GAConfig(population=12, truncation=4, elite_candidates=3,
                       elite_episodes=2, mutation_power=0.1, overlap_elite=overlap_elite)
  return _run(ga.build, config, logdir, generations, **run)


def _es(logdir, generations, **run):
  return _run(es.build, es.ESConfig(population=8, center_episodes=2), logdir, generations,
              **run)


def _delayed(fn):
  def call(*args, **kwargs):
    time.sleep(DELAY)
    return fn(*args, **kwargs)
  return call


@contextlib.contextmanager
def delays():
  """DELAY more in each evaluation call (before its slot groups start: the
  call's `load`) and in each checkpoint."""
  pipelined = evaluation.PipelinedEvaluator
  with mock.patch.object(pipelined, "evaluate", _delayed(pipelined.evaluate)), \
      mock.patch.object(pipelined, "evaluate_parts", _delayed(pipelined.evaluate_parts)), \
      mock.patch.object(checkpoint.Store, "save", _delayed(checkpoint.Store.save)):
    yield


def _trace_generations(logdir):
  """The session directories under <logdir>/profile, and the numbers of the
  "generation" events their traces hold."""
  sessions = glob.glob(os.path.join(logdir, "profile", "plugins", "profile", "*"))
  numbers, names = [], set()
  for path in glob.glob(os.path.join(logdir, "profile", "plugins", "profile", "*",
                                     "*.xplane.pb")):
    data = open(path, "rb").read()
    space = xplane_pb2.XSpace.FromString(
        gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    for plane in space.planes:
      names.update(m.name for m in plane.event_metadata.values())
      generation = [k for k, m in plane.event_metadata.items() if m.name == "generation"]
      stat = [k for k, m in plane.stat_metadata.items() if m.name == "number"]
      for line in plane.lines:
        for event in line.events:
          if event.metadata_id in generation:
            numbers += [s.int64_value or s.uint64_value for s in event.stats
                        if s.metadata_id in stat]
  return sessions, numbers, names


class BreakdownTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _check_parts(self, seconds, delayed):
    """The parts add up to the wall time, `other` below DELAY (see the module
    docstring); each part of `delayed` holds its delay."""
    self.assertCountEqual(seconds, timing.PARTS + ("wall",))
    measured = sum(v for k, v in seconds.items() if k not in ("other", "wall"))
    self.assertAllClose(measured + seconds["other"], seconds["wall"], atol=ROUNDING)
    self.assertBetween(seconds["other"], -ROUNDING, DELAY)
    for part in delayed:
      self.assertGreaterEqual(seconds[part], DELAY, part)

  def _check_generation(self, metrics):
    seconds = metrics["time"]
    self._check_parts(seconds, ("eval", "elite", "checkpoint"))
    for part in ("update", "log"):
      self.assertGreater(seconds[part], 0.0, part)
    # The local evaluator split both calls: their parts add up to their wall
    # time (an identity of the accounting), which is the call the step timed.
    self.assertCountEqual(metrics["evaluation"], ["eval", "elite"])
    for call in metrics["evaluation"]:
      self._check_call(metrics, call)

  def _check_call(self, metrics, call):
    """An evaluation call's parts add up to its wall time, the step's timing of it."""
    parts, seconds = metrics["evaluation"][call], metrics["time"][call]
    self.assertAllClose(sum(parts[p] for p in timing.EVAL_PARTS), parts["wall"], atol=1e-6)
    self.assertGreaterEqual(parts["load"], DELAY)
    # The step timed the call around the evaluator's own clock.
    self.assertBetween(seconds - parts["wall"], -ROUNDING, DELAY)
    self.assertGreater(parts["env"], 0.0)
    self.assertGreater(parts["net"], 0.0)
    self.assertBetween(parts["idle_slots"], 0.0, 1.0)

  def test_parts_add_up_to_each_generations_wall_time(self):
    for make in (_ga, _es):
      logdir = os.path.join(self.get_temp_dir(), make.__name__)
      lines = []
      started = time.perf_counter()
      with delays():
        history = make(logdir, 3, print_fn=lines.append).history
      elapsed = time.perf_counter() - started
      self.assertLen(history, 3)
      for metrics in history:
        self._check_generation(metrics)
      self.assertLess(sum(m["time"]["wall"] for m in history), elapsed)
      generation_lines = [line for line in lines if " gen " in line]
      self.assertLen(generation_lines, 3)
      for line in generation_lines:
        self.assertRegex(line, r"\| time \d+\.\d\d s: eval \d+\.\d\d s \(env \d+% net "
                         r"\d+% host \d+% wait \d+% load \d+%; \d+% slot-time idle\) \+ "
                         r"elite \d+\.\d\d s \+ update \d+\.\d\d s \+ ckpt \d+\.\d\d s")

  def test_overlapped_calls_add_up_too(self):
    # The candidates play in one call with the next population: generation 1
    # also plays its own population first ("eval"), the others do not.
    lines = []
    with delays():
      run = _ga(os.path.join(self.get_temp_dir(), "overlapped"), 3, overlap_elite=True,
                print_fn=lines.append)
    self.assertEqual(run.search.evaluator.overlapped_calls, 3)
    for metrics in run.history:
      seconds = metrics["time"]
      calls = ["eval", "overlapped"] if metrics["generation"] == 1 else ["overlapped"]
      self._check_parts(seconds, calls + ["checkpoint"])
      self.assertCountEqual(metrics["evaluation"], calls)
      self.assertEqual(seconds["elite"], 0.0)
      for call in calls:
        self._check_call(metrics, call)
    generation_lines = [line for line in lines if " gen " in line]
    self.assertLen(generation_lines, 3)
    self.assertRegex(generation_lines[1], r"\| time \d+\.\d\d s: eval 0\.00 s \+ elite "
                     r"0\.00 s \+ overlapped \d+\.\d\d s \(env \d+% net \d+% host \d+% wait "
                     r"\d+% load \d+%; \d+% slot-time idle\) \+ update \d+\.\d\d s")

  def test_tensorboard_holds_the_breakdown(self):
    logdir = self.get_temp_dir()
    history = _ga(logdir, 2).history
    scalars = {}
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag.startswith("time/"):
            scalars[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
    for metrics in history:
      step = metrics["generation"]
      for part, seconds in metrics["time"].items():
        self.assertAllClose(scalars[(f"time/{part}", step)], seconds, rtol=1e-6)
      for call in ("eval", "elite"):
        for part in timing.EVAL_PARTS + ("idle_slots",):
          self.assertAllClose(scalars[(f"time/{call}_{part}", step)],
                              metrics["evaluation"][call][part], rtol=1e-6, atol=1e-9)

  def test_profile_generation_traces_that_generation_only(self):
    logdir = self.get_temp_dir()
    lines = []
    _ga(logdir, 3, profile_generation=2, print_fn=lines.append)
    sessions, numbers, names = _trace_generations(logdir)
    self.assertLen(sessions, 1)
    self.assertEqual(numbers, [2])
    # The evaluator's env op and its timestamps ran inside the trace.
    self.assertTrue(any(name.endswith("GymStep:PyFunc") for name in names), names)
    self.assertTrue(any(name.endswith(":Timestamp") for name in names), names)
    self.assertTrue(any("profiler trace of generation 2" in line for line in lines))

  def test_a_generation_without_the_asked_number_traces_nothing(self):
    logdir = self.get_temp_dir()
    _ga(logdir, 1, profile_generation=2)
    self.assertFalse(os.path.exists(os.path.join(logdir, "profile")))


class EvalTimingTest(tf.test.TestCase):

  test_session = None

  def test_loading_time_joins_the_call(self):
    inner = timing.EvalTiming(wall=1.0, env=0.5, net=0.2, host=0.1, wait=0.2)
    outer = inner.with_load(1.25)
    self.assertAllClose(outer.load, 0.25)
    self.assertAllClose(sum(outer.shares().values()), 1.0)
    self.assertAllClose(np.array(list(outer.shares().values())),
                        [0.4, 0.16, 0.08, 0.16, 0.2])


if __name__ == "__main__":
  tf.test.main()
