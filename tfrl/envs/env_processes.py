"""GymEnv's gymnasium envs stepped in child processes, one per block of slots.

    envs = EnvProcesses(spec, num_envs=32, processes=2)   # slots 0-15 | 16-31
    obs = envs.reset(indices, seeds)                       # seeds: env_worker.NO_SEED, KEEP
    obs, reward, terminated, truncated = envs.step(indices, actions)
    envs.close()

Why: gymnasium's Python around MuJoCo's step holds the GIL, so in one
process the neuroevolution evaluator's slot groups step their envs one at a
time (docs/neuroevolution.md, "Throughput on MuJoCo"). Each child
(`tfrl.env_worker`, no TensorFlow) owns a contiguous block of slots; with
one block per slot group, a group's step is one request to one child, and
the parent's thread waits for it without the GIL.

A request touching several blocks goes to their children at once (their
locks taken in block order, so concurrent requests cannot deadlock). The
arrays travel through memory both processes map (an anonymous memfd: no
name to leak, whatever kills the parent); the pipes carry a few bytes.

Children never outlive their `EnvProcesses`: `close()`, its garbage
collection and the interpreter's exit end them, and a child exits by itself
when its parent dies (`tfrl.env_worker`). A child's exception reaches the
caller as one line, a ValueError (the env refused its input) or a
RuntimeError (anything else, or a child that died), naming the process and
its slots; the requests of the other children are still answered first, so
the env stays usable after a ValueError.
"""

import contextlib
import mmap
from multiprocessing import connection
import os
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Dict, List, Sequence

import numpy as np

import tfrl
from tfrl import env_worker

# The root tfrl is imported from, first on the children's path: they run
# this process's code, whatever sys.path or an installed copy says.
_TFRL_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tfrl.__file__)))


def _memory_file(size: int) -> int:
  """A file descriptor of `size` zeroed bytes that has no name anywhere."""
  if hasattr(os, "memfd_create"):
    fd = os.memfd_create("tfrl-env-slots", os.MFD_CLOEXEC)
  else:
    with tempfile.TemporaryFile() as f:  # unlinked at once; the descriptor stays
      fd = os.dup(f.fileno())
  os.ftruncate(fd, size)
  return fd


class _Child:
  """One child process, its pipes and its shared arrays."""

  def __init__(self, number: int, slots: np.ndarray, layout, size: int):
    self.start, self.count, self.size = int(slots[0]), len(slots), size
    self.lock = threading.Lock()
    self.broken = None  # why the child cannot be asked anything any more
    memory_fd = _memory_file(size)
    self.memory = mmap.mmap(memory_fd, size)
    self.a = env_worker.shared_arrays(self.memory, layout)
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_TFRL_ROOT, env.get("PYTHONPATH")) if p)
    fds = (request_r, reply_w, memory_fd)
    try:
      self.proc = subprocess.Popen(
          [sys.executable, "-m", "tfrl.env_worker", *map(str, fds), str(os.getpid())],
          pass_fds=fds, stdin=subprocess.DEVNULL, env=env)
    finally:
      for fd in fds:
        os.close(fd)
    self.requests = connection.Connection(request_w, readable=False)
    self.replies = connection.Connection(reply_r, writable=False)
    self.name = (f"env process {number} (slots {self.start}..{self.start + self.count - 1}, "
                 f"pid {self.proc.pid})")

  def _ended(self) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
      self.proc.wait(timeout=1)
    return f"{self.name} ended unexpectedly (exit code {self.proc.poll()})"

  def send(self, command: str, argument) -> None:
    if self.broken:
      raise RuntimeError(self.broken)
    self.broken = f"{self.name} was interrupted during a request; make a new env"
    try:
      self.requests.send((command, argument))
    except OSError:
      self.broken = self._ended()
      raise RuntimeError(self.broken) from None

  def receive(self):
    """The answer to the request sent; its error raised as one line."""
    try:
      status, *reply = self.replies.recv()
    except (EOFError, OSError):
      self.broken = self._ended()
      raise RuntimeError(self.broken) from None
    self.broken = None
    if status == "ok":
      return reply[0]
    is_value_error, line = reply
    raise (ValueError if is_value_error else RuntimeError)(f"{self.name}: {line}")

  def close(self) -> None:
    self.broken = self.broken or f"{self.name} is closed"
    # The end of its request pipe makes the child exit, even mid-request.
    with contextlib.suppress(OSError):
      self.requests.close()
    try:
      self.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    with contextlib.suppress(OSError):
      self.replies.close()


