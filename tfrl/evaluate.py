"""Plays a SavedModel policy (tfrl.export format) and reports its scores.

  python -m tfrl.evaluate --policy=/tmp/tfrl_ga3c/saved_model \
      --game=PongNoFrameskip-v4 --episodes=10 [--record=pong.gif]
  python -m tfrl.evaluate --policy=DIR --env=CartPole-v1 --episodes=20

Atari games run on `tfrl.envs.AtariEnv` with the protocol set by flags
(no-op starts, sticky actions, frame cap, greedy or sampled actions); any
gymnasium env runs on `tfrl.envs.GymEnv`. Episodes are spread over
`--num_envs` slots played as one batch; slot i plays episodes i, i+n, ...
Prints mean / std / min / max and writes a JSON report.
"""

import os
import re
import time

from absl import flags
from absl import logging
import numpy as np

from tfrl import atomic_files
from tfrl import cli

_POLICY = flags.DEFINE_string(
    "policy", None, "SavedModel policy directory (e.g. <logdir>/saved_model).")
_GAME = flags.DEFINE_string(
    "game", None, "Atari game (e.g. PongNoFrameskip-v4), played on AtariEnv.")
_ENV = flags.DEFINE_string(
    "env", None, "A gymnasium env id (e.g. CartPole-v1), played on GymEnv.")
_EPISODES = flags.DEFINE_integer("episodes", 10, "Episodes to play.")
_NUM_ENVS = flags.DEFINE_integer(
    "num_envs", 0, "Slots played as one batch; 0 = min(episodes, 8).")
_GREEDY = flags.DEFINE_bool(
    "greedy", True,
    "Take the policy's `action` (greedy); --nogreedy samples from `probs`.")
_NOOP_MAX = flags.DEFINE_integer(
    "noop_max", 30, "Atari: up to this many no-op frames at episode start.")
_STICKY = flags.DEFINE_float(
    "repeat_action_probability", None,
    "Atari: sticky-action probability; default: the game id's (v4: 0, "
    "v5: 0.25).")
_FRAME_SKIP = flags.DEFINE_integer("frame_skip", 4, "Atari: frames per step.")
_MAX_EPISODE_FRAMES = flags.DEFINE_integer(
    "max_episode_frames", 108000,
    "Frame cap per episode (Atari emulator frames; gymnasium env steps); an "
    "episode hitting it ends truncated. 0 disables (Atari) / uses the env's "
    "own limit (gymnasium).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the env slots and sampling.")
_OUTPUT = flags.DEFINE_string(
    "output", None,
    "JSON report path; default: eval_<game or env>.json next to --policy.")
_RECORD = flags.DEFINE_string(
    "record", None, "Save the first episode of slot 0 as this GIF.")
_RECORD_FPS = flags.DEFINE_integer("record_fps", 30, "Frames/s of the GIF.")


def _fail(message: str):
  """Bad input: one readable line on stderr, exit status 2 (as every tfrl CLI)."""
  cli.fail("tfrl.evaluate", message)


