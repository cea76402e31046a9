"""Kill anywhere, lose at most one interval: SIGKILL and --resume, many times, per algorithm.

  python tests/kill_resume.py --kills_per_algorithm=20 \
      --output=benchmarks/results/kill_resume_<machine>.json

For each algorithm of --algorithms (GA3C, GA with observation normalization,
ES, random search, TD3, and an ES with observation normalization on
HalfCheetah-v5, `es_mujoco`), in a fresh temporary logdir, on small CartPole /
Pendulum / HalfCheetah settings with short checkpoint intervals (`ALGORITHMS`):

  1. start a run; once it prints its first progress line, wait a time drawn
     uniformly from [0, window] (the window spans several checkpoint
     intervals) and SIGKILL it. Half of the kills (--aimed_fraction) are
     aimed at a write: after that wait they watch the logdir and kill the run
     as soon as a write starts (a temporary file appears or is rewritten:
     `*.tmp*`, TF's `*_temp*`, an export's `.old`), since a uniform moment
     rarely falls inside one (a GA checkpoint takes milliseconds). `mid-write
     kills` counts the kills that left such a temporary file behind. With
     --after_checkpoint no kill comes before the run's first complete
     checkpoint, so every resume has one to restore;
  2. start it again with --resume and check the resume: the process starts,
     takes over the stale lock of the killed one (`took over the lock of pid
     <killed pid>`), says that it resumed (or, killed before its first
     checkpoint, that there was none) and goes on to print progress, without
     an error (a corrupt checkpoint would end it in one line);
  3. compare the counter it resumes from with the last progress line of the
     killed run: the data lost must be at most one checkpoint interval
     (GA / ES / random search: 1 generation, they checkpoint every
     generation; TD3: --checkpoint_every steps; GA3C, which checkpoints every
     --checkpoint_every seconds: the frames it printed in the last interval
     and the save it may have interrupted, see `check_resume`). GA3C and TD3
     must also restore the newest complete TF checkpoint on disk, or the one
     before it if the kill came before the newest was recorded;
  4. kill that run the same way, and so on, --kills_per_algorithm times
     (or fewer once --minutes_per_algorithm have gone by).

After the last kill the run is resumed once more and ends on its own: GA, ES
and random search finish to N generations (2 more than their checkpoint
holds) and their final `checkpoint.json` state and arrays are compared with
those of an uninterrupted run of the same seed to N generations: they must be
identical, bit for bit. GA3C and TD3, which are not deterministic, are
stopped with SIGTERM once they progress and must exit cleanly.

Prints a table per algorithm (kills, resumes OK, failures, largest and total
data lost in the algorithm's counter, the largest in seconds of progress,
kills aimed at a write, mid-write kills, resumes that found no checkpoint,
final state equal to the uninterrupted run) and
writes JSON (--output) with every kill and the `provenance` record.
Only one run process at a time; every child is killed on every exit path.
"""

import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

from absl import app
from absl import flags
import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)

from benchmarks import provenance  # pylint: disable=g-import-not-at-top,wrong-import-position

# The neuroevolution runs: tiny populations on CartPole, no export (the kill
# phase never reaches the end of the run, where the elite is exported).
_NE_COMMON = ("--env=CartPole-v1", "--arch=mlp", "--population=8", "--num_envs=8",
              "--slot_groups=2", "--noise_table_size=100000", "--episodes_per_eval=1",
              "--seed=0", "--noexport")
GA3C_CHECKPOINT_EVERY = 2.0   # seconds
TD3_CHECKPOINT_EVERY = 200    # env steps
KILL_PHASE_GENERATIONS = 1_000_000  # never reached: GA/ES/RS runs end by a kill
FINAL_EXTRA_GENERATIONS = 2


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """How to run one entry point and read its console."""
  name: str
  module: str
  args: Sequence[str]        # without --logdir / --resume / --generations
  unit: str                  # what the counter counts: generations, frames, steps
  progress: str              # regex; group "count": the counter of a progress line
  resumed: str               # regex; group "count": the counter a resume starts from
  window: float              # seconds: kills are uniform in [0, window] after progress
  interval: float            # one checkpoint interval (generations, seconds, steps)
  deterministic: bool        # GA, ES, random search: final state == uninterrupted run

  @property
  def neuroevolution(self) -> bool:
    return self.module in ("tfrl.ga", "tfrl.es", "tfrl.random_search")


