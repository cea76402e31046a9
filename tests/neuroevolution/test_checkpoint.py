"""GA / ES / random search checkpoints: crash-safe files, one-line load errors,
and what a resumed run (`run_loop.run(<algorithm>.build(config))`) checks of
the checkpoint in its logdir: the run identity. Small runs on CartPole with
short episodes (test_cli.py runs the entry points end to end). A fresh run
over a checkpoint and a resume without one: the skeleton's,
tests/test_run_loop.py."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from tests.neuroevolution import runs
from tfrl import errors
from tfrl import es
from tfrl import ga
from tfrl import resume
from tfrl.envs import EnvProtocol
from tfrl.layers import spec as layer_spec
from tfrl.logdir_lock import LOCK_FILE
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import settings

_GA = ga.GAConfig(population=4, truncation=2, mutation_power=0.1, elite_candidates=1,
                  elite_episodes=1)
_ES = es.ESConfig(population=4, sigma=0.1, center_episodes=1)  # its state has arrays
# Episodes of at most 50 steps, 4 env slots: a generation takes a moment.
_CARTPOLE = EnvProtocol(env="CartPole-v1", max_episode_frames=50)
_SLOTS = settings.EvaluatorSettings(num_envs=4, slot_groups=1, noise_table_size=100_000)


def _config(algorithm, logdir, generations, resume_run=False, **parts):
  parts = {"env": _CARTPOLE, "evaluator": _SLOTS, **parts}
  return runs.config(algorithm, str(logdir), generations=generations, resume=resume_run,
                     **parts)


def _run(build, algorithm, logdir, generations, resume_run=False, made=None, **parts):
  """(the run's runner.Generations, its console lines)."""
  lines = []
  _, run = runs.run(build(_config(algorithm, logdir, generations, resume_run, **parts),
                          print_fn=lines.append), made=made)
  return run, lines


def _es(logdir, generations, resume_run=False, made=None):
  return _run(es.build, _ES, logdir, generations, resume_run, made)[0]


@pytest.fixture(scope="module")
def es_two_generations(tmp_path_factory):
  """A logdir holding an ES run's checkpoint of generation 2, and its theta."""
  logdir = tmp_path_factory.mktemp("es_two_generations")
  return logdir, _es(logdir, 2).search.theta.copy()


def _copy(logdir, to):
  """A copy of a finished run's logdir (without its released lock file)."""
  shutil.copytree(logdir, to, ignore=shutil.ignore_patterns(LOCK_FILE), dirs_exist_ok=True)


class TestFiles:

  def test_arrays_are_per_generation_and_older_ones_removed(self, tmp_path):
    theta = _es(tmp_path, 3).search.theta
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 3 and state["arrays_file"] == "checkpoint_arrays-000003.npz"
    assert arrays["theta"].tobytes() == theta.tobytes()
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("checkpoint")) == [
        "checkpoint.json", "checkpoint_arrays-000003.npz"]

  def test_a_kill_between_the_two_renames_leaves_a_whole_checkpoint(
      self, tmp_path, es_two_generations):
    logdir, theta = es_two_generations
    _copy(logdir, tmp_path)
    # Generation 3's arrays were written, its state was not: generation 2 stays whole.
    np.savez(tmp_path / "checkpoint_arrays-000003.npz", theta=np.full(theta.shape, 3.0))
    (tmp_path / "checkpoint.json.tmp").write_text('{"generation": 3, "fr')
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 2 and arrays["theta"].tobytes() == theta.tobytes()
    _es(tmp_path, 3, resume_run=True)
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("checkpoint")) == [
        "checkpoint.json", "checkpoint_arrays-000003.npz"]

  def test_arrays_the_state_does_not_name_are_not_read(self, tmp_path, es_two_generations):
    # An arrays file the state does not name (e.g. the single checkpoint_arrays.npz
    # of before per-generation files) is not part of the checkpoint: a resume that
    # needs arrays reports the checkpoint as malformed, in one line.
    logdir, _ = es_two_generations
    _copy(logdir, tmp_path)
    state_path = tmp_path / checkpoint.STATE_FILE
    state = json.loads(state_path.read_text())
    os.rename(tmp_path / state.pop("arrays_file"), tmp_path / "checkpoint_arrays.npz")
    state_path.write_text(json.dumps(state))
    assert checkpoint.load(str(tmp_path))[1] == {}
    with pytest.raises(resume.CorruptCheckpoint) as e:
      _es(tmp_path, 3, resume_run=True)
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
  def test_damaged_checkpoint_is_one_line_and_left_alone(self, tmp_path, es_two_generations,
                                                         damage, file, problem):
    _copy(es_two_generations[0], tmp_path)
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
      _es(tmp_path, 3, resume_run=True)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load the checkpoint {tmp_path / file}: {problem}")
    after = {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)
             if f.startswith("checkpoint")}
    assert after == before


def _network(hidden=(8,), inputs=4, actions=2, layer_plan=None):
  """How the run identity describes an mlp (CartPole's sizes by default)."""
  return pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=hidden, layer_plan=layer_plan),
                        (inputs,), actions).describe()


