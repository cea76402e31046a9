"""Ctrl-C and SIGTERM, the same for every algorithm (the run skeleton, `tfrl.run_loop`).

For GA3C, the GA and TD3, three runs in one logdir:

  1. stopped by one signal: exit 0 with a final checkpoint (of the moment it
     stopped), the policy, the summary and "stopped by a signal; the
     checkpoint in DIR holds <where it stopped>";
  2. resumed, and stopped by a second signal during its final save: that save
     is abandoned in one line, exit 1, and no half-written policy takes the
     place of a complete one;
  3. resumed again, to a budget just past its checkpoint: it takes the
     checkpoint the abandoned save left (whole), goes on from its counters and
     ends on its own.

ES and random search stop through the same runner as the GA.
"""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable, Dict, Sequence

from absl.testing import parameterized
import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)
from tests import processes  # pylint: disable=g-import-not-at-top
from tfrl import logdir_lock  # pylint: disable=g-import-not-at-top
from tfrl.neuroevolution import checkpoint  # pylint: disable=g-import-not-at-top

_FINAL_SAVE = "Writing the final checkpoint"


def _tf_counters(logdir: str) -> Dict[str, int]:
  """The counters of the latest TF checkpoint in `logdir`, and its number ("number")."""
  path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
  reader = tf.train.load_checkpoint(path)
  names = reader.get_variable_to_shape_map()
  counters = {k: int(reader.get_tensor(n)) for k in ("env_steps", "episodes", "train_steps")
              for n in (f"counters/{k}/.ATTRIBUTES/VARIABLE_VALUE", f"{k}/.ATTRIBUTES/"
                        "VARIABLE_VALUE") if n in names}
  counters["number"] = int(path.rsplit("-", 1)[1])
  return counters


@dataclasses.dataclass(frozen=True)
class _Algorithm:
  module: str
  args: Sequence[str]
  progress: str                      # a line printed once work is under way
  progressing: str                   # regex: any progress line
  resumed: str                       # what a resume prints once it has restored
  signals: tuple                     # (first run's, second run's two)
  budget: Callable[[str], Sequence[str]]  # flags that end run 3 just past the checkpoint
  policies: Sequence[str]


_ALGORITHMS = {
    "ga3c": _Algorithm(
        "tfrl.ga3c", ("--env=CartPole-v1", "--agents=2", "--max_agents=2", "--stats_every=1",
                      "--checkpoint_every=1", "--loss_reduction=mean",
                      "--rmsprop_epsilon=1e-5", "--learning_rate=1e-3"),
        progress="FPS", progressing=r"\] frames \d+ \| episodes", resumed="Resumed from",
        signals=(signal.SIGTERM, (signal.SIGINT, signal.SIGTERM)),
        budget=lambda d: [f"--max_frames={_tf_counters(d)['env_steps'] + 1000}"],
        policies=("saved_model",)),
    "ga": _Algorithm(
        "tfrl.ga", ("--flagfile=flags/ga_cartpole.flags", "--target_score=100000"),
        progress="[ga] gen    2", progressing=r"^\[ga\] gen +\d+", resumed="resumed from",
        signals=(signal.SIGINT, (signal.SIGINT, signal.SIGINT)),
        budget=lambda d: [f"--generations={checkpoint.load(d)[0]['generation'] + 1}"],
        policies=("elite",)),
    "td3": _Algorithm(
        "tfrl.td3", ("--env=Pendulum-v1", "--start_steps=100", "--hidden_sizes=16,16",
                     "--batch_size=16", "--eval_every=0", "--eval_episodes=1",
                     "--update_every=50", "--log_every=100", "--checkpoint_every=100"),
        progress="step 200:", progressing=r"\] step \d+: return", resumed="Resumed from",
        signals=(signal.SIGINT, (signal.SIGTERM, signal.SIGINT)),
        budget=lambda d: [f"--total_steps={_tf_counters(d)['number'] + 100}"],
        policies=("policy", "policy_compressed")),
}
_LONG = {"tfrl.ga3c": [], "tfrl.ga": ["--generations=100000"],
         "tfrl.td3": ["--total_steps=1000000"]}