def _close_children(children: List[_Child]) -> None:
  for child in children:
    child.close()


class EnvProcesses:
  """`num_envs` slots of gymnasium envs in `processes` child processes.

  Args:
    spec: how the children make their envs: env_id, max_episode_steps,
      make_kwargs, auto_reset, discrete (int actions), shapes
      (observation_shape, observation_dtype, action_shape, action_dtype).
    num_envs: slots; process p owns the p-th of `np.array_split`'s blocks.
    processes: children (at most `num_envs`).
  """

  def __init__(self, spec: dict, num_envs: int, processes: int):
    if not isinstance(processes, int) or not 1 <= processes:
      raise ValueError(f"processes must be a positive int, got {processes!r}.")
    blocks = np.array_split(np.arange(num_envs), min(processes, num_envs))
    self._starts = np.array([b[0] for b in blocks])
    self._children: List[_Child] = []
    self._finalizer = weakref.finalize(self, _close_children, self._children)
    try:
      for number, slots in enumerate(blocks):  # all start, then all make their envs
        layout, size = env_worker.array_layout(len(slots), *spec["shapes"])
        self._children.append(_Child(number, slots, layout, size))
      for child in self._children:
        child.send("spec", dict(spec, num_envs=child.count, memory_bytes=child.size))
      for child in self._children:
        child.receive()
    except BaseException:
      self.close()
      raise

  @property
  def pids(self) -> List[int]:
    return [child.proc.pid for child in self._children]

  def _request(self, command: str, indices: np.ndarray, inputs: Dict[str, np.ndarray],
               outputs: Sequence[str]) -> Dict[str, np.ndarray]:
    """Sends each child its rows of `inputs`; the `outputs` (request order) and "obs"."""
    owner = np.searchsorted(self._starts, indices, side="right") - 1
    involved = [int(owner[0])] if owner.min() == owner.max() else np.unique(owner).tolist()
    results, errors = {}, []
    with contextlib.ExitStack() as locks:
      parts = []
      for c in involved:  # in block order
        child = self._children[c]
        locks.enter_context(child.lock)
        rows = np.flatnonzero(owner == c) if len(involved) > 1 else slice(None)
        local = indices[rows] - child.start
        count = len(local)
        child.a["index"][:count] = local
        for name, values in inputs.items():
          child.a[name][:count] = values[rows]
        try:
          child.send(command, count)
        except RuntimeError as e:  # a dead child: the others' answers are still read
          errors.append(e)
          continue
        parts.append((child, rows, local))
      for child, rows, local in parts:
        try:
          child.receive()
        except (ValueError, RuntimeError) as e:
          errors.append(e)
          continue
        for name in outputs:
          self._gather(results, name, child.a[name][:len(local)], rows, len(indices))
        self._gather(results, "obs", child.a["obs"][local], rows, len(indices))
      if errors:
        raise errors[0]
    return results

  @staticmethod
  def _gather(results, name, values, rows, n) -> None:
    if name not in results:
      results[name] = np.empty((n,) + values.shape[1:], values.dtype)
    results[name][rows] = values

  def step(self, indices: np.ndarray, actions: np.ndarray):
    """Steps slots `indices` (distinct, checked by the caller) with `actions`;
    (obs, reward, terminated, truncated) in the order of `indices`."""
    out = self._request("step", indices, {"action": actions},
                        ("reward", "terminated", "truncated"))
    return out["obs"], out["reward"], out["terminated"], out["truncated"]

  def reset(self, indices: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Resets slots `indices` with `seeds` (`env_worker.NO_SEED`: the slot's own
    stream; `env_worker.KEEP`: not reset); the observations of `indices`."""
    return self._request("reset", indices, {"seed": seeds}, ())["obs"]

  def render(self, index: int):
    child = self._children[int(np.searchsorted(self._starts, index, side="right") - 1)]
    with child.lock:
      child.send("render", index - child.start)
      return child.receive()

  def close(self) -> None:
    """Ends the children (waits for them); safe to repeat."""
    self._finalizer()
