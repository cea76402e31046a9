"""benchmarks/ga3c_policy_gymnasium.py: a GA3C policy, exported by a short run
of the main command's preset, played in gymnasium's own Pong without tfrl.

No score threshold (the run is far too short to learn): what must hold is that
the script plays every episode of every setting to its end in gymnasium's env,
records what it played, and loads no tfrl module to do it.
"""

import json
import os
import subprocess
import sys

import pytest

from tests import processes

_SCRIPT = os.path.join(processes.ROOT, "benchmarks", "ga3c_policy_gymnasium.py")


def _run(args, timeout):
  return subprocess.run([sys.executable, *args], cwd=processes.ROOT, env=processes.cli_env(),
                        capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
  logdir = tmp_path_factory.mktemp("ga3c_pong")
  out = _run(["-m", "tfrl.ga3c", "--preset=ga3c_pong", "--max_frames=8192",
              f"--logdir={logdir}"], timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return os.path.join(logdir, "saved_model")


def test_plays_every_episode_in_gymnasium_without_tfrl(policy, tmp_path):
  output = tmp_path / "scores.json"
  out = _run([_SCRIPT, f"--policy={policy}", "--episodes=1", "--sticky=0,0.25",
              f"--output={output}"], timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  record = json.loads(output.read_text())
  assert record["tfrl_modules_loaded"] == []
  assert record["game"] == "PongNoFrameskip-v4"
  assert [s["repeat_action_probability"] for s in record["settings"]] == [0.0, 0.25]
  for setting in record["settings"]:
    # One game per setting (an untrained policy's Pong game is thousands of steps).
    assert setting["episodes"] == 1 and len(setting["scores"]) == 1
    for score, steps in zip(setting["scores"], setting["steps"]):
      # A Pong game ends when one side has 21 points: never a draw.
      assert -21 <= score <= 21 and score != 0, setting
      assert steps > 0
    assert setting["mean"] == pytest.approx(setting["scores"][0])
  assert "repeat_action_probability" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--sticky=0,1.5"], "--sticky takes probabilities in [0, 1]"),
    (["--sticky=often"], "--sticky takes probabilities in [0, 1]"),
])
def test_bad_settings_are_one_line_errors(tmp_path, args, message):
  # Checked before the policy is read: no run needed.
  out = _run([_SCRIPT, f"--policy={tmp_path}", *args], timeout=120)
  assert out.returncode != 0
  assert message in out.stderr


def test_a_folder_without_a_policy_is_refused(tmp_path):
  out = _run([_SCRIPT, f"--policy={tmp_path}"], timeout=120)
  assert out.returncode != 0
  assert "holds no saved_model.pb" in out.stderr
