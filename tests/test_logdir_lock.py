"""One run per logdir: `tfrl.logdir_lock`, and the entry points through the run skeleton
(a live run holding it: tests/test_signals.py; a killed one's stale lock taken over:
tests/test_kill_resume.py)."""

import json
import os
import subprocess
import sys

import pytest

from tfrl import logdir_lock

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests import processes  # pylint: disable=g-import-not-at-top
_ENV = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")

# A process that holds the lock of argv[1] until it is killed.
_HOLDER = ("import sys, time\n"
           "from tfrl import logdir_lock\n"
           "logdir_lock.acquire(sys.argv[1])\n"
           "print('held', flush=True)\n"
           "time.sleep(120)\n")

# Tiny runs of the entry points, one per user of the run skeleton (tfrl.run_loop holds
# the lock; ES and random search go through the GA's). They end at the lock.
_RUNS = {
    "tfrl.ga": ["--env=CartPole-v1", "--population=4", "--generations=1", "--num_envs=4",
                "--hidden=4", "--noise_table_size=10000", "--elite_candidates=1",
                "--elite_episodes=1", "--truncation=2", "--noexport"],
    "tfrl.ga3c": ["--env=CartPole-v1", "--agents=1", "--max_agents=1", "--max_frames=100",
                  "--hidden_sizes=8"],
    "tfrl.td3": ["--env=Pendulum-v1", "--total_steps=20", "--start_steps=10",
                 "--hidden_sizes=8", "--batch_size=4", "--eval_every=0", "--eval_episodes=1",
                 "--update_every=10", "--log_every=10", "--checkpoint_every=20",
                 "--noexport"],
}


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def _run(module, logdir, *extra, timeout=180):
  return subprocess.run([sys.executable, "-m", module, *_RUNS[module], f"--logdir={logdir}",
                         *extra], env=_ENV, cwd=_ROOT, capture_output=True, text=True,
                        timeout=timeout)


def _one_error_line(out, module):
  assert out.returncode == 2, out.stderr[-3000:]
  assert "Traceback" not in out.stderr, out.stderr[-3000:]
  lines = [l for l in out.stderr.splitlines() if l.startswith(f"{module}: error: ")]
  assert len(lines) == 1, out.stderr[-3000:]
  assert out.stderr.strip().splitlines()[-1] == lines[0]
  return lines[0]


class TestLock:

  def test_second_holder_is_refused_until_release(self, tmp_path):
    logdir = str(tmp_path / "run")
    lock = logdir_lock.acquire(logdir)
    path = os.path.join(logdir, logdir_lock.LOCK_FILE)
    with open(path) as f:
      owner = json.load(f)
    assert owner["pid"] == os.getpid()
    # flock(2) locks conflict between open files, even in one process.
    with pytest.raises(logdir_lock.LogdirInUse, match=f"in use by another run \\(pid "
                                                     f"{os.getpid()} "):
      logdir_lock.acquire(logdir)
    lock.release()
    assert not os.path.exists(path)
    warnings = []
    with logdir_lock.hold(logdir, warn=warnings.append) as again:
      assert again.held
    assert warnings == []  # a released lock leaves nothing stale
    assert not os.path.exists(path)

  def test_stale_lock_of_a_dead_process_is_taken_over(self, tmp_path):
    logdir = tmp_path / "run"
    logdir.mkdir()
    pid = _dead_pid()
    (logdir / logdir_lock.LOCK_FILE).write_text(json.dumps({"pid": pid, "command": "old"}))
    warnings = []
    with logdir_lock.hold(str(logdir), warn=warnings.append):
      with open(logdir / logdir_lock.LOCK_FILE) as f:
        assert json.load(f)["pid"] == os.getpid()
    assert len(warnings) == 1
    assert f"took over the lock of pid {pid} `old`" in warnings[0]

  def test_lock_held_by_a_killed_process_is_taken_over(self, tmp_path):
    logdir = str(tmp_path / "run")
    with processes.cli(["-c", _HOLDER, logdir], _ENV, stderr=None) as holder:
      assert processes.read_line(holder, timeout=120).strip() == "held"
      with pytest.raises(logdir_lock.LogdirInUse, match=f"pid {holder.pid}"):
        logdir_lock.acquire(logdir)
    # Leaving the block killed the holder.
    warnings = []
    with logdir_lock.hold(logdir, warn=warnings.append):
      pass
    assert len(warnings) == 1 and f"pid {holder.pid}" in warnings[0], warnings

  def test_bad_logdirs_are_value_errors(self, tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match="is a file, not a directory"):
      logdir_lock.acquire(str(afile))
    with pytest.raises(ValueError, match="cannot be created"):
      logdir_lock.acquire(str(afile / "run"))
    if os.geteuid() != 0:  # root writes anywhere: see test_cli_bad_logdirs.py
      readonly = tmp_path / "readonly"
      readonly.mkdir(mode=0o555)
      with pytest.raises(ValueError, match="not writable"):
        logdir_lock.acquire(str(readonly))


class TestEntryPoints:

  @pytest.mark.parametrize("module", sorted(_RUNS))
  def test_a_held_logdir_is_one_line(self, tmp_path, module):
    logdir = str(tmp_path / "run")
    with processes.cli(["-c", _HOLDER, logdir], _ENV, stderr=None) as holder:
      assert processes.read_line(holder, timeout=120).strip() == "held"
      line = _one_error_line(_run(module, logdir), module)
    assert f"--logdir={logdir} is in use by another run (pid {holder.pid} " in line
    assert os.listdir(logdir) == [logdir_lock.LOCK_FILE]  # nothing else written
