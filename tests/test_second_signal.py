"""A second Ctrl-C / SIGTERM during the final save: one line, exit 1, the
previous checkpoint intact and resumable, no half-written policy in place."""

import os
import signal
import subprocess
import sys

from absl.testing import parameterized
import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)
from tests import processes  # pylint: disable=g-import-not-at-top

# Runs that would go on for hours; `progress` is a line printed once work is under way.
_RUNS = {
    "tfrl.ga3c": (["--env=CartPole-v1", "--agents=2", "--max_agents=2", "--stats_every=1",
                   "--checkpoint_every=1"], "FPS"),
    "tfrl.ga": (["--flagfile=flags/ga_cartpole.flags", "--generations=100000",
                 "--target_score=100000"], "[ga] gen    2"),
    "tfrl.td3": (["--env=Pendulum-v1", "--total_steps=1000000", "--start_steps=100",
                  "--hidden_sizes=16,16", "--batch_size=16", "--eval_every=0",
                  "--update_every=50", "--log_every=100", "--checkpoint_every=100"],
                 "step 200:"),
}
# What a resume of each prints once it has restored the checkpoint.
_RESUMED = {"tfrl.ga3c": "Resumed from", "tfrl.ga": "resumed from", "tfrl.td3": "Resumed from"}
# A budget the resumed run has already spent, so that it ends at once.
_SPENT = {"tfrl.ga3c": "--max_frames=1", "tfrl.ga": "--generations=1",
          "tfrl.td3": "--total_steps=1"}
_FINAL_SAVE = "Writing the final checkpoint"


class SecondSignalTest(parameterized.TestCase, tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.parameters(
      ("tfrl.ga3c", signal.SIGINT, signal.SIGTERM),
      ("tfrl.ga", signal.SIGINT, signal.SIGINT),
      ("tfrl.td3", signal.SIGTERM, signal.SIGINT),
  )
  def test_second_signal_abandons_the_final_save(self, module, first, second):
    logdir = os.path.join(self.get_temp_dir(), module)
    args, progress = _RUNS[module]
    with processes.cli(["-u", "-m", module, *args, f"--logdir={logdir}"]) as proc:
      processes.wait_for_line(proc, progress, timeout=300)
      proc.send_signal(first)
      processes.wait_for_line(proc, _FINAL_SAVE, timeout=120)
      out = processes.stop(proc, second, timeout=120)
    self.assertEqual(proc.returncode, 1, out[-3000:])
    self.assertNotIn("Traceback", out)
    last = out.strip().splitlines()[-1]
    self.assertEqual(
        last, f"{module}: error: {second.name} during the final save: abandoned it; the "
        f"latest complete checkpoint in {logdir} is the one before")
    # No half-written policy took the place of a complete one (a temporary
    # `.tmp` one may stay; the next export replaces it).
    for name in ("saved_model", "elite", "policy", "policy_compressed"):
      if os.path.isdir(os.path.join(logdir, name)):
        self.assertTrue(os.path.exists(os.path.join(logdir, name, "saved_model.pb")), name)

    # The checkpoint the run had written before is whole: a resume takes it.
    resume = subprocess.run(
        [sys.executable, "-m", module, *args, _SPENT[module], f"--logdir={logdir}", "--resume"],
        cwd=_REPO, env=processes.cli_env(), capture_output=True, text=True, timeout=600)
    self.assertIn(_RESUMED[module], resume.stdout + resume.stderr,
                  (resume.stdout + resume.stderr)[-3000:])
    self.assertEqual(resume.returncode, 0, resume.stderr[-3000:])


if __name__ == "__main__":
  tf.test.main()
