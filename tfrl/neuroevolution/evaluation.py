"""Pipelined evaluation of a population on a batched environment.

The env slots are cut into `num_groups` groups, each driven by its own thread:

    group thread: graph loop of [forward(obs of its running slots) ->
                  env.step(actions, slots)] until a slot's episode ends

While one group's emulator step runs (a TF op that releases the GIL), another
group's networks run, so emulation and network work overlap (Such et al.
2018's pipelining). The forward pass and the env step see only the group's
running slots (a batch of varying size, traced once with a None batch
dimension; env index-subset calls), so the slots of finished episodes cost
nothing, not even the uint8 -> float32 conversion of their frames, and
episodes of different lengths need no padding work. Jobs (network, episode)
are handed out to free slots from one shared queue: networks expected to play
longest first (when the caller knows, e.g. the GA from the parents), the
first jobs dealt so that a network's episodes share a group and few jobs
spread over the groups. Slots whose last game ended were auto-reset by the
env and start their next job without another reset.

`stop()` (e.g. from a Ctrl-C handler) makes every group thread leave after its
current graph call (at most `steps_per_call` steps); `evaluate` then raises
`Stopped` and the results are dropped.
"""

import collections
import dataclasses
import threading
import time
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf


class Stopped(Exception):
  """`evaluate` was interrupted by `PipelinedEvaluator.stop()`."""


@dataclasses.dataclass
class EvalResult:
  returns: np.ndarray        # [num_networks, episodes] float64
  lengths: np.ndarray        # [num_networks, episodes] env steps
  frames: int                # emulator frames (env steps * frames_per_step)
  steps: int                 # env steps
  seconds: float

  @property
  def fitness(self) -> np.ndarray:
    return self.returns.mean(axis=1)


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