def _ne(name: str, module: str, args: Sequence[str], prefix: Optional[str] = None,
        window: float = 4.0) -> Algorithm:
  """A GA / ES / random search run; `prefix`: its console lines' (`name` by default)."""
  prefix = prefix or name
  return Algorithm(
      name=name, module=module, args=(*_NE_COMMON, *args), unit="generations",
      progress=rf"^\[{prefix}\] gen\s+(?P<count>\d+) \|.*\| frames\s+(?P<frames>\d+) \|",
      resumed=rf"^\[{prefix}\] resumed from .* at generation (?P<count>\d+) "
              rf"\((?P<frames>\d+) frames\)",
      window=window, interval=1, deterministic=True)


ALGORITHMS: Dict[str, Algorithm] = {
    "ga3c": Algorithm(
        name="ga3c", module="tfrl.ga3c",
        args=("--env=CartPole-v1", "--agents=4", "--max_agents=4", "--t_max=5",
              "--learning_rate=0.003", "--loss_reduction=mean", "--rmsprop_epsilon=1e-5",
              "--score_window=20", "--seed=0", "--stats_every=0.5",
              f"--checkpoint_every={GA3C_CHECKPOINT_EVERY}"),
        unit="frames", progress=r"\] frames (?P<count>\d+) \| episodes",
        resumed=r"Resumed from (?P<path>\S+) at frame (?P<count>\d+), episode",
        window=3 * GA3C_CHECKPOINT_EVERY, interval=GA3C_CHECKPOINT_EVERY,
        deterministic=False),
    # With observation normalization: its statistics are part of what a
    # resume must restore.
    "ga": _ne("ga", "tfrl.ga", ("--hidden=8", "--truncation=3", "--mutation_power=0.1",
                                "--elite_candidates=2", "--elite_episodes=2", "--obs_norm",
                                "--obs_norm_fraction=0.5")),
    "es": _ne("es", "tfrl.es", ("--hidden=", "--sigma=0.1", "--learning_rate=0.1",
                                "--center_episodes=2")),
    "random_search": _ne("random_search", "tfrl.random_search",
                         ("--hidden=8", "--elite_candidates=2", "--elite_episodes=2")),
    # A normalized ES with a continuous head on HalfCheetah-v5 (the MuJoCo
    # ops): its observation statistics are part of what a resume must restore.
    "es_mujoco": _ne("es_mujoco", "tfrl.es", (
        "--env=HalfCheetah-v5", "--hidden=8", "--activation=tanh", "--action_head=tanh",
        "--obs_norm", "--obs_norm_fraction=0.5", "--obs_norm_clip=5", "--num_envs=4",
        "--max_episode_frames=60", "--sigma=0.05", "--learning_rate=0.05",
        "--center_episodes=1"), prefix="es", window=2.0),
    "td3": Algorithm(
        name="td3", module="tfrl.td3",
        args=("--env=Pendulum-v1", "--total_steps=100000000", "--start_steps=50",
              "--hidden_sizes=32,32", "--batch_size=64", "--update_every=50",
              "--eval_every=0", "--log_every=50", "--seed=0", "--noexport",
              f"--checkpoint_every={TD3_CHECKPOINT_EVERY}"),
        unit="steps", progress=r"\] step (?P<count>\d+): return",
        resumed=r"Resumed from (?P<path>\S+) at step (?P<count>\d+)\.",
        window=4.0, interval=TD3_CHECKPOINT_EVERY, deterministic=False),
}

NO_CHECKPOINT = re.compile(r"--resume: no checkpoint in .*; starting afresh")
LOCK_TAKEN_OVER = re.compile(r"took over the lock of pid (?P<pid>\d+)")
# Temporary files of a write in progress: atomic_files' `.tmp`, TF's
# `checkpoint.tmp<id>` and `ckpt-N_temp/`, an export's `saved_model.tmp` / `.old`.
_PARTIAL_WRITE = re.compile(r"\.tmp|_temp|\.old$")


