"""The jobs of one evaluation call and the slot groups that play them.

A call plays one or more parts, each a set of loaded networks (rows of the
population) with its own number of episodes and reset seeds; a job is one
episode of one network, `(net, episode)` with `net` numbering the call's
networks part after part. Jobs wait in one queue shared by the slot groups:
part after part, within a part the networks expected to play longest first.

A late part (`LatePart`) is not known when the call starts: its networks are
chosen among an earlier part's once that part's last episode has ended (the
GA's elite, chosen by the candidates' re-evaluation, then plays its episode
of the next generation), and its jobs go to the front of the queue, so the
next slot that frees takes them.
"""

import collections
import dataclasses
import threading
from typing import Callable, List, Optional, Sequence

import numpy as np

from tfrl.neuroevolution import timing as timing_lib


@dataclasses.dataclass(frozen=True)
class Part:
  """Loaded networks (rows), each playing `episodes` episodes.

  seeds: optional [len(rows), episodes] reset seeds; expected_steps:
  optional, each network's expected episode length (longest start first);
  observe: optional [len(rows), episodes] bool, the episodes whose
  observation sums the result returns.
  """
  rows: Sequence[int]
  episodes: int = 1
  seeds: Optional[np.ndarray] = None
  expected_steps: Optional[Sequence[float]] = None
  observe: Optional[np.ndarray] = None


@dataclasses.dataclass(frozen=True)
class LatePart:
  """`count` networks chosen by `choose(result of part `after`)` (their rows),
  dealt once every episode of that part has ended."""
  after: int
  choose: Callable[..., Sequence[int]]
  count: int
  episodes: int = 1
  seeds: Optional[np.ndarray] = None


def deal_first_jobs(jobs: collections.deque, group_sizes: Sequence[int]) -> List[List[tuple]]:
  """Takes each slot group's first (network, episode) jobs off `jobs`.

  A network's jobs stay in one group while it has a free slot (its episodes
  then share each read of its weights); the next network goes to the group
  with the most free slots. So a few jobs (e.g. the elite candidates'
  re-evaluation) are spread over the groups, which then overlap, where
  taking jobs in slot order gave them all to the first group.
  """
  free = list(group_sizes)
  dealt: List[List[tuple]] = [[] for _ in free]
  group, last_net = None, None
  while jobs and max(free) > 0:
    net = jobs[0][0]
    if net != last_net or free[group] == 0:
      group = int(np.argmax(free))
    dealt[group].append(jobs.popleft())
    free[group] -= 1
    last_net = net
  return dealt


class Call:
  """What the group threads of one evaluation call share: its networks'
  rows (`ids`), seeds and results, indexed by job, and the job queue."""

  def __init__(self, parts: Sequence[Part], late: Optional[LatePart], group_sizes,
               cap_steps: Optional[int], result_of: Callable):
    self.parts = list(parts)
    self.late = late
    counts = [len(p.rows) for p in self.parts] + ([late.count] if late else [])
    episodes = [p.episodes for p in self.parts] + ([late.episodes] if late else [])
    self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    total, most = int(self.offsets[-1]), max(episodes, default=1)
    self.ids = np.full(total, -1, np.int64)  # a late part's rows: once chosen
    self.seeds = None
    if any(p.seeds is not None for p in self.parts) or (late and late.seeds is not None):
      self.seeds = np.zeros((total, most), np.int64)
    self.observe = None
    if any(p.observe is not None for p in self.parts):
      self.observe = np.zeros((total, most), bool)
    for p, part in enumerate(self.parts):
      self._fill(p, part.rows, part.seeds, part.observe)
    if late is not None:
      self._fill(len(self.parts), None, late.seeds, None)
    self.returns = np.zeros((total, most), np.float64)
    self.lengths = np.zeros((total, most), np.int64)
    self.jobs = collections.deque(
        (int(self.offsets[p] + net), ep) for p, part in enumerate(self.parts)
        for net in _play_order(part) for ep in range(part.episodes))
    self.first_jobs = deal_first_jobs(self.jobs, group_sizes)
    self.cap_steps = cap_steps
    self.clock = timing_lib.CallClock(list(group_sizes))
    self.obs_all = None
    self.lock = threading.Lock()
    self.steps = [0] * len(group_sizes)
    self.errors: List[BaseException] = []
    self.sums: List[tuple] = []  # (job, episode, s, sq, n)
    self._result_of = result_of
    self._waiting = None
    if late is not None:
      after = self.parts[late.after]
      self._waiting = len(after.rows) * after.episodes
      if not self._waiting:
        raise ValueError("a late part must wait for a part with episodes to play.")

  def _fill(self, p: int, rows, seeds, observe) -> None:
    span = slice(int(self.offsets[p]), int(self.offsets[p + 1]))
    if rows is not None:
      self.ids[span] = np.asarray(rows, np.int64).reshape(-1)
    if seeds is not None:
      seeds = np.asarray(seeds, np.int64)
      self.seeds[span, :seeds.shape[1]] = seeds
    if observe is not None:
      observe = np.asarray(observe, bool)
      self.observe[span, :observe.shape[1]] = observe

  def part_of(self, net: int) -> int:
    return int(np.searchsorted(self.offsets, net, side="right")) - 1

  def next_job(self):
    with self.lock:
      return self.jobs.popleft() if self.jobs else None

  def finished(self, net: int) -> None:
    """One episode of network `net` ended: when it was the last of the part
    the late part waits for, the late part's networks are chosen and their
    jobs put first in the queue."""
    if self._waiting is None or self.part_of(net) != self.late.after:
      return
    with self.lock:
      self._waiting -= 1
      if self._waiting:
        return
      rows = np.asarray(self.late.choose(self._result_of(self.late.after)), np.int64)
      if rows.shape != (self.late.count,):
        raise ValueError(f"the late part chose {rows.tolist()}: expected "
                         f"{self.late.count} network rows.")
      first = int(self.offsets[len(self.parts)])
      self.ids[first:first + self.late.count] = rows
      self.jobs.extendleft(reversed([(first + net, ep) for net in range(self.late.count)
                                     for ep in range(self.late.episodes)]))


def _play_order(part: Part):
  if part.expected_steps is None:
    return range(len(part.rows))
  expected = np.asarray(part.expected_steps, np.float64).reshape(-1)
  return np.argsort(-expected, kind="stable")


class SlotGroup:
  """One slot group's slots and the job, return and state of each."""

  def __init__(self, slots: np.ndarray, first_jobs, obs: np.ndarray, state_specs,
               clock: timing_lib.GroupClock):
    size = len(slots)
    self.slots = slots
    self.clock = clock
    self.obs = obs
    self.net = np.full(size, -1, np.int64)   # the job of each slot, -1 = idle
    self.epi = np.zeros(size, np.int64)
    for i, job in enumerate(first_jobs):
      self.net[i], self.epi[i] = job
    self.ret = np.zeros(size, np.float64)
    self.length = np.zeros(size, np.int64)
    # Each slot's graph-loop state: incremental inference's (rows of finished
    # slots are stale, and ignored: a new episode's first step is fresh), then
    # the observation sums (zeroed for each new episode).
    self.state = [np.zeros((size,) + tuple(spec.shape[1:]), spec.dtype.as_numpy_dtype)
                  for spec in state_specs]
