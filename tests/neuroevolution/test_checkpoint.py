"""GA / ES / random search checkpoints: crash-safe files, one-line load errors,
and what a resumed run (`runner.run`, through the run skeleton) checks of the
checkpoint in its logdir: the run identity (a fake, instant algorithm stands in
for the real ones, which test_cli.py runs end to end). A fresh run over a
checkpoint and a resume without one: the skeleton's, tests/test_run_loop.py."""

import json
import os
import time

import numpy as np
import pytest
import tensorflow as tf

from tfrl import errors
from tfrl import resume
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import runner
from tfrl.neuroevolution.metrics import generation_metrics

_SPEC = tf.TensorSpec([None, 4], tf.float32)


class _Layout:

  def __init__(self, dim=3, kinds="torso/dense_0:dense"):
    self.dim, self.kinds = dim, kinds

  def describe(self):
    return f"mlp D={self.dim} [{self.kinds}]"


class _Table:

  def __init__(self, seed=0, size=1000):
    self.seed, self.size = seed, size


class _Config:

  def __init__(self, population, vbn=None):
    self.population, self.vbn = population, vbn


class _Evaluator:

  def stop(self):
    pass


class FakeAlgorithm:
  """Generation g scores g; its state is (generation, frames, theta = g * ones)."""

  def __init__(self, name="ga", population=4, layout=None, table=None, arrays=True, vbn=None):
    self.name = name
    self.config = _Config(population, vbn)
    self.layout = layout or _Layout()
    self.table = table or _Table()
    self.evaluator = _Evaluator()
    self.generation = self.frames = 0
    self.elite_score = 0.0
    self.theta = np.zeros(3, np.float32)
    self._arrays = arrays

  def step(self):
    self.theta = self.theta + 1
    self.elite_score = float(self.generation + 1)
    fitness = np.full(self.config.population, self.elite_score)
    return generation_metrics(self, fitness, 10, time.time(), 0.0)

  def state(self):
    state = {"algorithm": self.name, "generation": self.generation, "frames": self.frames,
             "elite_score": self.elite_score}
    return state, ({"theta": self.theta} if self._arrays else None)

  def restore(self, state, arrays):
    self.generation, self.frames = state["generation"], state["frames"]
    self.elite_score = state["elite_score"]
    if self._arrays:
      self.theta = arrays["theta"]


def _run(algorithm, logdir, generations, resume_run=False, identity=None):
  lines = []
  config = runner.RunConfig(logdir=str(logdir), generations=generations, resume=resume_run,
                            export=False, identity=identity or {})
  runner.run(algorithm, config, _SPEC, print_fn=lines.append)
  return lines


class TestFiles:

  def test_arrays_are_per_generation_and_older_ones_removed(self, tmp_path):
    _run(FakeAlgorithm(), tmp_path, 3)
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 3 and state["arrays_file"] == "checkpoint_arrays-000003.npz"
    assert arrays["theta"].tolist() == [3, 3, 3]
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("checkpoint")) == [
        "checkpoint.json", "checkpoint_arrays-000003.npz"]

  def test_a_kill_between_the_two_renames_leaves_a_whole_checkpoint(self, tmp_path):
    _run(FakeAlgorithm(), tmp_path, 2)
    # Generation 3's arrays were written, its state was not: generation 2 stays whole.
    np.savez(tmp_path / "checkpoint_arrays-000003.npz", theta=np.full(3, 3.0))
    (tmp_path / "checkpoint.json.tmp").write_text('{"generation": 3, "fr')
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 2 and arrays["theta"].tolist() == [2, 2, 2]
    _run(FakeAlgorithm(), tmp_path, 3, resume_run=True)
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("checkpoint")) == [
        "checkpoint.json", "checkpoint_arrays-000003.npz"]

  def test_arrays_the_state_does_not_name_are_not_read(self, tmp_path):
    # An arrays file the state does not name (e.g. the single checkpoint_arrays.npz
    # of before per-generation files) is not part of the checkpoint: a resume that
    # needs arrays reports the checkpoint as malformed, in one line.
    np.savez(tmp_path / "checkpoint_arrays.npz", theta=np.ones(3))
    (tmp_path / checkpoint.STATE_FILE).write_text(json.dumps(
        {"algorithm": "ga", "generation": 1, "frames": 5, "elite_score": 1.0}))
    assert checkpoint.load(str(tmp_path))[1] == {}
    with pytest.raises(resume.CorruptCheckpoint) as e:
      _run(FakeAlgorithm(), tmp_path, 2, resume_run=True)
    assert str(e.value).startswith(f"cannot load the checkpoint {tmp_path / 'checkpoint.json'}"
                                   ": a malformed or missing entry (KeyError('theta'))")

  @pytest.mark.parametrize("damage, file, problem", [
      ("truncate_state", checkpoint.STATE_FILE, "not valid JSON, truncated?"),
      ("empty_state", checkpoint.STATE_FILE, "not valid JSON, truncated?"),
      ("list_state", checkpoint.STATE_FILE, "holds a list"),
      ("no_generation", checkpoint.STATE_FILE, "has no 'generation'"),
      ("truncate_arrays", "checkpoint_arrays-000002.npz", "unreadable, truncated?"),
      ("garbage_arrays", "checkpoint_arrays-000002.npz", "unreadable, truncated?"),
      ("missing_arrays", "checkpoint_arrays-000002.npz", "missing (checkpoint.json names it)"),
      ("no_theta", checkpoint.STATE_FILE, "a malformed or missing entry (KeyError('theta'))"),
  ])
  def test_damaged_checkpoint_is_one_line_and_left_alone(self, tmp_path, damage, file, problem):
    _run(FakeAlgorithm(), tmp_path, 2)
    state_path = tmp_path / checkpoint.STATE_FILE
    arrays_path = tmp_path / "checkpoint_arrays-000002.npz"
    if damage == "truncate_state":
      state_path.write_bytes(state_path.read_bytes()[:20])
    elif damage == "empty_state":
      state_path.write_bytes(b"")
    elif damage == "list_state":
      state_path.write_text("[1, 2]")
    elif damage == "no_generation":
      state = json.loads(state_path.read_text())
      del state["generation"]
      state_path.write_text(json.dumps(state))
    elif damage == "truncate_arrays":
      arrays_path.write_bytes(arrays_path.read_bytes()[:100])
    elif damage == "garbage_arrays":
      arrays_path.write_bytes(b"\0" * 500)
    elif damage == "missing_arrays":
      arrays_path.unlink()
    elif damage == "no_theta":
      np.savez(arrays_path, other=np.ones(3))
    before = {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)
              if f.startswith("checkpoint")}
    with pytest.raises(resume.CorruptCheckpoint) as e:
      _run(FakeAlgorithm(), tmp_path, 3, resume_run=True)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load the checkpoint {tmp_path / file}: {problem}")
    after = {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)
             if f.startswith("checkpoint")}
    assert after == before


