"""Plumbing shared by the races against peer libraries (race_pong.py, race_mujoco.py).

Runs in tfrl's venv. A peer runs from its own virtualenv (`<venv>/bin/python`,
as `source <venv>/bin/activate` would), outside this repository; nothing here
imports a peer.

- `run_for`: one command in a session of its own for a wall-clock budget,
  then Ctrl-C (SIGINT to its process group, as a terminal sends it) and, if
  anything of the session lingers, SIGTERM and SIGKILL to all of it; nothing it
  started is left behind. `start` and `finish` are its two halves, for runs
  that go side by side (td3_study.py).
- `scalars`: the (wall time, step, value) points of TensorBoard event files, the
  log every library here writes (tfrl, Stable-Baselines3, Sample Factory).
- `venv_versions`: the versions of a peer venv's packages, for the provenance.
- `write_json`: a race's record, its folder made if needed.
- `spread`: mean and spread over seeds.
"""

import dataclasses
import glob
import json
import os
import signal
import statistics
import subprocess
import time
from typing import Dict, List, Optional, Sequence

# Variables of tfrl's environment that must not leak into a peer's process.
_TFRL_ONLY_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL", "RAY_ADDRESS")


@dataclasses.dataclass
class Finished:
  """What `run_for` saw: when it started, how it ended, where it printed."""
  command: List[str]
  start: float             # time.time() just before the process started
  stop_sent: Optional[float]  # when SIGINT went out (None: ended by itself)
  end: float
  returncode: int
  how: str                 # "exited", "sigint", "sigterm" or "sigkill"
  output: str              # path of stdout + stderr

  def tail(self, lines: int = 15) -> str:
    try:
      with open(self.output, errors="replace") as f:
        return "".join(f.readlines()[-lines:])
    except OSError:
      return ""


def peer_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
  """This process's environment less what belongs to tfrl's venv."""
  env = {k: v for k, v in os.environ.items() if k not in _TFRL_ONLY_ENV}
  env.update(extra or {})
  return env


def _default_sigint():
  # A background shell starts its children with SIGINT ignored, and Python
  # keeps an inherited SIG_IGN: Ctrl-C would then not reach the run.
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _session(sid: int) -> List[int]:
  """Live processes of session `sid`: the run and all it started (Ray's workers,
  for one, take process groups of their own but stay in the session)."""
  pids = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
      continue
    if int(fields[3]) == sid and fields[0] != "Z":
      pids.append(int(entry))
  return pids


def _signal_session(sid: int, sig: int) -> None:
  for pid in _session(sid):
    try:
      os.kill(pid, sig)
    except ProcessLookupError:
      pass


def _wait_session(proc: subprocess.Popen, seconds: float) -> bool:
  """Waits for the run and everything in its session; True when all are gone."""
  deadline = time.time() + seconds
  while True:
    proc.poll()
    if proc.returncode is not None and not _session(proc.pid):
      return True
    if time.time() >= deadline:
      return False
    time.sleep(0.5)


def _stop_session(proc: subprocess.Popen, grace: float) -> str:
  """Ctrl-C to the run's process group, then SIGTERM and SIGKILL to its session,
  each only if the last left something alive; the last signal sent, or "exited"."""
  how = "exited"
  for sig, name, wait in ((signal.SIGINT, "sigint", grace),
                          (signal.SIGTERM, "sigterm", 30), (signal.SIGKILL, "sigkill", 30)):
    if _wait_session(proc, 0):
      break
    how = name
    if sig == signal.SIGINT:  # Ctrl-C: to the foreground process group
      try:
        os.killpg(proc.pid, sig)
      except ProcessLookupError:
        pass
    else:
      _signal_session(proc.pid, sig)
    if _wait_session(proc, wait):
      break
  return how


@dataclasses.dataclass
class Session:
  """A command started by `start`, in a session of its own; `finish` ends it."""
  command: List[str]
  start: float
  proc: subprocess.Popen
  output: str

  def running(self) -> bool:
    return self.proc.poll() is None


def start(command: Sequence[str], output: str, cwd: Optional[str] = None,
          env: Optional[Dict[str, str]] = None) -> Session:
  """Starts `command` in a session of its own (a Ctrl-C of the caller does not
  reach it), its stdout and stderr to `output`."""
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  with open(output, "w") as out:
    started = time.time()
    proc = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                            env=env, start_new_session=True, preexec_fn=_default_sigint)
  return Session(list(command), started, proc, output)