_CIRCULANT = layer_spec.LayerPlan.parse("torso/dense_0=circulant:block_size=4")


# The resumed run of each case of TestResume: (its build, algorithm config,
# config parts), against a GA checkpoint (the vbn case: an ES one, `_BASES`).
_BASES = {"vbn": (es.build, _ES)}
_CHANGES = {
    "algorithm": (es.build, _ES, {}),
    "env": (ga.build, _GA, {"env": dataclasses.replace(_CARTPOLE, env="Acrobot-v1")}),
    "population": (ga.build, dataclasses.replace(_GA, population=8), {}),
    "network": (ga.build, _GA, {"network": settings.NetworkSettings(arch="mlp",
                                                                    hidden=(16,))}),
    "layer": (ga.build, _GA, {"layer_plan": _CIRCULANT}),
    "vbn": (es.build, dataclasses.replace(_ES, vbn=es.VBNConfig()), {}),
    "noise_seed": (ga.build, dataclasses.replace(_GA, seed=1), {}),
    "noise_size": (ga.build, _GA, {"evaluator": dataclasses.replace(
        _SLOTS, noise_table_size=200_000)}),
    "two": (ga.build, dataclasses.replace(_GA, population=8, seed=1), {}),
}


class TestResume:

  def test_resume_continues_and_records_the_identity(self, tmp_path):
    _run(ga.build, _GA, tmp_path, 1)
    _, lines = _run(ga.build, _GA, tmp_path, 2, resume_run=True)
    assert any(line.startswith(f"[ga] resumed from {tmp_path} at generation 1")
               for line in lines), lines
    state = checkpoint.load(str(tmp_path))[0]
    assert state["generation"] == 2
    recorded = {
        "algorithm": "ga", "game": None, "env": "CartPole-v1", "max_episode_frames": 50,
        "network": _network(), "virtual_batch_norm": "off", "population": 4,
        "noise_table_seed": 0, "noise_table_size": 100_000,
        "observation_spec": "[None, 4] float32"}
    assert {key: state["run"].get(key) for key in recorded} == recorded

  @pytest.mark.parametrize("change, mismatch", [
      ("algorithm", "algorithm ga != es"),
      ("env", f"env CartPole-v1 != Acrobot-v1; network {_network()} != "
              f"{_network(inputs=6, actions=3)}; observation spec [None, 4] float32 != "
              "[None, 6] float32"),
      ("population", "population 4 != 8"),
      ("network", f"network {_network()} != {_network((16,))}"),
      ("layer", f"network {_network()} != {_network(layer_plan=_CIRCULANT)}"),
      ("vbn", "virtual batch norm off != on"),
      ("noise_seed", "noise table seed 0 != 1"),
      ("noise_size", "noise table size 100000 != 200000"),
      ("two", "population 4 != 8; noise table seed 0 != 1"),
  ])
  def test_resume_refuses_each_mismatch_in_one_line(self, tmp_path, change, mismatch):
    _run(*_BASES.get(change, (ga.build, _GA)), tmp_path, 1)
    before = (tmp_path / checkpoint.STATE_FILE).read_bytes()
    build, algorithm, parts = _CHANGES[change]
    with pytest.raises(ValueError) as e:
      _run(build, algorithm, tmp_path, 2, resume_run=True, **parts)
    assert str(e.value) == f"cannot resume {tmp_path} (checkpoint != this run): {mismatch}"
    assert (tmp_path / checkpoint.STATE_FILE).read_bytes() == before


class TestFailedWrites:

  def test_unwritable_checkpoint_ends_the_run_with_the_previous_one_intact(
      self, tmp_path, monkeypatch):
    theta = _es(tmp_path, 1).search.theta.copy()
    original = np.savez

    def full_disk(file, **arrays):
      original(file, **arrays)
      raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(errors.RunFailed) as e:
      _es(tmp_path, 3, resume_run=True)
    assert str(e.value) == (
        f"cannot write the checkpoint of generation 2 in {tmp_path}: No space left on "
        f"device; the checkpoint there still holds generation 1 (resume with --resume)")
    monkeypatch.undo()
    state, arrays = checkpoint.load(str(tmp_path))
    assert state["generation"] == 1 and arrays["theta"].tobytes() == theta.tobytes()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


class TestLostWorkers:

  def test_the_message_names_the_generation_of_the_last_checkpoint(self, tmp_path):
    _es(tmp_path, 1)

    def lose_workers_in_generation_3(run):
      search = run.search
      step = search.step

      def step_or_lose():
        if search.generation == 2:
          raise evaluators.WorkersLost("every Ray worker was lost")
        return step()

      search.step = step_or_lose

    with pytest.raises(evaluators.WorkersLost) as e:
      _es(tmp_path, 5, resume_run=True, made=lose_workers_in_generation_3)
    assert str(e.value) == (f"every Ray worker was lost; the checkpoint in {tmp_path} holds "
                            "generation 2 (resume with --resume, with or without Ray)")
    assert checkpoint.load(str(tmp_path))[0]["generation"] == 2