class TestResume:

  def test_resume_continues_and_records_the_identity(self, tmp_path):
    identity = {"game": None, "env": "CartPole-v1"}
    _run(FakeAlgorithm(), tmp_path, 1, identity=identity)
    lines = _run(FakeAlgorithm(), tmp_path, 2, resume_run=True, identity=identity)
    assert lines[0].startswith(f"[ga] resumed from {tmp_path} at generation 1")
    state = checkpoint.load(str(tmp_path))[0]
    assert state["generation"] == 2
    assert state["run"] == {
        "algorithm": "ga", "game": None, "env": "CartPole-v1",
        "network": "mlp D=3 [torso/dense_0:dense]", "virtual_batch_norm": "off",
        "population": 4,
        "noise_table_seed": 0, "noise_table_size": 1000, "observation_spec": "[None, 4] float32"}

  @pytest.mark.parametrize("change, mismatch", [
      (dict(name="es"), "algorithm ga != es"),
      (dict(identity={"game": "pong", "env": None}),
       "game (none) != pong; env CartPole-v1 != (none)"),
      (dict(population=8), "population 4 != 8"),
      (dict(layout=_Layout(dim=5)), "network mlp D=3 [torso/dense_0:dense] != mlp D=5 "
                                    "[torso/dense_0:dense]"),
      (dict(layout=_Layout(kinds="torso/dense_0:circulant")), "[torso/dense_0:dense] != mlp "
                                                              "D=3 [torso/dense_0:circulant]"),
      (dict(vbn="a VBNConfig"), "virtual batch norm off != on"),
      (dict(table=_Table(seed=1)), "noise table seed 0 != 1"),
      (dict(table=_Table(size=2000)), "noise table size 1000 != 2000"),
      (dict(spec=tf.TensorSpec([None, 6], tf.float32)),
       "observation spec [None, 4] float32 != [None, 6] float32"),
      (dict(population=8, table=_Table(seed=1)), "population 4 != 8; noise table seed 0 != 1"),
  ])
  def test_resume_refuses_each_mismatch_in_one_line(self, tmp_path, change, mismatch):
    _run(FakeAlgorithm(), tmp_path, 1, identity={"game": None, "env": "CartPole-v1"})
    before = (tmp_path / checkpoint.STATE_FILE).read_bytes()
    change = dict(change)
    identity = change.pop("identity", {"game": None, "env": "CartPole-v1"})
    spec = change.pop("spec", _SPEC)
    config = runner.RunConfig(logdir=str(tmp_path), generations=2, resume=True, export=False,
                              identity=identity)
    with pytest.raises(ValueError) as e:
      runner.run(FakeAlgorithm(**change), config, spec, print_fn=lambda line: None)
    assert str(e.value).startswith(f"cannot resume {tmp_path} (checkpoint != this run): ")
    assert str(e.value).endswith(mismatch)
    assert (tmp_path / checkpoint.STATE_FILE).read_bytes() == before


class TestFailedWrites:

  def test_unwritable_checkpoint_ends_the_run_with_the_previous_one_intact(
      self, tmp_path, monkeypatch):
    _run(FakeAlgorithm(), tmp_path, 1)
    original = np.savez

    def full_disk(file, **arrays):
      original(file, **arrays)
      raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(errors.RunFailed) as e:
      _run(FakeAlgorithm(), tmp_path, 3, resume_run=True)
    assert str(e.value) == (
        f"cannot write the checkpoint of generation 2 in {tmp_path}: No space left on "
        f"device; the checkpoint there still holds generation 1 (resume with --resume)")
    monkeypatch.undo()
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 1 and arrays["theta"].tolist() == [1, 1, 1]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


class TestLostWorkers:

  def test_the_message_names_the_generation_of_the_last_checkpoint(self, tmp_path):
    _run(FakeAlgorithm(), tmp_path, 1)
    algorithm = FakeAlgorithm()
    step = algorithm.step

    def lose_workers_in_generation_3():
      if algorithm.generation == 2:
        raise evaluators.WorkersLost("every Ray worker was lost")
      return step()

    algorithm.step = lose_workers_in_generation_3
    with pytest.raises(evaluators.WorkersLost) as e:
      _run(algorithm, tmp_path, 5, resume_run=True)
    assert str(e.value) == (f"every Ray worker was lost; the checkpoint in {tmp_path} holds "
                            "generation 2 (resume with --resume, with or without Ray)")
    assert checkpoint.load(str(tmp_path))[0]["generation"] == 2
