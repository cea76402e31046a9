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

The network's head gives the actions (argmax, or continuous actions within
the bounds of a Box). With observation normalization (`obs_norm_clip`) the
networks see normalized observations, and the episodes that `evaluate`'s
`observe` names return the float64 sums of their observations
(`normalization.EpisodeSums`), each summed step by step in its slot, so they
do not depend on the slot, the group or the graph calls.

`evaluate_parts` plays several calls' jobs as one (`jobs.py`): the slots one
part leaves idle play the next part's, and a late part's networks, chosen by
an earlier part's result, start as soon as that part's last episode ends.

`stop()` (e.g. from a Ctrl-C handler) makes every group thread leave after its
current graph call (at most `steps_per_call` steps); `evaluate` then raises
`Stopped` and the results are dropped.
"""

import dataclasses
import functools
import threading
import time
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution import jobs as jobs_lib
from tfrl.neuroevolution import normalization
from tfrl.neuroevolution import timing as timing_lib

# What callers of `evaluate_parts` build (tfrl/neuroevolution/jobs.py).
Part, LatePart = jobs_lib.Part, jobs_lib.LatePart
deal_first_jobs = jobs_lib.deal_first_jobs


class Stopped(Exception):
  """`evaluate` was interrupted by `PipelinedEvaluator.stop()`."""


@dataclasses.dataclass
class EvalResult:
  returns: np.ndarray        # [num_networks, episodes] float64
  lengths: np.ndarray        # [num_networks, episodes] env steps
  frames: int                # emulator frames (env steps * frames_per_step)
  steps: int                 # env steps
  seconds: float
  # The observation sums of the episodes `observe` named (None: none asked for).
  observations: Optional[normalization.EpisodeSums] = None
  timing: Optional[timing_lib.EvalTiming] = None  # where `seconds` went (None: not measured)

  @property
  def fitness(self) -> np.ndarray:
    return self.returns.mean(axis=1)


def _non_finite(obs: tf.Tensor) -> tf.Tensor:
  """[B] bool: rows of float observations with a NaN or inf (uint8 frames: none)."""
  if not obs.dtype.is_floating:
    return tf.zeros(tf.shape(obs)[:1], tf.bool)
  return ~tf.reduce_all(tf.math.is_finite(tf.reshape(obs, [tf.shape(obs)[0], -1])), axis=1)


class PipelinedEvaluator:
  """Evaluates networks 0..n-1 of a `PopulationNetwork` on `env`.

  Args:
    env: a batched env (`tfrl.envs.AtariEnv` / `GymEnv` interface).
    network: a `PopulationNetwork` (its `act(obs, index, active)` is used:
      the actions of its head, discrete or continuous).
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
    obs_norm_clip: not None: observations are normalized before the networks
      see them (`normalization.ObservationFilter`, statistics given by
      `set_normalization`, clipped to +-obs_norm_clip), and each episode's
      observations are summed in float64, step by step, for `evaluate`'s
      `observe`.

  A non-finite observation (NaN or inf) from the env ends `evaluate` with a
  ValueError naming the network, episode and step.
  """

  def __init__(self, env, network, num_groups: int = 2,
               episode_frame_cap: Optional[int] = None,
               frames_per_step: Optional[int] = None, steps_per_call: int = 32,
               incremental: bool = False, refresh_steps: int = 100,
               obs_norm_clip: Optional[float] = None):
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
    self._incremental_specs = (network.incremental_state_specs(obs_dtype)
                               if self.incremental else [])
    self.observation_filter = None
    sum_specs = []
    if obs_norm_clip is not None:
      if len(obs_shape) != 1:
        raise ValueError(f"observation normalization needs vector observations, got "
                         f"shape {list(obs_shape)}.")
      self.observation_filter = normalization.ObservationFilter(obs_shape[0], obs_norm_clip)
      sum_specs = [tf.TensorSpec((None,) + obs_shape, tf.float64)] * 2
    self._state_specs = self._incremental_specs + sum_specs
    signature = [tf.TensorSpec((None,) + obs_shape, obs_dtype),
                 tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32),
                 tf.TensorSpec([], tf.int32), tf.TensorSpec([None], tf.int32),
                 self._state_specs]
    # Called once per group call: the concrete functions skip tf.function's
    # argument binding (measured ~0.3 ms of a ~0.7 ms call on this machine).
    # The timed one also returns its env and net seconds (`timing`).
    self._play_fn, self._timed_play_fn = (
        tf.function(functools.partial(self._play_steps, timed),
                    input_signature=signature).get_concrete_function()
        for timed in (False, True))

  def _play_steps(self, timed, obs, index, env_indices, max_steps, episode_steps, state):
    """Up to `max_steps` steps of the running slots in one graph call, ending
    early after the first step at which any of them finished (or saw a
    non-finite observation), so that Python only sees the slots when one needs
    a new job (the per-step Python and dispatch cost was ~15 % of a GA's CPU
    time). `state`: the incremental inference's per running slot, then the
    observation sums; `episode_steps` each slot's steps so far in its episode.
    `timed`: also return [env, net] seconds, from timestamps around the
    networks and the env step (ordered by control dependencies).
    """
    network, env = self.network, self.env
    all_rows = tf.ones_like(index, tf.bool)
    num_incremental = len(self._incremental_specs)

    def body(i, obs, total, ended, bad, state, seconds):
      del ended, bad
      if timed:
        before_net = tf.timestamp()
        with tf.control_dependencies([before_net]):
          obs = tf.identity(obs)
      inc_state, sums = state[:num_incremental], state[num_incremental:]
      x = obs
      if self.observation_filter is not None:
        x64 = tf.cast(obs, tf.float64)
        sums = [sums[0] + x64, sums[1] + x64 * x64]
        x = self.observation_filter(obs)
      if self.incremental:
        fresh = tf.equal((episode_steps + i) % self.refresh_steps, 0)
        logits, inc_state = network.incremental_logits(x, index, fresh, inc_state)
        actions = network.layout.head.actions(logits)
      else:
        actions = network.act(x, index, all_rows)
      if timed:
        with tf.control_dependencies([actions]):
          before_env = tf.timestamp()
        with tf.control_dependencies([before_env]):
          actions = tf.identity(actions)
      obs, reward, terminated, truncated = env.step(actions, env_indices)
      if timed:
        with tf.control_dependencies([obs, reward, terminated, truncated]):
          after_env = tf.timestamp()
        seconds += tf.stack([after_env - before_env, before_env - before_net])
      bad = _non_finite(obs)
      return (i + 1, obs, total + tf.cast(reward, tf.float64),
              terminated | truncated | bad, bad, list(inc_state) + list(sums), seconds)

    def cond(i, obs, total, ended, bad, state, seconds):
      del obs, total, bad, state, seconds
      return (i < max_steps) & ~tf.reduce_any(ended)

    no_rows = tf.zeros_like(index, tf.bool)
    steps, obs, total, ended, bad, state, seconds = tf.while_loop(
        cond, body, (tf.constant(0), obs, tf.zeros_like(index, tf.float64),
                     no_rows, no_rows, state, tf.zeros([2], tf.float64)),
        parallel_iterations=1)
    if timed:
      return steps, obs, total, ended, bad, state, seconds
    return steps, obs, total, ended, bad, state

  def stop(self) -> None:
    """Ends the running `evaluate` (and any later one) with `Stopped`."""
    self._stop.set()

  def set_normalization(self, mean: np.ndarray, std: np.ndarray) -> None:
    """The statistics the networks' observations are normalized with from now on."""
    if self.observation_filter is None:
      raise ValueError("this evaluator was built without observation normalization.")
    self.observation_filter.set(mean, std)

  def evaluate(self, networks, episodes: int = 1,
               expected_steps: Optional[Sequence[float]] = None,
               seeds: Optional[np.ndarray] = None,
               observe: Optional[np.ndarray] = None) -> EvalResult:
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
      observe: optional [len(networks), episodes] bool (needs `obs_norm_clip`):
        the result's `observations` holds these episodes' observation sums.

    Returns:
      an `EvalResult` whose rows follow the order of `networks`.
    """
    if isinstance(networks, (int, np.integer)):
      networks = range(int(networks))
    part = Part(list(networks), episodes, seeds, expected_steps, observe)
    return self.evaluate_parts([part])[0]

  def evaluate_parts(self, parts: Sequence[Part],
                     late: Optional[LatePart] = None) -> List[EvalResult]:
    """Plays the parts' jobs in one call: the slots that one part leaves idle
    play the next part's (`evaluate`'s arguments, per part; `jobs.py`).

    `late`: a part whose networks its `choose` names from the result of the
    part it waits for, once that part's last episode has ended; its jobs
    are dealt before any other then waiting. Returns one `EvalResult` per
    part (and one for `late`, last), each as `evaluate` would give it; their
    `seconds` and `timing` are the whole call's.
    """
    start = time.time()
    call = self._new_call(parts, late)
    resets = time.perf_counter()
    self._first_observations(call)
    call.clock.setup_resets = time.perf_counter() - resets
    threads = [threading.Thread(target=self._run_group, args=(call, g, slots), daemon=True)
               for g, slots in enumerate(self.groups)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    if call.errors:
      raise call.errors[0]
    if self._stop.is_set():
      raise Stopped("evaluation stopped; its results are dropped")
    timing = call.clock.timing()
    seconds = time.time() - start
    return [dataclasses.replace(self._result(call, p), seconds=seconds, timing=timing)
            for p in range(len(call.offsets) - 1)]

  def _result(self, call: jobs_lib.Call, p: int) -> EvalResult:
    """Part p's result (the late part's: p = len(parts)), up to now."""
    span = slice(int(call.offsets[p]), int(call.offsets[p + 1]))
    episodes = call.parts[p].episodes if p < len(call.parts) else call.late.episodes
    lengths = call.lengths[span, :episodes].copy()
    steps = int(lengths.sum())
    observations = None
    if p < len(call.parts) and call.parts[p].observe is not None:
      dim = self.env.observation_shape[0]
      observations = normalization.EpisodeSums.concat([normalization.EpisodeSums(
          np.array([[j - span.start, e]], np.int64), s[None], sq[None],
          np.array([n], np.int64)) for j, e, s, sq, n in call.sums
                                                       if span.start <= j < span.stop], dim)
    return EvalResult(call.returns[span, :episodes].copy(), lengths,
                      steps * self.frames_per_step, steps, 0.0, observations)

  def _new_call(self, parts, late) -> jobs_lib.Call:
    """The call's jobs and arrays, its arguments checked (ValueError)."""
    for part in parts:
      rows = np.asarray(part.rows, np.int64).reshape(-1)
      if rows.size and (rows.min() < 0 or rows.max() >= self.network.loaded):
        raise ValueError(f"only networks [0, {self.network.loaded}) are loaded, asked "
                         f"for {rows.tolist() if rows.size < 16 else rows}.")
      # Network-major order: the episodes of one network run side by side, so
      # the op computes them as one GEMM and reads that network's weights once
      # per step (on a CPU the dense layers are bound by weight bandwidth).
      if part.expected_steps is not None and np.size(part.expected_steps) != rows.size:
        raise ValueError(f"expected_steps must have one value per network "
                         f"({rows.size}), got {np.size(part.expected_steps)}.")
      for name, value in (("seeds", part.seeds), ("observe", part.observe)):
        if value is not None and np.shape(value) != (rows.size, part.episodes):
          raise ValueError(f"{name} must be [{rows.size}, {part.episodes}] (networks x "
                           f"episodes), got {list(np.shape(value))}.")
      if part.observe is not None and self.observation_filter is None:
        raise ValueError("observe needs an evaluator built with observation normalization.")
    seeded = [p.seeds is not None for p in parts] + ([late.seeds is not None] if late else [])
    if any(seeded) and not all(seeded):
      raise ValueError("either every part of a call has reset seeds or none has.")
    if late is not None and (not 0 <= late.after < len(parts) or (
        late.seeds is not None and np.shape(late.seeds) != (late.count, late.episodes))):
      raise ValueError(f"a late part waits for one of the {len(parts)} parts and has "
                       f"[{late.count}, {late.episodes}] seeds.")
    cap_steps = None
    if self.episode_frame_cap is not None:
      cap_steps = -(-int(self.episode_frame_cap) // self.frames_per_step)
    call = jobs_lib.Call(parts, late, [len(g) for g in self.groups], cap_steps,
                         result_of=lambda p: self._result(call, p))
    return call

  def _first_observations(self, call: jobs_lib.Call) -> None:
    # New games in the slots that get a job, but for those already at the
    # start of one (auto-reset when their last game ended): 64 slots' reset
    # sequences were ~1 % of a Pong generation's emulator frames.
    used = np.concatenate([slots[:len(dealt)]
                           for slots, dealt in zip(self.groups, call.first_jobs)])
    if not used.size:
      return
    dealt = [job for jobs in call.first_jobs for job in jobs]
    if call.seeds is not None:
      obs_used = self.env.reset(used, seeds=[call.seeds[job] for job in dealt]).numpy()
    else:
      obs_used = self.env.reset(used, only_played=True).numpy()
    self._check_finite(obs_used, dealt, call)
    call.obs_all = np.zeros((self.env.num_envs,) + obs_used.shape[1:], obs_used.dtype)
    call.obs_all[used] = obs_used

  def _check_finite(self, obs: np.ndarray, jobs, call: jobs_lib.Call, steps=None) -> None:
    """ValueError (one line) for the first job whose observation is not finite."""
    if not np.issubdtype(obs.dtype, np.floating):
      return
    for k, (row, job) in enumerate(zip(obs, jobs)):
      if not np.all(np.isfinite(row)):
        net, episode = job
        step = 0 if steps is None else int(steps[k])
        seed = "" if call.seeds is None else f", reset seed {call.seeds[job]}"
        name = getattr(self.env, "env_id", None) or type(self.env).__name__
        raise ValueError(f"the env {name} gave a non-finite observation (NaN or inf) to "
                         f"network {int(call.ids[net])} at step {step} of its episode "
                         f"{episode}{seed}: a policy cannot act on it.")

  def _run_group(self, call: jobs_lib.Call, g: int, slots: np.ndarray) -> None:
    clock = call.clock.groups[g]
    try:
      if not call.first_jobs[g]:
        return
      clock.begin()
      group = jobs_lib.SlotGroup(slots, call.first_jobs[g], call.obs_all[slots].copy(),
                     self._state_specs, clock)
      obs_t = None    # the running slots' observations as a tensor, while they equal obs
      state_t = None  # and their state, likewise
      while not self._stop.is_set():
        rows = np.flatnonzero(group.net >= 0)
        clock.running(rows.size)
        if rows.size == 0:
          break
        if obs_t is None:
          obs_t = tf.convert_to_tensor(group.obs[rows])
          state_t = [tf.convert_to_tensor(s[rows]) for s in group.state]
        max_steps = self.steps_per_call
        if call.cap_steps:
          max_steps = min(max_steps, int(call.cap_steps - group.length[rows].max()))
        timed = clock.timed_call()
        called = time.perf_counter()
        k, o, r, ended, bad, state_t, *env_net = (
            self._timed_play_fn if timed else self._play_fn)(
                obs_t, tf.convert_to_tensor(call.ids[group.net[rows]].astype(np.int32)),
                tf.convert_to_tensor(slots[rows]), tf.constant(max_steps, tf.int32),
                tf.convert_to_tensor(group.length[rows].astype(np.int32)), state_t)
        k = int(k)
        clock.graph_call(time.perf_counter() - called, env_net[0] if timed else None)
        obs_t = o
        group.ret[rows] += r.numpy()
        group.length[rows] += k
        call.steps[g] += k * rows.size
        ended = ended.numpy()
        if bad.numpy().any():
          self._check_finite(o.numpy(), list(zip(group.net[rows], group.epi[rows])), call,
                             group.length[rows])
        capped = ((group.length[rows] >= call.cap_steps) if call.cap_steps
                  else np.zeros_like(ended))
        finished = np.flatnonzero(ended | capped)
        if finished.size == 0:
          continue
        # The running set changes: back to numpy to rebuild it.
        group.obs[rows] = o.numpy()
        for s, s_t in zip(group.state, state_t):
          s[rows] = s_t.numpy()
        obs_t = state_t = None
        self._finish(call, group, rows[finished], ended[finished])
    except BaseException as e:  # surfaced in the caller's thread.
      call.errors.append(e)
      with call.lock:
        call.jobs.clear()
    finally:
      clock.finish()

  def _finish(self, call: jobs_lib.Call, group: jobs_lib.SlotGroup, slots_done: np.ndarray,
              ended: np.ndarray) -> None:
    """Records the episodes of `slots_done` (rows of the group) and deals their next jobs."""
    reset, reset_jobs = [], []
    auto_reset = getattr(self.env, "auto_reset", True)
    for i, env_ended in zip(slots_done, ended):
      job = (group.net[i], group.epi[i])
      call.returns[job], call.lengths[job] = group.ret[i], group.length[i]
      if self.observation_filter is not None:
        total, squares = group.state[-2], group.state[-1]
        if call.observe is not None and call.observe[job]:
          call.sums.append((*job, total[i].copy(), squares[i].copy(), int(group.length[i])))
        total[i], squares[i] = 0.0, 0.0
      group.ret[i], group.length[i] = 0.0, 0
      call.finished(job[0])
      job = call.next_job()
      group.net[i], group.epi[i] = job if job is not None else (-1, 0)
      if job is not None and (call.seeds is not None or not env_ended or not auto_reset):
        # Seeded; or capped mid-episode, or not reset by the env.
        reset.append(i)
        reset_jobs.append(job)
    if reset:
      reset = np.array(reset)
      seeds = None if call.seeds is None else [call.seeds[job] for job in reset_jobs]
      started = time.perf_counter()
      group.obs[reset] = self.env.reset(group.slots[reset], seeds=seeds).numpy()
      group.clock.resets += time.perf_counter() - started
      self._check_finite(group.obs[reset], reset_jobs, call)