class Launch:
  """One run process: its console lines with the time each arrived."""

  def __init__(self, argv: List[str], env: Dict[str, str]):
    self.argv = argv
    self.started = time.time()
    self.proc = subprocess.Popen(argv, cwd=_ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, errors="replace",
                                 start_new_session=True)
    self.lines: List[tuple] = []   # (time, line)
    self._eof = False
    self._cond = threading.Condition()
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  @property
  def pid(self) -> int:
    return self.proc.pid

  def _read(self) -> None:
    for line in self.proc.stdout:
      with self._cond:
        self.lines.append((time.time(), line.rstrip("\n")))
        self._cond.notify_all()
    with self._cond:
      self._eof = True
      self._cond.notify_all()

  def wait_for(self, pattern: re.Pattern, timeout: float, start: int = 0):
    """(index, match) of the first line from `start` matching; None at exit or timeout."""
    deadline = time.time() + timeout
    i = start
    with self._cond:
      while True:
        while i < len(self.lines):
          m = pattern.search(self.lines[i][1])
          if m:
            return i, m
          i += 1
        if self._eof or time.time() >= deadline:
          return None
        self._cond.wait(min(1.0, max(deadline - time.time(), 0.01)))

  def alive(self) -> bool:
    return self.proc.poll() is None

  def kill(self, sig=signal.SIGKILL) -> float:
    """Sends `sig` to the run's process group; the time it was sent."""
    t = time.time()
    with contextlib.suppress(ProcessLookupError):
      os.killpg(self.proc.pid, sig)
    return t

  def wait(self, timeout: Optional[float] = None) -> Optional[int]:
    try:
      code = self.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      return None
    self._reader.join(timeout=10)
    return code

  def close(self) -> None:
    """Kills the run (its whole group) if it still lives; reaps it."""
    if self.proc.poll() is None:
      self.kill(signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
      os.killpg(self.proc.pid, signal.SIGKILL)  # anything it left in its group
    self.proc.wait()
    self._reader.join(timeout=10)
    self.proc.stdout.close()

  def save_console(self, path: str) -> None:
    with open(path, "w") as f:
      f.writelines(f"{t:.3f} {line}\n" for t, line in self.lines)

  def text(self) -> str:
    return "\n".join(line for _, line in self.lines)

  def error(self) -> Optional[str]:
    """The run's one-line error, or its last line."""
    for _, line in self.lines:
      if re.match(r"^tfrl\.[\w.]+: error: ", line):
        return line
    if any(line.startswith("Traceback") for _, line in self.lines):
      return "traceback: " + next((line for _, line in reversed(self.lines) if line.strip()), "")
    return self.lines[-1][1] if self.lines else "(no output)"


def _env() -> Dict[str, str]:
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
  env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return env


def command(algorithm: Algorithm, logdir: str, resume: bool,
            generations: Optional[int] = None) -> List[str]:
  argv = [sys.executable, "-m", algorithm.module, *algorithm.args, f"--logdir={logdir}"]
  if algorithm.neuroevolution:
    argv.append(f"--generations={generations or KILL_PHASE_GENERATIONS}")
  if resume:
    argv.append("--resume")
  return argv


def _progress(algorithm: Algorithm, launch: Launch) -> List[tuple]:
  """(time, count, frames or None) of each progress line of a launch."""
  pattern = re.compile(algorithm.progress)
  rows = []
  for t, line in launch.lines:
    m = pattern.search(line)
    if m:
      frames = m.groupdict().get("frames")
      rows.append((t, int(m["count"]), int(frames) if frames is not None else None))
  return rows


def _partial_writes(logdir: str, since: float) -> List[str]:
  """Temporary files / folders of writes that a kill interrupted (modified since `since`)."""
  found = []
  for directory, dirs, files in os.walk(logdir):
    for name in dirs + files:
      path = os.path.join(directory, name)
      if _PARTIAL_WRITE.search(name):
        with contextlib.suppress(OSError):
          if os.path.getmtime(path) >= since:
            found.append(os.path.relpath(path, logdir))
  return sorted(found)


def _temporary_files(logdir: str) -> Dict[str, int]:
  """Temporary files of writes in the logdir and its checkpoints folder: name -> mtime_ns."""
  out = {}
  for directory in (logdir, os.path.join(logdir, "checkpoints")):
    with contextlib.suppress(OSError):
      with os.scandir(directory) as entries:
        for entry in entries:
          if _PARTIAL_WRITE.search(entry.name):
            with contextlib.suppress(OSError):
              out[os.path.join(directory, entry.name)] = entry.stat().st_mtime_ns
  return out


def wait_for_a_write(logdir: str, timeout: float, poll: float = 0.001) -> bool:
  """Waits until a write starts in the logdir (a temporary file appears or is
  rewritten); False after `timeout` seconds without one."""
  before = _temporary_files(logdir)
  deadline = time.time() + timeout
  while time.time() < deadline:
    now = _temporary_files(logdir)
    if any(before.get(name) != mtime for name, mtime in now.items()):
      return True
    time.sleep(poll)
  return False


def _checkpoint_mtimes(algorithm: Algorithm, logdir: str) -> Dict[str, float]:
  """When each complete checkpoint in the logdir was written (key: what a resume names).

  GA / ES / random search: `checkpoint.json`. GA3C / TD3: `ckpt-N` for each
  TF checkpoint whose index and data files are both there.
  """
  out = {}
  if algorithm.neuroevolution:
    path = os.path.join(logdir, "checkpoint.json")
    if os.path.exists(path):
      out["checkpoint.json"] = os.path.getmtime(path)
    return out
  directory = os.path.join(logdir, "checkpoints")
  if os.path.isdir(directory):
    names = os.listdir(directory)
    for name in names:
      prefix = name[:-len(".index")]
      if name.endswith(".index") and any(n.startswith(prefix + ".data-") for n in names):
        with contextlib.suppress(OSError):
          out[prefix] = os.path.getmtime(os.path.join(directory, name))
  return out


def _tf_latest(logdir: str) -> Optional[str]:
  """The checkpoint TF's `checkpoint` state file names as the latest (its basename)."""
  with contextlib.suppress(OSError):
    with open(os.path.join(logdir, "checkpoints", "checkpoint")) as f:
      m = re.search(r'^model_checkpoint_path: "(.*)"$', f.read(), re.M)
      if m:
        return os.path.basename(m[1])
  return None


class _ProgressAfter:
  """Matches progress lines whose counter has moved past `count` (GA3C prints
  its counters before its loops have stepped)."""

  def __init__(self, progress: str, count: int):
    self._pattern = re.compile(progress)
    self._count = count

  def search(self, line: str):
    m = self._pattern.search(line)
    return m if m and int(m["count"]) > self._count else None


@dataclasses.dataclass
class Start:
  """What a (resumed) launch said before its first progress line."""
  ok: bool
  kind: str = ""              # "fresh", "resumed" or "no checkpoint"
  count: int = 0              # the counter it starts from
  frames: Optional[int] = None
  path: Optional[str] = None  # GA3C / TD3: the checkpoint restored
  lock_taken_over_from: Optional[int] = None
  progress_at: Optional[float] = None  # time of its first progress line
  problem: Optional[str] = None


def start_run(algorithm: Algorithm, launch: Launch, resume: bool, timeout: float) -> Start:
  """Waits for a launch's resume line (if resuming) and its first progress line."""
  kind, count, frames, path = "fresh", 0, None, None
  if resume:
    either = re.compile(f"(?:{algorithm.resumed})|(?:{NO_CHECKPOINT.pattern})")
    found = launch.wait_for(either, timeout)
    if found is None:
      return Start(False, problem=f"no resume line ({'exited' if not launch.alive() else 'timeout'}"
                                  f"): {launch.error()}")
    m = re.search(algorithm.resumed, launch.lines[found[0]][1])
    if m:
      kind, count = "resumed", int(m["count"])
      frames = int(m["frames"]) if m.groupdict().get("frames") else None
      path = m.groupdict().get("path")
    else:
      kind = "no checkpoint"
  first = launch.wait_for(_ProgressAfter(algorithm.progress, count), timeout)
  taken = LOCK_TAKEN_OVER.search(launch.text())
  start = Start(True, kind, count, frames, path,
                int(taken["pid"]) if taken else None)
  if first is None:
    start.ok = False
    start.problem = (f"no progress ({'exited' if not launch.alive() else 'timeout'}): "
                     f"{launch.error()}")
  else:
    start.progress_at = launch.lines[first[0]][0]
  return start


def check_resume(algorithm: Algorithm, killed: Launch, killed_start: Start, t_kill: float,
                 start: Start, mtimes: Dict[str, float], tf_latest: Optional[str],
                 slack: float) -> dict:
  """Data lost between the killed launch and its resume, and whether it is allowed.

  `mtimes`: the complete checkpoints on disk when the run was killed (and
  when each was written); `tf_latest`: the one TF's state file named then.
  """
  rows = _progress(algorithm, killed)
  last = rows[-1][1] if rows else killed_start.count
  lost = last - start.count
  problems = []
  pause = None
  if algorithm.name == "ga3c":
    # GA3C checkpoints every `interval` seconds from the loop that prints the
    # progress lines, and a save (TF checkpoint + SavedModel export) blocks
    # that loop: `pause`, the longest time the run went without a line, bounds
    # how long a save took. The newest complete checkpoint was taken at most
    # max(interval, pause) + pause before the kill (one interval, plus the save
    # it may have interrupted), so it holds at least the counter printed then.
    times = [t for t, _, _ in rows if t >= killed_start.progress_at] + [t_kill]
    pause = max(b - a for a, b in zip(times, times[1:]))
    cutoff = t_kill - max(algorithm.interval, pause) - pause - slack
    floor = max([c for t, c, _ in rows if t <= cutoff], default=killed_start.count)
    allowed = last - floor
  else:
    allowed = algorithm.interval
  record = {
      "killed_pid": killed.pid, "last_printed": last, "resume": start.kind,
      "resumed_from": start.count, "lost": max(lost, 0), "allowed": allowed,
  }
  if pause is not None:
    record["longest_pause_s"] = round(pause, 3)
  if algorithm.neuroevolution:
    last_frames = rows[-1][2] if rows else (killed_start.frames or 0)
    record["lost_frames"] = max(last_frames - (start.frames or 0), 0)
  key = "checkpoint.json" if algorithm.neuroevolution else os.path.basename(start.path or "")
  # Seconds of the killed run's progress that the resume does not have: since
  # the checkpoint it resumed from was written, or since the killed run began
  # to progress if that is later (or if it resumed from none).
  since = killed_start.progress_at
  if start.kind == "resumed" and key in mtimes:
    since = max(since, mtimes[key])
  record["lost_seconds"] = round(max(t_kill - since, 0.0), 3)
  if start.kind == "resumed" and not algorithm.neuroevolution:
    # The resume restores the newest complete checkpoint, or the one before it
    # when the kill came before the newest was recorded in TF's state file.
    newest = sorted(mtimes, key=mtimes.get)[-2:]
    expected = newest[-1:] if tf_latest == (newest[-1] if newest else None) else newest
    if key not in expected:
      problems.append(f"restored {key}, but the newest complete checkpoints were "
                      f"{newest} (state file: {tf_latest})")
  if start.lock_taken_over_from != killed.pid:
    problems.append(f"stale lock of pid {killed.pid} not taken over "
                    f"(took over: {start.lock_taken_over_from})")
  if lost > allowed:
    problems.append(f"went back {lost} {algorithm.unit} (printed {last}, resumed from "
                    f"{start.count}); allowed {allowed}")
  if start.kind == "no checkpoint" and mtimes:
    problems.append(f"said there was no checkpoint, but the logdir holds {sorted(mtimes)}")
  record["ok"] = not problems
  record["problem"] = "; ".join(problems) or None
  return record


def _load_final(logdir: str):
  with open(os.path.join(logdir, "checkpoint.json")) as f:
    state = json.load(f)
  arrays = {}
  if state.get("arrays_file"):
    with np.load(os.path.join(logdir, state["arrays_file"])) as data:
      arrays = {k: data[k] for k in data.files}
  return state, arrays


def compare_final(killed_logdir: str, reference_logdir: str) -> List[str]:
  """Differences between two runs' final checkpoints (state and arrays, bit for bit)."""
  a, a_arrays = _load_final(killed_logdir)
  b, b_arrays = _load_final(reference_logdir)
  diffs = [f"{k}: {a.get(k)!r:.80} != {b.get(k)!r:.80}"
           for k in sorted(set(a) | set(b)) if k != "run" and a.get(k) != b.get(k)]
  for k in sorted(set(a_arrays) | set(b_arrays)):
    if k not in a_arrays or k not in b_arrays or a_arrays[k].dtype != b_arrays[k].dtype or \
        a_arrays[k].shape != b_arrays[k].shape or a_arrays[k].tobytes() != b_arrays[k].tobytes():
      diffs.append(f"array {k} differs")
  return diffs


def wait_for_a_checkpoint(algorithm: Algorithm, launch: Launch, logdir: str,
                          timeout: float, poll: float = 0.01) -> bool:
  """Waits until the logdir holds a complete checkpoint; False if the run
  ends or `timeout` seconds pass first."""
  deadline = time.time() + timeout
  while time.time() < deadline and launch.alive():
    if _checkpoint_mtimes(algorithm, logdir):
      return True
    time.sleep(poll)
  return bool(_checkpoint_mtimes(algorithm, logdir))


@dataclasses.dataclass
class KillPlan:
  """How one algorithm is killed: `kills` times, each at a moment drawn from
  `rng` (see the module docstring), aimed at a write with probability
  `aimed_fraction`; with `after_checkpoint`, only once the logdir holds a
  complete checkpoint (so that every resume has one to restore)."""
  kills: int
  rng: random.Random
  aimed_fraction: float = 0.5
  after_checkpoint: bool = False
  budget_seconds: Optional[float] = None
  timeout: float = 240.0
  slack: float = 1.0


class _KillSession:
  """One algorithm's kills and resumes in a fresh temporary workdir."""

  def __init__(self, algorithm: Algorithm, plan: KillPlan, log: Callable[[str], None]):
    self.algorithm, self.plan, self.log = algorithm, plan, log
    self.work = tempfile.mkdtemp(prefix=f"tfrl_kill_resume_{algorithm.name}_")
    self.logdir = os.path.join(self.work, "run")
    self.env = _env()
    self.trials: List[dict] = []
    self.result = {"algorithm": algorithm.name, "unit": algorithm.unit, "kills": 0,
                   "kills_requested": plan.kills, "window_seconds": algorithm.window,
                   "interval": algorithm.interval, "workdir": self.work,
                   "trials": self.trials}
    self.started = time.time()
    self.launch: Optional[Launch] = None
    self.start: Optional[Start] = None

  def _launch(self, resume: bool, generations: Optional[int] = None) -> None:
    self.launch = Launch(command(self.algorithm, self.logdir, resume=resume,
                                 generations=generations), self.env)
    self.start = start_run(self.algorithm, self.launch, resume=resume,
                           timeout=self.plan.timeout)

  def first_launch(self) -> bool:
    self._launch(resume=False)
    self.result["setup_line"] = next(
        (line for _, line in self.launch.lines if " | population " in line), None)
    if not self.start.ok:
      self.trials.append({"kill": 0, "ok": False, "problem": self.start.problem})
      self.log(f"[kill_resume] {self.algorithm.name}: the first launch failed: "
               f"{self.start.problem}")
    return self.start.ok

  def _wait_and_kill(self, k: int) -> Optional[tuple]:
    """Waits for the kill's moment and SIGKILLs the run: (t_kill, aimed,
    aimed_hit), or None (a failed trial recorded) if the run ended first."""
    plan, algorithm, launch = self.plan, self.algorithm, self.launch
    # A uniform moment after its first progress line (and its first
    # checkpoint, if asked); an aimed kill then waits for the next write to
    # start (a checkpoint, mostly) and kills the run as soon as it sees one.
    delay = plan.rng.uniform(0.0, algorithm.window)
    aimed = plan.rng.random() < plan.aimed_fraction
    if plan.after_checkpoint:
      wait_for_a_checkpoint(algorithm, launch, self.logdir, plan.timeout)
    time.sleep(max(self.start.progress_at + delay - time.time(), 0.0))
    aimed_hit = aimed and wait_for_a_write(self.logdir, algorithm.window)
    if not launch.alive():
      self.trials.append({"kill": k, "ok": False,
                          "problem": f"the run ended before its kill: {launch.error()}"})
      self.log(f"[kill_resume] {algorithm.name}: run {k} ended early: {launch.error()}")
      self.start = Start(False, problem="(ended early)")
      return None
    t_kill = launch.kill(signal.SIGKILL)
    launch.wait()
    self.result["kills"] += 1
    return t_kill, aimed, aimed_hit

  def _final_generations(self) -> Optional[int]:
    """GA / ES / random search: the generations the finishing run goes to."""
    if not self.algorithm.neuroevolution:
      return None
    generations = None
    with contextlib.suppress(OSError, ValueError):
      generations = _load_final(self.logdir)[0]["generation"]
    generations = (generations or 0) + FINAL_EXTRA_GENERATIONS
    self.result["final_generations"] = generations
    return generations

  def kill_and_resume(self, k: int) -> bool:
    """Kill k and its resume; whether to go on with another kill."""
    algorithm, plan = self.algorithm, self.plan
    killed = self._wait_and_kill(k)
    if killed is None:
      return False
    t_kill, aimed, aimed_hit = killed
    mid_write = _partial_writes(self.logdir, self.launch.started)
    mtimes = _checkpoint_mtimes(algorithm, self.logdir)
    tf_latest = None if algorithm.neuroevolution else _tf_latest(self.logdir)
    killed_launch, killed_start = self.launch, self.start
    killed_launch.close()
    killed_launch.save_console(os.path.join(self.work, f"console-{k}.txt"))
    final = k == plan.kills - 1 or bool(
        plan.budget_seconds and time.time() - self.started >= plan.budget_seconds)
    self._launch(resume=True, generations=self._final_generations() if final else None)
    record = {"kill": k, "kill_after_progress_s": round(t_kill - killed_start.progress_at, 3),
              "aimed": aimed, "aimed_at_a_write": aimed_hit, "mid_write": mid_write,
              "checkpoint_ages_at_kill": {name: round(t_kill - m, 3)
                                          for name, m in sorted(mtimes.items())}}
    if self.start.kind:
      record.update(check_resume(algorithm, killed_launch, killed_start, t_kill, self.start,
                                 mtimes, tf_latest, plan.slack))
    if not self.start.ok:
      record["ok"] = False
      record["problem"] = "; ".join(p for p in (record.get("problem"), self.start.problem)
                                    if p)
    self.trials.append(record)
    self._log_trial(k, record, aimed_hit, mid_write)
    return self.start.ok and not final

  def _log_trial(self, k: int, record: dict, aimed_hit: bool, mid_write: List[str]) -> None:
    self.log(f"[kill_resume] {self.algorithm.name} kill {k + 1}/{self.plan.kills} at "
             f"+{record['kill_after_progress_s']:.2f} s"
             f"{' (aimed at a write)' if aimed_hit else ''}: "
             f"{record.get('resume', '?')} from {record.get('resumed_from')} "
             f"(printed {record.get('last_printed')}, lost {record.get('lost')} "
             f"{self.algorithm.unit}{', mid-write ' + ','.join(mid_write) if mid_write else ''})"
             f"{'' if record['ok'] else ' FAILED: ' + str(record['problem'])}")

  def finish(self) -> None:
    """The last resumed launch ends on its own (GA, ES, random search: then
    compared with an uninterrupted run) or by SIGTERM (GA3C, TD3)."""
    if not (self.start.ok and self.trials and self.trials[-1].get("ok")):
      return
    result, launch, timeout = self.result, self.launch, self.plan.timeout
    if not self.algorithm.neuroevolution:
      launch.kill(signal.SIGTERM)
      code = launch.wait(timeout=timeout)
      result["final_exit"] = code
      result["final_clean_stop"] = code == 0
      if code != 0:
        result["final_problem"] = f"SIGTERM after the last resume: exit {code}: {launch.error()}"
      return
    code = launch.wait(timeout=timeout)
    result["final_exit"] = code
    if code != 0:
      result["final_problem"] = f"the finishing run exited {code}: {launch.error()}"
      return
    reference = os.path.join(self.work, "uninterrupted")
    ref = Launch(command(self.algorithm, reference, resume=False,
                         generations=result["final_generations"]), self.env)
    try:
      ref_code = ref.wait(timeout=timeout)
    finally:
      ref.close()
    if ref_code != 0:
      result["final_problem"] = f"the uninterrupted run exited {ref_code}: {ref.error()}"
      return
    result["final_arrays"] = sorted(_load_final(self.logdir)[1])
    diffs = compare_final(self.logdir, reference)
    result["final_equal"] = not diffs
    if diffs:
      result["final_problem"] = "final state differs: " + "; ".join(diffs[:5])

  def close(self) -> None:
    if self.launch is not None:
      self.launch.close()
      self.launch.save_console(os.path.join(self.work, "console-last.txt"))
    self.result["seconds"] = round(time.time() - self.started, 1)


def _summarize(result: dict, neuroevolution: bool) -> dict:
  """The summary figures of a session's trials, added to its result."""
  trials = result["trials"]
  ok = [t for t in trials if t.get("ok")]
  result["resumes_ok"] = len(ok)
  result["failures"] = len(trials) - len(ok) + (1 if result.get("final_problem") else 0)
  lost = [t["lost"] for t in trials if "lost" in t]
  result["max_lost"] = max(lost, default=0)
  result["total_lost"] = sum(lost)
  seconds = [t["lost_seconds"] for t in trials if t.get("lost_seconds") is not None]
  result["max_lost_seconds"] = max(seconds, default=None)
  result["mid_write_kills"] = sum(1 for t in trials if t.get("mid_write"))
  result["aimed_kills"] = sum(1 for t in trials if t.get("aimed_at_a_write"))
  result["no_checkpoint_resumes"] = sum(1 for t in trials if t.get("resume") == "no checkpoint")
  if neuroevolution:
    result["max_lost_frames"] = max((t.get("lost_frames", 0) for t in trials), default=0)
    result["total_lost_frames"] = sum(t.get("lost_frames", 0) for t in trials)
  return result


def run_algorithm(algorithm: Algorithm, kills: int, rng: random.Random,
                  timeout: float = 240.0, slack: float = 1.0,
                  log: Callable[[str], None] = print, keep_logdirs: bool = False,
                  budget_seconds: Optional[float] = None,
                  aimed_fraction: float = 0.5, after_checkpoint: bool = False) -> dict:
  """Kills and resumes one algorithm `kills` times; its summary and every kill.

  With `budget_seconds`, fewer kills once that much time has gone by (the
  run is then resumed and finished as after the last kill). A kill is aimed
  at a write with probability `aimed_fraction` (see the module docstring);
  with `after_checkpoint`, no kill comes before the run's first complete
  checkpoint.
  """
  if kills < 1:
    raise ValueError(f"kills must be >= 1, got {kills}")
  plan = KillPlan(kills, rng, aimed_fraction, after_checkpoint, budget_seconds, timeout, slack)
  session = _KillSession(algorithm, plan, log)
  try:
    if session.first_launch():
      for k in range(kills):
        if not session.kill_and_resume(k):
          break
    session.finish()
  finally:
    session.close()
  result = _summarize(session.result, algorithm.neuroevolution)
  if not keep_logdirs and not result["failures"]:
    shutil.rmtree(session.work, ignore_errors=True)
    result["workdir"] = None
  return result


def table(results: Sequence[dict]) -> str:
  head = (f"{'algorithm':<13} | {'kills':>5} | {'resumes OK':>10} | {'failures':>8} | "
          f"{'lost max':>8} | {'lost total':>10} | {'unit':<11} | {'max lost s':>10} | "
          f"{'aimed':>5} | {'mid-write':>9} | {'no ckpt':>7} | final")
  rows = [head, "-" * len(head)]
  for r in results:
    if "final_equal" in r:
      final = "= uninterrupted" if r["final_equal"] else "DIFFERS"
    elif "final_clean_stop" in r:
      final = "clean SIGTERM stop" if r["final_clean_stop"] else "SIGTERM: exit " + str(
          r.get("final_exit"))
    else:
      final = "not reached"
    seconds = r.get("max_lost_seconds")
    rows.append(
        f"{r['algorithm']:<13} | {r['kills']:>5} | {r['resumes_ok']:>10} | {r['failures']:>8} | "
        f"{r['max_lost']:>8} | {r['total_lost']:>10} | {r['unit']:<11} | "
        f"{'-' if seconds is None else f'{seconds:.2f}':>10} | {r['aimed_kills']:>5} | "
        f"{r['mid_write_kills']:>9} | "
        f"{r['no_checkpoint_resumes']:>7} | {final}")
  return "\n".join(rows)


def run(algorithms: Sequence[str], kills: int, seed: int = 0,
        kills_by_algorithm: Optional[Dict[str, int]] = None, **kwargs) -> List[dict]:
  rng = random.Random(seed)
  results = []
  for name in algorithms:
    n = (kills_by_algorithm or {}).get(name, kills)
    results.append(run_algorithm(ALGORITHMS[name], n, rng, **kwargs))
  return results


def main(argv):
  del argv
  fv = flags.FLAGS
  unknown = [a for a in fv.algorithms if a not in ALGORITHMS]
  if unknown:
    raise app.UsageError(f"unknown --algorithms {unknown}; choose from {list(ALGORITHMS)}")
  record = provenance.provenance()
  started = time.time()
  results = run(fv.algorithms, fv.kills_per_algorithm, seed=fv.seed, timeout=fv.timeout,
                slack=fv.ga3c_slack_seconds, keep_logdirs=fv.keep_logdirs,
                budget_seconds=fv.minutes_per_algorithm * 60 or None,
                aimed_fraction=fv.aimed_fraction, after_checkpoint=fv.after_checkpoint)
  print()
  print(table(results))
  out = {"provenance": record, "kills_per_algorithm": fv.kills_per_algorithm,
         "minutes_per_algorithm": fv.minutes_per_algorithm,
         "seed": fv.seed, "ga3c_slack_seconds": fv.ga3c_slack_seconds,
         "aimed_fraction": fv.aimed_fraction, "after_checkpoint": fv.after_checkpoint,
         "minutes": round((time.time() - started) / 60, 1),
         "settings": {r["algorithm"]: list(ALGORITHMS[r["algorithm"]].args) for r in results},
         "results": results}
  if fv.output:
    os.makedirs(os.path.dirname(os.path.abspath(fv.output)), exist_ok=True)
    with open(fv.output, "w") as f:
      json.dump(out, f, indent=1)
    print(f"wrote {fv.output}")
  if any(r["failures"] for r in results):
    sys.exit(1)


def _raise_on_sigterm(signum, frame):
  del signum, frame
  raise SystemExit(143)  # unwinds the `finally`s that kill the runs


if __name__ == "__main__":
  flags.DEFINE_list("algorithms", list(ALGORITHMS), "Which algorithms to kill and resume.")
  flags.DEFINE_integer("kills_per_algorithm", 20, "SIGKILLs (and resumes) per algorithm.")
  flags.DEFINE_float("minutes_per_algorithm", 0.0, "Stop killing an algorithm after this "
                     "long (then resume and finish it as after its last kill); 0: no limit.")
  flags.DEFINE_integer("seed", 0, "Seed of the kill moments.")
  flags.DEFINE_float("aimed_fraction", 0.5, "Share of the kills aimed at a write (the "
                     "first write after the random wait).")
  flags.DEFINE_bool("after_checkpoint", False, "No kill before the run's first complete "
                    "checkpoint (every resume then restores one).")
  flags.DEFINE_float("timeout", 240.0, "Seconds a launch may take to start progressing "
                     "(and a finishing run to end).")
  flags.DEFINE_float("ga3c_slack_seconds", 1.0, "GA3C: margin, in seconds, on top of "
                     "one checkpoint interval and the longest pause of its progress lines "
                     "(see check_resume).")
  flags.DEFINE_bool("keep_logdirs", False, "Keep the runs' logdirs (always kept on a failure).")
  flags.DEFINE_string("output", "kill_resume.json", "JSON results path ('' for none).")
  signal.signal(signal.SIGTERM, _raise_on_sigterm)
  app.run(main)
