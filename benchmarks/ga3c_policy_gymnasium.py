"""An exported Atari policy played outside tfrl: stock TensorFlow and gymnasium.

    python benchmarks/ga3c_policy_gymnasium.py --policy=/tmp/tfrl_ga3c_pong/saved_model \\
        --episodes=30 --output=benchmarks/results/ga3c_policy_gymnasium_zen5.json

The SavedModel is loaded with `tf.saved_model.load` and fed the observations
of `gymnasium.make(<id>)` wrapped in gymnasium's own DQN preprocessing
(`AtariPreprocessing`: up to 30 no-op starts, frame skip 4 with the max of the
last two frames, 84 x 84 grey, no life loss ending an episode) and
`FrameStackObservation` (the last 4 frames), channels last, as uint8; it acts
greedily (its `action` output). Nothing of tfrl is imported to play: the JSON
lists the tfrl modules this process loaded (none).

Each `--sticky` probability is one setting: `repeat_action_probability`
passed to gymnasium.make (the v4 ids' own is 0; 0.25 is ALE v5's). Episode i
of a setting resets with seed `--seed + i`. Prints a table of the settings'
mean scores side by side and writes their per-episode scores as JSON.
"""

import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags
import ale_py
import gymnasium
import numpy as np
import tensorflow as tf

import provenance

_POLICY = flags.DEFINE_string("policy", None, "The exported SavedModel folder.", required=True)
_GAME = flags.DEFINE_string("game", "PongNoFrameskip-v4",
                            "A gymnasium NoFrameskip-v4 id (frame skip is the preprocessing's).")
_EPISODES = flags.DEFINE_integer("episodes", 30, "Episodes per setting.", lower_bound=1)
_STICKY = flags.DEFINE_list("sticky", ["0", "0.25"],
                            "repeat_action_probability of each setting, played in turn.")
_SEED = flags.DEFINE_integer("seed", 0, "Episode i resets with seed + i.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON of the settings' scores.")

FRAME_SKIP, SCREEN, STACK, NOOP_MAX = 4, 84, 4, 30


def make_env(game: str, sticky: float) -> gymnasium.Env:
  """gymnasium's id with gymnasium's own DQN preprocessing and frame stack."""
  gymnasium.register_envs(ale_py)
  env = gymnasium.make(game, repeat_action_probability=sticky)
  env = gymnasium.wrappers.AtariPreprocessing(
      env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP, screen_size=SCREEN,
      terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
  return gymnasium.wrappers.FrameStackObservation(env, STACK)


def play(act, env: gymnasium.Env, seed: int) -> tuple:
  """One greedy episode; (score, agent steps)."""
  obs, _ = env.reset(seed=seed)
  score, steps, done = 0.0, 0, False
  while not done:
    batch = np.transpose(np.asarray(obs, np.uint8), (1, 2, 0))[None]  # [1, 84, 84, 4]
    action = int(act(tf.constant(batch))[0])
    obs, reward, terminated, truncated, _ = env.step(action)
    score += float(reward)
    steps += 1
    done = terminated or truncated
  return score, steps


class GreedyPolicy(tf.Module):
  """The SavedModel's `action` output, traced once for one [1, 84, 84, 4] frame stack."""

  def __init__(self, folder: str):
    super().__init__()
    self.loaded = tf.saved_model.load(folder)  # kept: its variables live here
    self._serve = self.loaded.signatures["serving_default"]

  @tf.function(input_signature=[tf.TensorSpec([1, SCREEN, SCREEN, STACK], tf.uint8)])
  def __call__(self, obs):
    return self._serve(obs=obs)["action"]


def tfrl_modules() -> list:
  return sorted(m for m in sys.modules if m == "tfrl" or m.startswith("tfrl."))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  try:
    stickies = [float(s) for s in _STICKY.value]
  except ValueError:
    raise app.UsageError(f"--sticky takes probabilities in [0, 1], got {_STICKY.value}")
  if not stickies or not all(0.0 <= p <= 1.0 for p in stickies):
    raise app.UsageError(f"--sticky takes probabilities in [0, 1], got {_STICKY.value}")
  if not os.path.isfile(os.path.join(_POLICY.value, "saved_model.pb")):
    raise app.UsageError(f"--policy={_POLICY.value} holds no saved_model.pb")
  act = GreedyPolicy(_POLICY.value)
  settings = []
  for sticky in stickies:
    env = make_env(_GAME.value, sticky)
    started = time.time()
    scores, lengths = [], []
    for episode in range(_EPISODES.value):
      score, steps = play(act, env, _SEED.value + episode)
      scores.append(score)
      lengths.append(steps)
    env.close()
    settings.append({
        "repeat_action_probability": sticky, "episodes": len(scores),
        "mean": statistics.fmean(scores),
        "std": statistics.pstdev(scores), "scores": scores, "steps": lengths,
        "seconds": round(time.time() - started, 1)})
  print(f"\n{_GAME.value}, greedy, {_EPISODES.value} episodes per setting "
        f"(gymnasium {gymnasium.__version__}, ale-py {ale_py.__version__}):")
  print(f"{'repeat_action_probability':>26s} {'mean':>7s} {'std':>6s} {'min':>6s} {'max':>6s}")
  for s in settings:
    print(f"{s['repeat_action_probability']:26g} {s['mean']:7.2f} {s['std']:6.2f} "
          f"{min(s['scores']):6.0f} {max(s['scores']):6.0f}")
  record = {"provenance": provenance.provenance(), "policy": os.path.abspath(_POLICY.value),
            "game": _GAME.value, "seed": _SEED.value,
            "preprocessing": {"wrappers": "AtariPreprocessing + FrameStackObservation",
                              "noop_max": NOOP_MAX, "frame_skip": FRAME_SKIP,
                              "screen_size": SCREEN, "stack": STACK,
                              "terminal_on_life_loss": False, "actions": "greedy"},
            "gymnasium": gymnasium.__version__, "ale_py": ale_py.__version__,
            "tfrl_modules_loaded": tfrl_modules(), "settings": settings}
  if _OUTPUT.value:
    with open(_OUTPUT.value, "w") as f:
      json.dump(record, f, indent=1)
    print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
