"""The run skeleton on a fake algorithm and store: cadence, signals, errors, summary.

Each rule of `tfrl.run_loop` is checked here, once for every algorithm, alone,
in-process and in milliseconds. That each entry point runs through it (its
`build(config)`, then `run_loop.run`) is checked once per algorithm in test_cli.py;
the entry points run through it end to end in test_signals.py,
test_kill_resume.py and test_logdir_lock.py.
"""

import json
import os
import signal

import pytest

from tfrl import errors
from tfrl import logdir_lock
from tfrl import run_loop


class _Store(run_loop.CheckpointStore):
  """Checkpoints as a list of (number, count) in memory; `fail` makes saves fail."""

  description = "fake checkpoints"

  def __init__(self, directory):
    self.directory = directory
    self.saved = []   # (number, identity) per save
    self.restored = 0
    self.fail = False

  def exists(self):
    return bool(self.saved)

  def check(self):
    pass

  def saved_identity(self):
    return self.saved[-1][1]

  @property
  def latest(self):
    return f"ckpt-{self.saved[-1][0]}" if self.saved else None

  def restore(self, algorithm):
    algorithm.steps = self.saved[-1][0]
    self.restored += 1
    return self.latest

  def save(self, algorithm, number, identity):
    if self.fail:
      raise errors.RunFailed("disk full")
    self.saved.append((number, dict(identity)))
    return self.latest


class _Algorithm(run_loop.Algorithm):
  """Counts steps (by `stride`) up to `total`; `on_step(n)` runs in step n."""

  name = "fake"

  def __init__(self, total=5, stride=1, on_step=None):
    self.total, self.stride, self.on_step = total, stride, on_step
    self.steps = 0
    self.stop_requested = self.closed = False
    self.ended = None
    self.exports = 0

  def identity(self):
    return {"algorithm": "fake", "stride": self.stride}

  def count(self):
    return self.steps

  def progress(self):
    return f"step {self.steps}"

  def step(self):
    self.steps += self.stride
    if self.on_step is not None:
      self.on_step(self)
    return f"step {self.steps}"

  def finished(self):
    return "total" if self.steps >= self.total else None

  def request_stop(self):
    self.stop_requested = True

  def end(self, reason):
    self.ended = reason

  def export(self):
    self.exports += 1
    return {"policy": "exported"}

  def results(self):
    return {"steps": self.steps}

  def close(self):
    self.closed = True


def _run(tmp_path, algorithm, store=None, flags_text=None, **options):
  store = store or _Store(str(tmp_path))
  job = run_loop.Job(lambda: algorithm, store, run_loop.RunOptions(logdir=str(tmp_path),
                                                                   **options))
  return run_loop.run(job, flags_text=flags_text), store


def _summary(tmp_path):
  with open(tmp_path / run_loop.SUMMARY_FILE) as f:
    return json.load(f)


def test_checkpoints_when_the_count_crosses_a_multiple_and_at_the_end(tmp_path):
  summary, store = _run(tmp_path, _Algorithm(total=8, stride=2),
                        checkpoint_every=run_loop.Every(steps=3))
  assert [n for n, _ in store.saved] == [4, 6, 8]  # 8 is the final one
  assert store.saved[0][1] == {"algorithm": "fake", "stride": 2}
  assert summary == _summary(tmp_path)
  assert (summary["steps"], summary["stop_reason"], summary["checkpoint"]) == (8, "total",
                                                                            "ckpt-8")
  assert summary["policy"] == "exported"
  assert not os.path.exists(tmp_path / logdir_lock.LOCK_FILE)


def test_no_checkpoint_when_the_count_did_not_move(tmp_path):
  store = _Store(str(tmp_path))
  _run(tmp_path, _Algorithm(total=3), store, checkpoint_every=run_loop.Every(steps=3))
  assert [n for n, _ in store.saved] == [3]  # the final save had nothing new
  # A resumed run that is already finished saves nothing either.
  summary, _ = _run(tmp_path, _Algorithm(total=3), store, resume=True)
  assert [n for n, _ in store.saved] == [3] and store.restored == 1
  assert summary["checkpoint"] == "ckpt-3"


def test_fresh_run_over_a_checkpoint_and_another_runs_checkpoint_are_refused(tmp_path):
  store = _Store(str(tmp_path))
  _run(tmp_path, _Algorithm(total=2), store)
  made = []

  def make():
    made.append(True)
    return _Algorithm(total=4)

  job = run_loop.Job(make, store, run_loop.RunOptions(logdir=str(tmp_path)))
  with pytest.raises(ValueError) as e:
    run_loop.run(job)
  assert str(e.value) == (f"{tmp_path} already holds fake checkpoints of an earlier run; "
                          "pass --resume to continue it, or pick another --logdir (nothing "
                          "was overwritten).")
  assert not made  # refused before the algorithm is made
  with pytest.raises(ValueError, match=r"\(checkpoint != this run\): stride 1 != 2$"):
    _run(tmp_path, _Algorithm(total=4, stride=2), store, resume=True, flags_text="--x")
  assert not os.path.exists(tmp_path / run_loop.FLAGS_FILE)  # only accepted runs' flags
  _run(tmp_path, _Algorithm(total=4), store, resume=True, flags_text="--x")
  assert (tmp_path / run_loop.FLAGS_FILE).read_text() == "--x"