def load_policy(path: str):
  """Loads a tfrl SavedModel policy; returns (serving fn, obs TensorSpec)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if not path:
    _fail("--policy is required (a SavedModel directory).")
  if not os.path.isfile(os.path.join(path, "saved_model.pb")):
    _fail(f"--policy={path} is not a SavedModel directory (no saved_model.pb).")
  try:
    loaded = tf.saved_model.load(path)
  except Exception as e:  # pylint: disable=broad-except
    # Truncated or half-copied SavedModels fail in many ways (protobuf
    # DecodeError, TF DataLoss / NotFound / InvalidArgument, ValueError):
    # each is this bad --policy, not a bug of the evaluator.
    from tfrl import resume  # pylint: disable=import-outside-toplevel
    _fail(f"--policy={path} cannot be loaded ({type(e).__name__}: "
          f"{resume.first_line(e)[:300]}); is it complete?")
  if "serving_default" not in loaded.signatures:
    _fail(f"--policy={path} has no serving_default signature.")
  serve = loaded.signatures["serving_default"]
  spec = next(iter(serve.structured_input_signature[1].values()))
  return loaded, serve, spec


def make_env(game, env_id, num_envs, seed, render=False):
  """AtariEnv for a game (with the protocol flags) or GymEnv for an env id."""
  if game:
    # Imported here: it needs the compiled ALE ops, whose ImportError (how to
    # build them) cli.run reports in one line.
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    try:
      return AtariEnv(game, num_envs, frame_skip=_FRAME_SKIP.value,
                      noop_max=_NOOP_MAX.value,
                      repeat_action_probability=_STICKY.value,
                      max_episode_frames=_MAX_EPISODE_FRAMES.value, seed=seed)
    except (ValueError, RuntimeError) as e:
      _fail(f"unknown or unusable --game={game}: {str(e).splitlines()[0]}")
    except Exception as e:  # pylint: disable=broad-except
      # The op reports a missing ROM as a TF error.
      message = getattr(e, "message", str(e)).splitlines()[0]
      message = re.sub(r"^\{\{[^}]*\}\}\s*", "", message)
      message = message.split("; available")[0]
      _fail(f"unknown or unusable --game={game}: {message[:300]}")
  from tfrl.envs import GymEnv  # pylint: disable=import-outside-toplevel
  kwargs = {"render_mode": "rgb_array"} if render else {}
  try:
    return GymEnv(env_id, num_envs, seed=seed, **kwargs)
  except ValueError as e:
    _fail(f"unknown or unusable --env={env_id}: {str(e).splitlines()[0]}")


def _render_frame(env, obs_row):
  """An RGB uint8 frame of slot 0 for the GIF."""
  if getattr(env, "render_mode", None) == "rgb_array":  # a GymEnv made to render
    try:
      frame = env.render(0)
    except Exception:  # pylint: disable=broad-except
      frame = None  # e.g. pygame missing: draw the observation instead.
    if frame is not None:
      return np.asarray(frame, np.uint8)
  obs = np.asarray(obs_row)
  if obs.ndim == 1:
    return _bars(obs)
  if obs.ndim == 3:
    frame = obs[..., -1] if obs.shape[-1] not in (3,) else obs
    if frame.ndim == 2:
      frame = np.repeat(frame[..., None], 3, axis=-1)
    return np.kron(frame, np.ones((2, 2, 1), np.uint8))  # 2x upscale.
  return None


def _bars(vector, height=96, bar=24):
  """A bar chart of an observation vector (for envs without a renderer)."""
  x = np.tanh(np.asarray(vector, np.float64))
  frame = np.full((height, bar * len(x), 3), 255, np.uint8)
  mid = height // 2
  for i, v in enumerate(x):
    top, bottom = sorted((mid, int(mid - v * (mid - 2))))
    frame[top:bottom + 1, i * bar + 2:(i + 1) * bar - 2] = (40, 90, 200)
  frame[mid, :] = 0
  return frame


def save_gif(frames, path, fps):
  from PIL import Image  # pylint: disable=import-outside-toplevel
  images = [Image.fromarray(f) for f in frames if f is not None]
  if not images:
    raise ValueError("no frames to record")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  images[0].save(path, save_all=True, append_images=images[1:],
                 duration=max(1, int(1000 / fps)), loop=0)


def evaluate(serve, env, episodes, *, greedy=True, seed=0, step_cap=0,
             record=False):
  """Plays `episodes` episodes; returns (scores, lengths, frames for a GIF).

  Args:
    serve: the policy's serving function, `serve(obs=batch) -> dict`.
    env: a batched tfrl env (AtariEnv or GymEnv).
    episodes: how many episodes.
    greedy: use `action` (else sample from `probs` when present).
    step_cap: end an episode after this many env steps (0: no cap here).
    record: collect slot 0's frames during its first episode.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  n = env.num_envs
  rng = np.random.RandomState(seed)
  quota = np.array([len(range(i, episodes, n)) for i in range(n)])
  returns = np.zeros(n)
  steps = np.zeros(n, np.int64)
  scores, lengths, frames = [], [], []
  obs = env.reset().numpy()
  recording = record
  while quota.sum() > 0:
    active = np.nonzero(quota > 0)[0].astype(np.int32)
    out = serve(obs=tf.constant(obs[active]))
    if not greedy and "probs" in out:
      probs = out["probs"].numpy().astype(np.float64)
      probs /= probs.sum(axis=1, keepdims=True)
      actions = np.array([rng.choice(len(p), p=p) for p in probs], np.int32)
    else:
      actions = out["action"].numpy()
    if recording and quota[0] > 0 and active[0] == 0:
      frames.append(_render_frame(env, obs[0]))
    new_obs, reward, terminated, truncated = (
        t.numpy() for t in env.step(actions, active))
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
      if i == 0:
        recording = False
      if not (terminated[j] or truncated[j]):  # Our own cap: start anew.
        obs[i] = env.reset(np.array([i], np.int32)).numpy()[0]
  return scores, lengths, frames