class PipelinedEvaluator:
  """Evaluates networks 0..n-1 of a `PopulationNetwork` on `env`.

  Args:
    env: a batched env (`tfrl.envs.AtariEnv` / `GymEnv` interface).
    network: a `PopulationNetwork` (its `act(obs, index, active)` is used).
    num_groups: slot groups (>= 1; 2 or more pipeline).
    episode_frame_cap: end an episode after this many frames (None: no cap).
    frames_per_step: emulator frames per env step (default: env.frame_skip or 1).
    steps_per_call: most env steps a group plays in one graph call (a
      `stop()` lands within one call).
    incremental: play with the network's incremental inference
      (`PopulationNetwork.incremental_logits`): each step computes only what
      the change of the frames since the previous step changes.
    refresh_steps: with `incremental`, every slot's step t of an episode with
      t % refresh_steps == 0 is computed in full, which bounds the float
      rounding that incremental steps accumulate (step 0, a new network or
      episode, is always in full). Which steps are fresh depends only on t,
      so an episode plays the same whatever `steps_per_call` is.
  """

  def __init__(self, env, network, num_groups: int = 2,
               episode_frame_cap: Optional[int] = None,
               frames_per_step: Optional[int] = None, steps_per_call: int = 32,
               incremental: bool = False, refresh_steps: int = 100):
    if steps_per_call < 1:
      raise ValueError(f"steps_per_call must be >= 1, got {steps_per_call}.")
    if refresh_steps < 1:
      raise ValueError(f"refresh_steps must be >= 1, got {refresh_steps}.")
    if num_groups < 1 or num_groups > env.num_envs:
      raise ValueError(
          f"num_groups must be in [1, num_envs={env.num_envs}], got {num_groups}.")
    self.env = env
    self.network = network
    self.groups = [g.astype(np.int32) for g in
                   np.array_split(np.arange(env.num_envs), num_groups)]
    self.frames_per_step = int(frames_per_step or getattr(env, "frame_skip", 1) or 1)
    self.episode_frame_cap = episode_frame_cap
    self.steps_per_call = int(steps_per_call)
    self._stop = threading.Event()
    self.incremental = bool(incremental)
    self.refresh_steps = int(refresh_steps)
    obs_shape = tuple(env.observation_shape)
    obs_dtype = getattr(env, "observation_dtype", tf.uint8)
    self._state_specs = (network.incremental_state_specs(obs_dtype)
                         if self.incremental else [])

    def play(obs, index, env_indices, max_steps, episode_steps, state):
      # Up to `max_steps` steps of the running slots in one graph call,
      # ending early after the first step at which any of them finished, so
      # that Python only sees the slots when one needs a new job (the
      # per-step Python and dispatch cost was ~15 % of a GA's CPU time).
      # `state` is the incremental inference's, per running slot, and
      # `episode_steps` each slot's steps so far in its episode.
      all_rows = tf.ones_like(index, tf.bool)

      def body(i, obs, total, ended, state):
        if self.incremental:
          fresh = tf.equal((episode_steps + i) % self.refresh_steps, 0)
          logits, state = network.incremental_logits(obs, index, fresh, state)
          actions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        else:
          actions = network.act(obs, index, all_rows)
        obs, reward, terminated, truncated = env.step(actions, env_indices)
        return (i + 1, obs, total + tf.cast(reward, tf.float64),
                terminated | truncated, state)

      def cond(i, obs, total, ended, state):
        del obs, total, state
        return (i < max_steps) & ~tf.reduce_any(ended)

      steps, obs, total, ended, state = tf.while_loop(
          cond, body, (tf.constant(0), obs, tf.zeros_like(index, tf.float64),
                       tf.zeros_like(index, tf.bool), state),
          parallel_iterations=1)
      return steps, obs, total, ended, state

    self._play = tf.function(play, input_signature=[
        tf.TensorSpec((None,) + obs_shape, obs_dtype),
        tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.int32), tf.TensorSpec([None], tf.int32),
        self._state_specs])
    # Called once per group call: the concrete function skips tf.function's
    # argument binding (measured ~0.3 ms of a ~0.7 ms call on this machine).
    self._play_fn = self._play.get_concrete_function()

  def stop(self) -> None:
    """Ends the running `evaluate` (and any later one) with `Stopped`."""
    self._stop.set()

  def evaluate(self, networks, episodes: int = 1,
               expected_steps: Optional[Sequence[float]] = None,
               seeds: Optional[np.ndarray] = None) -> EvalResult:
    """Plays `episodes` episodes with each of the given loaded networks.

    Args:
      networks: an int n (networks 0..n-1) or a sequence of network indices
        (e.g. elite candidates that are already loaded, so nothing is reloaded).
      episodes: episodes per network.
      expected_steps: optional, each network's expected episode length:
        the networks expected to play longest start first, so that the call
        does not end on a few long episodes with most slots idle.
      seeds: optional [len(networks), episodes] ints in [0, 2^31): each
        episode starts with a reset of its slot seeded with its seed, so its
        outcome depends on (network, seed) only, not on the slot, the group
        or the order it was dealt in. None: slots continue their own random
        streams (and a slot auto-reset by the env keeps that game).

    Returns:
      an `EvalResult` whose rows follow the order of `networks`.
    """
    if isinstance(networks, (int, np.integer)):
      ids = np.arange(int(networks), dtype=np.int64)
    else:
      ids = np.asarray(networks, np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= self.network.loaded):
      raise ValueError(f"only networks [0, {self.network.loaded}) are loaded, asked "
                       f"for {ids.tolist() if ids.size < 16 else ids}.")
    num_networks = int(ids.size)
    start = time.time()
    returns = np.zeros((num_networks, episodes), np.float64)
    lengths = np.zeros((num_networks, episodes), np.int64)
    # Network-major order: the episodes of one network run side by side, so
    # the op computes them as one GEMM and reads that network's weights once
    # per step (on a CPU the dense layers are bound by weight bandwidth).
    play_order = range(num_networks)
    if expected_steps is not None:
      expected_steps = np.asarray(expected_steps, np.float64).reshape(-1)
      if expected_steps.shape != (num_networks,):
        raise ValueError(f"expected_steps must have one value per network "
                         f"({num_networks}), got {expected_steps.shape[0]}.")
      play_order = np.argsort(-expected_steps, kind="stable")
    if seeds is not None:
      seeds = np.asarray(seeds, np.int64)
      if seeds.shape != (num_networks, episodes):
        raise ValueError(f"seeds must be [{num_networks}, {episodes}] (networks x "
                         f"episodes), got {list(seeds.shape)}.")
    jobs = collections.deque((int(net), ep) for net in play_order
                             for ep in range(episodes))
    lock = threading.Lock()
    steps = [0] * len(self.groups)
    errors: List[BaseException] = []

    def next_job():
      with lock:
        return jobs.popleft() if jobs else None

    first_jobs = deal_first_jobs(jobs, [len(g) for g in self.groups])
    # New games in the slots that get a job, but for those already at the
    # start of one (auto-reset when their last game ended): 64 slots' reset
    # sequences were ~1 % of a Pong generation's emulator frames.
    used = np.concatenate([slots[:len(dealt)] for slots, dealt in zip(self.groups, first_jobs)])
    obs_all = None
    if used.size:
      if seeds is not None:
        first_seeds = [seeds[net, ep] for dealt in first_jobs for net, ep in dealt]
        obs_used = self.env.reset(used, seeds=first_seeds).numpy()
      else:
        obs_used = self.env.reset(used, only_played=True).numpy()
      obs_all = np.zeros((self.env.num_envs,) + obs_used.shape[1:], obs_used.dtype)
      obs_all[used] = obs_used

    auto_reset = getattr(self.env, "auto_reset", True)
    cap_steps = None
    if self.episode_frame_cap is not None:
      cap_steps = -(-int(self.episode_frame_cap) // self.frames_per_step)

    def run_group(g, slots):
      try:
        size = len(slots)
        if not first_jobs[g]:
          return
        obs = obs_all[slots].copy()
        net = np.full(size, -1, np.int64)   # the job of each slot, -1 = idle
        epi = np.zeros(size, np.int64)
        for i, job in enumerate(first_jobs[g]):
          net[i], epi[i] = job
        ret = np.zeros(size, np.float64)
        length = np.zeros(size, np.int64)
        # Each slot's incremental-inference state (rows of finished slots are
        # stale, and ignored: a new episode's first step is fresh).
        state = [np.zeros((size,) + tuple(spec.shape[1:]), spec.dtype.as_numpy_dtype)
                 for spec in self._state_specs]
        obs_t = None  # the running slots' frames as a tensor, while they equal `obs`
        state_t = None  # and their state, likewise
        while not self._stop.is_set():
          rows = np.flatnonzero(net >= 0)
          if rows.size == 0:
            break
          if obs_t is None:
            obs_t = tf.convert_to_tensor(obs[rows])
            state_t = [tf.convert_to_tensor(s[rows]) for s in state]
          max_steps = self.steps_per_call
          if cap_steps:
            max_steps = min(max_steps, int(cap_steps - length[rows].max()))
          k, o, r, ended, state_t = self._play_fn(
              obs_t, tf.convert_to_tensor(ids[net[rows]].astype(np.int32)),
              tf.convert_to_tensor(slots[rows]), tf.constant(max_steps, tf.int32),
              tf.convert_to_tensor(length[rows].astype(np.int32)), state_t)
          k = int(k)
          obs_t = o
          ret[rows] += r.numpy()
          length[rows] += k
          steps[g] += k * rows.size
          ended = ended.numpy()
          capped = (length[rows] >= cap_steps) if cap_steps else np.zeros_like(ended)
          finished = np.flatnonzero(ended | capped)
          if finished.size == 0:
            continue
          # The running set changes: back to numpy to rebuild it.
          obs[rows] = o.numpy()
          for s, s_t in zip(state, state_t):
            s[rows] = s_t.numpy()
          obs_t = state_t = None
          reset, reset_seeds = [], []
          for j in finished:
            i = rows[j]
            returns[net[i], epi[i]], lengths[net[i], epi[i]] = ret[i], length[i]
            ret[i], length[i] = 0.0, 0
            job = next_job()
            net[i], epi[i] = job if job is not None else (-1, 0)
            if job is not None and seeds is not None:
              reset.append(i)
              reset_seeds.append(seeds[job])
            elif job is not None and (not ended[j] or not auto_reset):
              reset.append(i)  # capped mid-episode, or not reset by the env.
          if reset:
            reset = np.array(reset)
            obs[reset] = self.env.reset(
                slots[reset], seeds=reset_seeds if seeds is not None else None).numpy()
      except BaseException as e:  # surfaced in the caller's thread.
        errors.append(e)
        with lock:
          jobs.clear()

    threads = [threading.Thread(target=run_group, args=(g, slots), daemon=True)
               for g, slots in enumerate(self.groups)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    if errors:
      raise errors[0]
    if self._stop.is_set():
      raise Stopped("evaluation stopped; its results are dropped")
    total = sum(steps)
    return EvalResult(returns, lengths, total * self.frames_per_step, total,
                      time.time() - start)