def test_a_signal_ends_the_loop_after_its_step_then_the_final_save(tmp_path):
  def signal_in_step_2(algorithm):
    if algorithm.steps == 2:
      os.kill(os.getpid(), signal.SIGTERM)

  # Whatever handler was there before (Ray's, once an earlier test in this
  # process started Ray) must be back after the run.
  previous = signal.getsignal(signal.SIGTERM)
  algorithm = _Algorithm(total=100, on_step=signal_in_step_2)
  console = []
  algorithm.console = run_loop.Console("fake", console.append)
  summary, store = _run(tmp_path, algorithm)
  assert algorithm.stop_requested and algorithm.ended == run_loop.REQUESTED
  assert [n for n, _ in store.saved] == [2] and summary["stop_reason"] == "requested"
  assert console[-1] == (f"[fake] stopped by a signal; the checkpoint in {tmp_path} holds "
                         "step 2; resume with --resume")
  assert signal.getsignal(signal.SIGTERM) is previous


def test_an_interrupted_step_goes_back_to_the_last_checkpoint(tmp_path):
  def interrupt_step_3(algorithm):
    if algorithm.steps == 3:
      raise run_loop.Interrupted()

  algorithm = _Algorithm(total=100, on_step=interrupt_step_3)
  summary, store = _run(tmp_path, algorithm, checkpoint_every=run_loop.Every(steps=1))
  assert store.restored == 1 and algorithm.steps == 2
  assert [n for n, _ in store.saved] == [1, 2]  # nothing new to save at the end
  assert summary["stop_reason"] == "requested"


def test_an_error_in_a_step_ends_the_run_without_a_final_save(tmp_path):
  def fail_in_step_3(algorithm):
    if algorithm.steps == 3:
      raise RuntimeError("a bug")

  algorithm = _Algorithm(total=100, on_step=fail_in_step_3)
  with pytest.raises(RuntimeError, match="a bug"):
    _run(tmp_path, algorithm, store=_Store(str(tmp_path)))
  assert algorithm.closed and algorithm.ended is None and algorithm.exports == 0
  assert not os.path.exists(tmp_path / run_loop.SUMMARY_FILE)
  assert not os.path.exists(tmp_path / logdir_lock.LOCK_FILE)


def test_a_recorded_failure_is_raised_after_the_final_save(tmp_path):
  def fail_in_step_2(algorithm):
    if algorithm.steps == 2:
      algorithm.error = RuntimeError("a worker failed")
      algorithm.total = 2

  algorithm = _Algorithm(total=100, on_step=fail_in_step_2)
  store = _Store(str(tmp_path))
  with pytest.raises(RuntimeError, match="a worker failed"):
    _run(tmp_path, algorithm, store)
  assert [n for n, _ in store.saved] == [2] and algorithm.exports == 1
  assert not os.path.exists(tmp_path / run_loop.SUMMARY_FILE)


def test_a_failed_export_is_one_line_naming_the_checkpoint_kept(tmp_path):
  algorithm = _Algorithm(total=2)

  def export():
    raise OSError(28, "No space left on device")

  algorithm.export = export
  with pytest.raises(errors.RunFailed) as e:
    _run(tmp_path, algorithm)
  assert str(e.value) == (f"cannot export the policy to {tmp_path}: [Errno 28] No space "
                          f"left on device; the checkpoint in {tmp_path} holds step 2")


def test_exports_every_n_steps_and_at_the_end(tmp_path):
  algorithm = _Algorithm(total=5)
  _run(tmp_path, algorithm, export_every=run_loop.Every(steps=2))
  assert algorithm.exports == 3  # at 2, 4 and the end
  algorithm = _Algorithm(total=5)
  _run(tmp_path / "noexport", algorithm, export=False, export_every=run_loop.Every(steps=2))
  assert algorithm.exports == 0


def test_resume_without_a_checkpoint_says_so_and_starts_afresh(tmp_path):
  algorithm = _Algorithm(total=2)
  console = []
  algorithm.console = run_loop.Console("fake", console.append)
  summary, store = _run(tmp_path, algorithm, resume=True, flags_text="--resume")
  assert console[0] == f"[fake] --resume: no checkpoint in {tmp_path}; starting afresh."
  assert store.restored == 0 and summary["steps"] == 2
  assert (tmp_path / run_loop.FLAGS_FILE).read_text() == "--resume"


def test_run_phases_restore_without_training(tmp_path):
  store = _Store(str(tmp_path))
  _run(tmp_path, _Algorithm(total=3), store)
  algorithm = _Algorithm(total=10)
  job = run_loop.Job(lambda: algorithm, store, run_loop.RunOptions(logdir=str(tmp_path),
                                                                   resume=True))
  with run_loop.Run(job) as phases:
    assert phases.restore(job.make()) == "ckpt-3" == phases.restored_from
  assert algorithm.steps == 3 and [n for n, _ in store.saved] == [3]
  assert not os.path.exists(tmp_path / logdir_lock.LOCK_FILE)