class SignalsTest(parameterized.TestCase, tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _command(self, algorithm, logdir, *extra):
    return ["-u", "-m", algorithm.module, *algorithm.args, f"--logdir={logdir}", *extra]

  def _policies_whole(self, algorithm, logdir):
    # No half-written policy took the place of a complete one (a temporary
    # `.tmp` one may stay; the next export replaces it).
    for name in algorithm.policies:
      if os.path.isdir(os.path.join(logdir, name)):
        self.assertTrue(os.path.exists(os.path.join(logdir, name, "saved_model.pb")), name)

  @parameterized.parameters(*sorted(_ALGORITHMS))
  def test_stop_then_abandon_then_resume(self, name):
    algorithm = _ALGORITHMS[name]
    logdir = os.path.join(self.get_temp_dir(), name)
    stopped = self._first_signal_stops_with_a_final_save(name, algorithm, logdir)
    self._second_signal_abandons_the_final_save(name, algorithm, logdir)
    self._resume_goes_on(name, algorithm, logdir, stopped)

  def _first_signal_stops_with_a_final_save(self, name, algorithm, logdir):
    first = algorithm.signals[0]
    with processes.cli(self._command(algorithm, logdir, *_LONG[algorithm.module])) as proc:
      processes.wait_for_line(proc, algorithm.progress, timeout=300)
      if name == "ga3c":  # a periodic checkpoint with episodes in it
        deadline = time.time() + 90
        while time.time() < deadline and not (
            tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints")) and
            _tf_counters(logdir)["episodes"] > 0):
          time.sleep(0.2)
        self.assertGreater(_tf_counters(logdir)["episodes"], 0)
        self.assertTrue(os.path.isfile(os.path.join(logdir, "flags.txt")))
      start = time.time()
      out = processes.stop(proc, first, timeout=120)
      stop_seconds = time.time() - start
    self.assertEqual(proc.returncode, 0, out[-3000:])
    self.assertNotIn("Traceback", out)
    self.assertRegex(out, r"(\[ga\] s|S)topped by a signal; the checkpoint in ")
    for policy in algorithm.policies:
      self.assertTrue(os.path.exists(os.path.join(logdir, policy, "saved_model.pb")), policy)
    if name == "ga3c":
      self.assertLess(stop_seconds, 20)
      with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
      self.assertEqual(summary["frames"], _tf_counters(logdir)["env_steps"])
      self.assertIn(f"holds frame {summary['frames']}, episode {summary['episodes']};", out)
      return summary
    if name == "ga":
      state, _ = checkpoint.load(logdir)
      self.assertGreaterEqual(state["generation"], 2)
      self.assertIn(f"holds generation {state['generation']}", out)
      return state
    summary = json.loads(out.strip().splitlines()[-1])
    self.assertFalse(summary["completed"])
    self.assertBetween(summary["env_steps"], 200, 999_999)
    # The final save wrote the checkpoint of the step it stopped at.
    self.assertEqual(_tf_counters(logdir)["number"], summary["env_steps"])
    self.assertIn(f"holds step {summary['env_steps']};", out)
    return summary

  def _second_signal_abandons_the_final_save(self, name, algorithm, logdir):
    first, second = algorithm.signals[1]
    with processes.cli(self._command(algorithm, logdir, *_LONG[algorithm.module],
                                     "--resume")) as proc:
      processes.wait_for_line(proc, algorithm.resumed, timeout=300)
      processes.wait_for_line(proc, re.compile(algorithm.progressing), timeout=300)
      if name == "ga":  # a second run on a logdir in use: one line, naming the first
        other = subprocess.run([sys.executable, *self._command(algorithm, logdir, "--resume")],
                               cwd=_REPO, env=processes.cli_env(), capture_output=True,
                               text=True, timeout=300)
        self.assertEqual(other.returncode, 2, other.stderr[-3000:])
        self.assertIn(f"tfrl.ga: error: --logdir={logdir} is in use by another run (pid "
                      f"{proc.pid} ", other.stderr.strip().splitlines()[-1])
      proc.send_signal(first)
      processes.wait_for_line(proc, _FINAL_SAVE, timeout=120)
      out = processes.stop(proc, second, timeout=120)
    self.assertEqual(proc.returncode, 1, out[-3000:])
    self.assertNotIn("Traceback", out)
    self.assertEqual(
        out.strip().splitlines()[-1],
        f"{algorithm.module}: error: {second.name} during the final save: abandoned it; the "
        f"latest complete checkpoint in {logdir} is the one before")
    self._policies_whole(algorithm, logdir)

  def _resume_goes_on(self, name, algorithm, logdir, stopped):
    budget = algorithm.budget(logdir)
    before = _tf_counters(logdir) if name != "ga" else checkpoint.load(logdir)[0]
    out = subprocess.run([sys.executable, *self._command(algorithm, logdir, *budget,
                                                         "--resume")],
                         cwd=_REPO, env=processes.cli_env(), capture_output=True, text=True,
                         timeout=600)
    output = out.stdout + out.stderr
    self.assertIn(algorithm.resumed, output, output[-3000:])
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    self.assertFalse(os.path.exists(os.path.join(logdir, logdir_lock.LOCK_FILE)))
    if name == "ga3c":  # counting went on from the restored counters
      after = _tf_counters(logdir)
      self.assertGreaterEqual(before["env_steps"], stopped["frames"])
      self.assertGreater(after["env_steps"], before["env_steps"])
      self.assertGreaterEqual(after["episodes"], before["episodes"])
      self.assertGreater(after["train_steps"], before["train_steps"])
    elif name == "ga":
      self.assertEqual(checkpoint.load(logdir)[0]["generation"], before["generation"] + 1)
    else:
      summary = json.loads(out.stdout.strip().splitlines()[-1])
      self.assertTrue(summary["completed"])
      self.assertEqual(summary["env_steps"], before["number"] + 100)


if __name__ == "__main__":
  tf.test.main()
