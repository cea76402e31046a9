"""Where a generation's time goes: the evaluator's clock and the generation's breakdown.

An evaluation call (`evaluation.PipelinedEvaluator.evaluate`) splits its wall
time W into parts that add up to W. Each of its G slot groups is a thread, so
the call holds G x W group-seconds; each group's share is

    env    its env steps (timed in the graph) and its slots' resets
    net    its networks' forward passes and action choice (timed in the graph)
    host   the rest of its thread's life: Python between graph calls, the
           calls' dispatch, the graph loop's own ops
    wait   before its thread starts and after it ends: the call's setup and
           its tail, once the group has no episode left to play

and the parts are the groups' shares averaged (the first observations' resets,
before the threads start, are every group's env time). Env and net are timed
with `tf.timestamp` in every `TIMED_CALL_EVERY`-th graph call of a group (its
first included); the other calls' graph time, measured from Python, is split
in the same proportion, so the timestamps cost a fraction of a percent of the
loop's ops. `idle_slots` is the share of the call's slot-seconds in which a
slot had no episode to play (a group playing fewer slots than it has, or done).

A generation (`Breakdown`) is its evaluation, the elite's (GA: the
candidates' re-evaluation; ES: the centre's), or both in one call
(`overlapped`: the GA's candidates with the next generation's population,
whose evaluation the next generation then does not repeat), the algorithm's update
(selection and mutation; ES's gradient step) and, from the run skeleton, the
checkpoint, the export and the summaries; `other` is what none of these
measured.
"""

import dataclasses
import time
from typing import Dict, List, Optional

import tensorflow as tf

# A group times env and net in the graph on one call in this many (its first included).
TIMED_CALL_EVERY = 8

# The parts of a generation's wall time, in the order the console line gives them.
PARTS = ("eval", "elite", "overlapped", "update", "checkpoint", "export", "log", "other")
# The parts that are evaluation calls whose own parts the console line shows.
SHOWN_CALLS = ("eval", "overlapped")
# The parts of an evaluation's wall time.
EVAL_PARTS = ("env", "net", "host", "wait", "load")


@dataclasses.dataclass
class EvalTiming:
  """An evaluation call's wall time and its parts (seconds that add up to `wall`)."""
  wall: float
  env: float = 0.0
  net: float = 0.0
  host: float = 0.0
  wait: float = 0.0
  load: float = 0.0       # building and loading the networks' weights
  idle_slots: float = 0.0  # share of the slot-seconds with no episode to play

  def shares(self) -> Dict[str, float]:
    """Each part as a share of `wall`."""
    return {p: getattr(self, p) / self.wall if self.wall > 0 else 0.0 for p in EVAL_PARTS}

  def with_load(self, wall: float) -> "EvalTiming":
    """This call inside a longer one of `wall` seconds, the difference loading weights."""
    return dataclasses.replace(self, wall=wall, load=self.load + max(0.0, wall - self.wall))


class GroupClock:
  """One slot group's time in one evaluation call, kept by its thread."""

  def __init__(self, size: int):
    self.size = size
    self.start = self.end = None
    self.resets = 0.0          # env.reset calls of its slots
    self.graph = 0.0           # its graph calls, as Python saw them
    self.sampled = [0.0, 0.0, 0.0]  # graph, env, net seconds of the timed calls
    self.idle_slot_seconds = 0.0
    self.calls = 0
    self._last = self._running = None

  def begin(self) -> None:
    self.start = self._last = time.perf_counter()
    self._running = self.size

  def running(self, slots: int) -> None:
    """From now on `slots` of the group's slots play (the rest are idle)."""
    now = time.perf_counter()
    self.idle_slot_seconds += (self.size - self._running) * (now - self._last)
    self._last, self._running = now, slots

  def timed_call(self) -> bool:
    """Whether the next graph call should time its env and net (one in TIMED_CALL_EVERY)."""
    return self.calls % TIMED_CALL_EVERY == 0

  def graph_call(self, seconds: float, env_net: Optional[tf.Tensor]) -> None:
    """A graph call of `seconds`; `env_net`: its timed [env, net] seconds, if timed."""
    self.calls += 1
    self.graph += seconds
    if env_net is not None:
      env, net = env_net.numpy()
      self.sampled[0] += seconds
      self.sampled[1] += float(env)
      self.sampled[2] += float(net)

  def finish(self) -> None:
    if self.start is not None:
      self.running(0)
      self.end = self._last

  def env_net(self):
    """(env, net) seconds: the timed calls' proportion over all the graph time."""
    graph, env, net = self.sampled
    scale = self.graph / graph if graph > 0 else 0.0
    return self.resets + env * scale, net * scale


