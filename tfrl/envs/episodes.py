"""The one episode loop that evaluates a policy on a batched env.

    scores, lengths, frames = play_episodes(policy, env, episodes=10)

Used by `python -m tfrl.evaluate` (any exported policy) and by TD3's
periodic evaluation. (Neuroevolution's population evaluator is a training
evaluator with its own pipelined loop: `tfrl/neuroevolution/evaluation.py`.)
"""

from typing import Callable, Optional, Sequence

import numpy as np


def _actions(out, greedy: bool, rng: np.random.RandomState) -> np.ndarray:
  if not greedy and "probs" in out:
    probs = np.asarray(out["probs"], np.float64)
    probs /= probs.sum(axis=1, keepdims=True)
    return np.array([rng.choice(len(p), p=p) for p in probs], np.int32)
  return np.asarray(out["action"])


def play_episodes(policy: Callable, env, episodes: int, *, greedy: bool = True,
                  seed: int = 0, step_cap: int = 0,
                  episode_seeds: Optional[Sequence[int]] = None, viewer=None):
  """Plays `episodes` episodes; returns (scores, lengths, recorded frames).

  Episodes are spread over the env's slots, played as one batch: slot i plays
  episodes i, i + n, i + 2n, ... (n = env.num_envs).

  Args:
    policy: `policy(obs=batch) -> dict` with `action` (and optionally
      `probs`), e.g. an exported policy's serving signature.
    env: a batched tfrl env (AtariEnv or GymEnv), auto-resetting.
    episodes: how many episodes.
    greedy: use `action` (else sample from `probs` when present).
    seed: seeds the sampling of actions.
    step_cap: end an episode after this many env steps (0: no cap here; the
      env's protocol has its own).
    episode_seeds: optional, one reset seed per episode: episode k starts
      with a reset of its slot seeded with episode_seeds[k], so its outcome
      depends on that seed alone.
    viewer: plays slot 0's first episode again and draws it
      (`tfrl.recording.Viewer`): its frames are returned, `lengths[0] + 1` of
      them (fewer if it diverged).
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  n = env.num_envs
  rng = np.random.RandomState(seed)
  quota = np.array([len(range(i, episodes, n)) for i in range(n)])
  current = np.arange(n)  # the episode each slot plays
  if episode_seeds is not None:
    episode_seeds = np.asarray(episode_seeds, np.int64).reshape(-1)
    if episode_seeds.shape != (episodes,):
      raise ValueError(f"episode_seeds must hold one seed per episode ({episodes}), "
                       f"got {episode_seeds.shape[0]}.")
  returns = np.zeros(n)
  steps = np.zeros(n, np.int64)
  scores, lengths = [], []
  obs = _first_observations(env, quota, episode_seeds)
  recording = viewer is not None
  if recording:
    viewer.start()
  while quota.sum() > 0:
    active = np.nonzero(quota > 0)[0].astype(np.int32)
    actions = _actions(policy(obs=tf.constant(obs[active])), greedy, rng)
    new_obs, reward, terminated, truncated = (
        t.numpy() for t in env.step(actions, active))
    if recording and active[0] == 0:
      recording = viewer.step(actions[0], reward[0], terminated[0], truncated[0])
    obs[active] = new_obs
    returns[active] += reward
    steps[active] += 1
    done = terminated | truncated
    if step_cap:
      done |= steps[active] >= step_cap
    for j in np.nonzero(done)[0]:
      i = active[j]
      scores.append(float(returns[i]))
      lengths.append(int(steps[i]))
      returns[i], steps[i] = 0.0, 0
      quota[i] -= 1
      current[i] += n
      if i == 0:
        recording = False
      if quota[i] and episode_seeds is not None:
        seeds = [episode_seeds[current[i]]]
        obs[i] = env.reset(np.array([i], np.int32), seeds=seeds).numpy()[0]
      elif quota[i] and not (terminated[j] or truncated[j]):  # our own cap: start anew
        obs[i] = env.reset(np.array([i], np.int32)).numpy()[0]
  return scores, lengths, viewer.frames if viewer is not None else []


def _first_observations(env, quota: np.ndarray, episode_seeds) -> np.ndarray:
  if episode_seeds is None:
    return env.reset().numpy()
  used = np.nonzero(quota > 0)[0].astype(np.int32)
  first = env.reset(used, seeds=episode_seeds[used]).numpy()
  obs = np.zeros((env.num_envs,) + first.shape[1:], first.dtype)
  obs[used] = first
  return obs