def finish(session: Session, stop: bool, grace: float = 180.0) -> Finished:
  """Ends a started run: with `stop`, Ctrl-C now (then SIGTERM, SIGKILL);
  otherwise the run has exited and what it started gets 30 s to follow."""
  proc = session.proc
  how = "exited"
  stop_sent = time.time() if stop else None
  if stop or not _wait_session(proc, 30):
    how = _stop_session(proc, grace)
  proc.wait()
  return Finished(session.command, session.start, stop_sent, time.time(), proc.returncode,
                  how, session.output)


def run_for(command: Sequence[str], seconds: float, output: str, cwd: Optional[str] = None,
            env: Optional[Dict[str, str]] = None, grace: float = 180.0) -> Finished:
  """Runs `command` for `seconds` of wall clock (or until it exits), then stops it.

  The run has a session of its own, so a Ctrl-C of the benchmark does not
  reach it: when the benchmark is interrupted, the run is stopped the same
  way before the interruption goes on."""
  session = start(command, output, cwd=cwd, env=env)
  try:
    session.proc.wait(timeout=seconds)
    timed_out = False
  except subprocess.TimeoutExpired:
    timed_out = True
  except BaseException:
    _stop_session(session.proc, grace=30)
    raise
  return finish(session, stop=timed_out, grace=grace)


def scalars(event_dir: str, tags: Sequence[str]) -> List[dict]:
  """Points {tag, step, wall_time, value} of `tags` in the event files under `event_dir`."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  wanted, points = set(tags), []
  paths = glob.glob(os.path.join(event_dir, "**", "events.out.tfevents.*"), recursive=True)
  for path in sorted(paths):
    try:
      for record in tf.data.TFRecordDataset(path):
        event = tf.compat.v1.Event.FromString(record.numpy())
        for v in event.summary.value:
          if v.tag in wanted:
            value = (float(tf.make_ndarray(v.tensor)) if v.HasField("tensor")
                     else float(v.simple_value))
            points.append({"tag": v.tag, "step": int(event.step),
                           "wall_time": float(event.wall_time), "value": value})
    except tf.errors.DataLossError:
      pass  # a file cut short by the stop: keep what was read
  points.sort(key=lambda p: (p["wall_time"], p["step"]))
  return points


def rate_in_window(points: List[dict], start: float, end: float,
                   units_per_step: float = 1.0) -> dict:
  """Units per second between the first and the last point in [start, end].

  Each point's step is a cumulative count (frames, agent steps): the rate
  is the count's growth over the wall time between the two points.
  """
  inside = [p for p in points if start <= p["wall_time"] <= end]
  if len(inside) < 2 or inside[-1]["wall_time"] <= inside[0]["wall_time"]:
    return {"per_second": None, "points": len(inside)}
  first, last = inside[0], inside[-1]
  return {"per_second": (last["step"] - first["step"]) * units_per_step
                        / (last["wall_time"] - first["wall_time"]),
          "points": len(inside), "seconds": last["wall_time"] - first["wall_time"],
          "units": (last["step"] - first["step"]) * units_per_step}


def write_json(record: dict, path: str) -> None:
  """Writes `record` as indented JSON at `path`, making its folder; whole or
  not at all (a writer killed halfway leaves the file it found)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  partial = f"{path}.partial"
  with open(partial, "w") as f:
    json.dump(record, f, indent=1)
  os.replace(partial, path)


def venv_versions(venv: str, packages: Sequence[str]) -> Dict[str, Optional[str]]:
  """`packages`' versions as installed in `venv` (None: not installed)."""
  code = ("import json, sys\nfrom importlib import metadata\nout = {}\n"
          "for name in sys.argv[1:]:\n"
          "  try: out[name] = metadata.version(name)\n"
          "  except metadata.PackageNotFoundError: out[name] = None\n"
          "print(json.dumps(out))")
  python = os.path.join(venv, "bin", "python")
  try:
    done = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True,
                          timeout=120, env=peer_env())
    versions = json.loads(done.stdout)
    versions["python"] = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, timeout=60).stdout.strip()
    return versions
  except (OSError, subprocess.SubprocessError, ValueError):
    return {name: None for name in packages}


def rolling_mean(values: Sequence[float], window: int) -> List[float]:
  """The mean of the last `window` values (fewer at the start) after each value."""
  out, total = [], 0.0
  for i, v in enumerate(values):
    total += v
    if i >= window:
      total -= values[i - window]
    out.append(total / min(i + 1, window))
  return out


def spread(values) -> Optional[dict]:
  """Mean, population std, min, max and count of `values` (None entries left
  out); None when none is left."""
  values = [v for v in values if v is not None]
  if not values:
    return None
  return {"mean": statistics.fmean(values), "std": statistics.pstdev(values),
          "min": min(values), "max": max(values), "seeds": len(values)}