class CallClock:
  """An evaluation call's clock: one `GroupClock` per slot group."""

  def __init__(self, group_sizes: List[int]):
    self.start = time.perf_counter()
    self.groups = [GroupClock(size) for size in group_sizes]
    self.setup_resets = 0.0   # resets of every group's slots before the threads start

  def timing(self) -> EvalTiming:
    """The call's `EvalTiming`, up to now."""
    wall = time.perf_counter() - self.start
    parts = dict.fromkeys(EVAL_PARTS[:4], 0.0)
    idle = 0.0
    for g in self.groups:
      busy = (g.end - g.start) if g.start is not None else 0.0
      env, net = g.env_net()
      parts["env"] += self.setup_resets + env
      parts["net"] += net
      parts["host"] += busy - env - net
      parts["wait"] += wall - self.setup_resets - busy
      idle += g.idle_slot_seconds + g.size * (wall - self.setup_resets - busy)
    groups, slots = len(self.groups), sum(g.size for g in self.groups)
    return EvalTiming(wall=wall, idle_slots=idle / max(slots * wall, 1e-12),
                      **{p: v / groups for p, v in parts.items()})


class Breakdown:
  """A generation's parts, in seconds, as the algorithm and the run time them.

      breakdown = Breakdown()                     # the generation starts
      result = breakdown.evaluate("eval", evaluator, genomes, episodes, seeds)
      breakdown.step_metrics()     # the algorithm's step: its calls and `update`
      breakdown.add("checkpoint", seconds)        # the run adds its own parts
      breakdown.seconds()          # every part of PARTS, and `wall`
  """

  def __init__(self):
    self.start = time.perf_counter()
    self.parts: Dict[str, float] = {}
    self.evaluations: Dict[str, Dict[str, float]] = {}

  def add(self, part: str, seconds: float) -> None:
    self.parts[part] = self.parts.get(part, 0.0) + seconds

  def evaluate(self, part: str, evaluator, *args, **kwargs):
    """`evaluator.evaluate(*args, **kwargs)`, timed as `part`; its result's
    `timing` (an `EvalTiming`), if any, is kept."""
    started = time.perf_counter()
    result = evaluator.evaluate(*args, **kwargs)
    self.add(part, time.perf_counter() - started)
    if getattr(result, "timing", None) is not None:
      self.evaluations[part] = dataclasses.asdict(result.timing)
    return result

  def evaluate_overlapped(self, part: str, evaluator, *args):
    """`evaluator.evaluate_overlapped(*args)` (one call, or several played
    as one), timed as `part`; the call's timing is kept."""
    started = time.perf_counter()
    results = evaluator.evaluate_overlapped(*args)
    self.add(part, time.perf_counter() - started)
    if getattr(results[0], "timing", None) is not None:
      self.evaluations[part] = dataclasses.asdict(results[0].timing)
    return results

  def step_metrics(self) -> Dict[str, dict]:
    """An algorithm's step's entries of its metrics: `time`, its evaluation
    calls and `update` (everything else in the step), and `evaluation`, each
    call's `EvalTiming` as a dict."""
    elapsed = time.perf_counter() - self.start
    return {"time": dict(self.parts, update=elapsed - sum(self.parts.values())),
            "evaluation": dict(self.evaluations)}

  def seconds(self) -> Dict[str, float]:
    """Every part of PARTS (`other`: what none measured) and `wall`, up to now."""
    wall = time.perf_counter() - self.start
    out = {part: self.parts.get(part, 0.0) for part in PARTS[:-1]}
    out["other"] = wall - sum(self.parts.values())
    out["wall"] = wall
    return out


def _percent(share: float) -> str:
  return f"{100 * share:.0f}%"


def format_line(seconds: Dict[str, float], evaluation: Dict[str, dict]) -> str:
  """The console's breakdown, e.g. "time 14.1 s: eval 12.3 s (env 60% net 25%
  host 5% wait 9% load 1%; 9% slot-time idle) + elite 1.2 s + update 0.1 s + ckpt 0.2 s"."""
  names = {"checkpoint": "ckpt"}
  parts = []
  for part in PARTS:
    value = seconds.get(part, 0.0)
    if part in ("overlapped", "export", "log", "other") and abs(value) < 0.005:
      continue
    text = f"{names.get(part, part)} {value:.2f} s"
    if part in SHOWN_CALLS and part in evaluation:
      timing = EvalTiming(**evaluation[part])
      shares = " ".join(f"{p} {_percent(s)}" for p, s in timing.shares().items())
      text += f" ({shares}; {_percent(timing.idle_slots)} slot-time idle)"
    parts.append(text)
  return f"time {seconds['wall']:.2f} s: " + " + ".join(parts)


def write_scalars(seconds: Dict[str, float], evaluation: Dict[str, dict],
                  step: int) -> None:
  """TensorBoard scalars time/<part> (seconds), time/<call>_<part> (seconds of
  each evaluation call's parts) and time/<call>_idle_slots (a share)."""
  for part, value in seconds.items():
    tf.summary.scalar(f"time/{part}", value, step=step)
  for call, timing in evaluation.items():
    for part in EVAL_PARTS + ("idle_slots",):
      tf.summary.scalar(f"time/{call}_{part}", timing[part], step=step)