def main(argv):
  if len(argv) > 1:
    _fail(f"unexpected arguments: {' '.join(argv[1:])}")
  if bool(_GAME.value) == bool(_ENV.value):
    _fail("Give exactly one of --game (Atari) or --env (gymnasium id).")
  if _EPISODES.value < 1:
    _fail(f"--episodes must be >= 1, got {_EPISODES.value}.")
  _, serve, spec = load_policy(_POLICY.value)
  num_envs = _NUM_ENVS.value or min(_EPISODES.value, 8)
  env = make_env(_GAME.value, _ENV.value, num_envs, _SEED.value,
                 render=bool(_RECORD.value))
  expected = tuple(spec.shape[1:])
  if tuple(env.observation_shape) != expected:
    _fail(f"the policy takes observations of shape {expected}, the env gives "
          f"{tuple(env.observation_shape)}.")
  step_cap = 0 if _GAME.value else _MAX_EPISODE_FRAMES.value
  start = time.time()
  scores, lengths, frames = evaluate(
      serve, env, _EPISODES.value, greedy=_GREEDY.value, seed=_SEED.value,
      step_cap=step_cap, record=bool(_RECORD.value))
  seconds = time.time() - start
  name = _GAME.value or _ENV.value
  report = {
      "policy": os.path.abspath(_POLICY.value),
      "env": name,
      "episodes": len(scores),
      "mean": float(np.mean(scores)), "std": float(np.std(scores)),
      "min": float(np.min(scores)), "max": float(np.max(scores)),
      "scores": scores, "lengths": lengths,
      "protocol": {
          "greedy": _GREEDY.value,
          "noop_max": _NOOP_MAX.value if _GAME.value else None,
          "repeat_action_probability": _STICKY.value,
          "frame_skip": _FRAME_SKIP.value if _GAME.value else None,
          "max_episode_frames": _MAX_EPISODE_FRAMES.value,
          "seed": _SEED.value, "num_envs": num_envs},
      "seconds": seconds,
  }
  output = _OUTPUT.value or os.path.join(
      os.path.dirname(os.path.abspath(_POLICY.value)),
      "eval_" + name.replace("/", "_") + ".json")
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  atomic_files.write_json(output, report, indent=1)
  if _RECORD.value:
    save_gif(frames, _RECORD.value, _RECORD_FPS.value)
  print(f"{name}: {len(scores)} episodes  mean {report['mean']:.2f}  "
        f"std {report['std']:.2f}  min {report['min']:.2f}  "
        f"max {report['max']:.2f}  ({seconds:.1f} s)")
  print(f"report: {output}" + (f"  gif: {_RECORD.value}" if _RECORD.value
                                else ""))
  logging.info("Evaluation report written to %s", output)


def run():
  cli.run(main, "tfrl.evaluate")


if __name__ == "__main__":
  run()
