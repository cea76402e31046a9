"""GA, ES and random search on a local multi-node Ray cluster.

One cluster for the module: a head with no CPUs and two 1-CPU nodes, all on
this machine's loopback, so that each worker is its own node. Every run is
compared with the same run in this process: the same seed must give the
same per-generation scores and the same final state whatever the placement,
also when a worker dies half-way.
"""

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

# The Ray extra (pip install -e '.[test,ray]'); without it this module fails.
import ray
from ray import cluster_utils
from ray._private import ray_constants

from tfrl import es
from tfrl import ga
from tfrl import random_search
from tfrl.envs import EnvProtocol
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import normalization
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import ray_evaluator
from tfrl.neuroevolution import settings
from tfrl.neuroevolution import worker

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests import processes  # pylint: disable=g-import-not-at-top
from tests.neuroevolution import runs  # pylint: disable=g-import-not-at-top
_NOISE = 1 << 21
_POP = 6
# The algorithms' seed, and so that of the noise table and of the env slots
# (as the entry points seed them).
_SEED = 7
# Frostbite with sticky actions, capped at 800 frames: short episodes whose
# scores differ between networks and between seeds.
_ATARI = EnvProtocol(game="frostbite", repeat_action_probability=0.25, max_episode_frames=800)
_SMALL = settings.NetworkSettings(arch="small", hidden=(8,))


def _spec(env=_ATARI, arch="small", hidden=(8,), num_envs=4, groups=2, env_seed=_SEED):
  probe = worker.make_worker_env(env, 1, env_seed)
  shape, actions = tuple(probe.observation_shape), int(probe.num_actions)
  probe.close()
  return worker.WorkerSpec(
      env=env, network=pn.NetworkConfig(arch=arch, hidden=hidden),
      observation_shape=shape, num_actions=actions, noise_seed=_SEED, noise_size=_NOISE,
      capacity=_POP, num_envs=num_envs, slot_groups=groups,
      incremental=arch != "mlp", cache_size=8, env_seed=env_seed)


_TABLE = {}


def _table():
  if "t" not in _TABLE:
    _TABLE["t"] = noise_lib.NoiseTable(_SEED, _NOISE)
  return _TABLE["t"]


def _config(kind):
  if kind == "es":
    return es.ESConfig(population=_POP, sigma=0.05, center_episodes=2, seed=_SEED)
  return ga.GAConfig(population=_POP, truncation=3, mutation_power=0.02,
                     elite_candidates=2, elite_episodes=2, seed=_SEED,
                     random_search=kind == "random_search")


def _algorithm(kind, spec, evaluator):
  search_cls = es.EvolutionStrategy if kind == "es" else ga.GeneticAlgorithm
  return search_cls(_config(kind), spec.layout(), _table(), evaluator)


def _ray_evaluator(spec, workers, log=None, **kwargs):
  config = ray_evaluator.RayConfig(address="auto", workers=workers, **kwargs)
  return ray_evaluator.RayEvaluator(spec, config, _table(),
                                    log=log if log is not None else print)


def _scores(history):
  return [(m["generation"], m["best"], m["mean"], m["elite"], m["frames"])
          for m in history]


_BUILDS = {"es": es.build, "ga": ga.build, "random_search": random_search.build}


def _run(kind, logdir, generations, resume=False, workers=0, made=None, **ray):
  """A run as the entry points make it: on `workers` Ray workers (2 slots in
  2 groups each; `ray`: more RayConfig fields), or locally (3 slots, 1 group)
  with none; its runner.Generations."""
  slots = settings.EvaluatorSettings(num_envs=2 if workers else 3,
                                     slot_groups=2 if workers else 1,
                                     noise_table_size=_NOISE)
  ray_config = (ray_evaluator.RayConfig(address="auto", workers=workers, **ray) if workers
                else ray_evaluator.RayConfig())
  config = dataclasses.replace(
      runs.config(_config(kind), logdir, env=_ATARI, network=_SMALL, evaluator=slots,
                  generations=generations, resume=resume), ray=ray_config)
  return runs.run(_BUILDS[kind](config, print_fn=lambda line: None), made=made)[1]


_LOCAL = {}


def _local_reference(kind, generations=3):
  """(scores, state) of the run in this process (computed once per kind)."""
  if kind not in _LOCAL:
    spec = _spec(num_envs=3, groups=1)
    evaluator = worker.build_local(spec, _table())
    algorithm = _algorithm(kind, spec, evaluator)
    history = [algorithm.step() for _ in range(generations)]
    _LOCAL[kind] = (_scores(history), _comparable_state(algorithm))
    evaluator.close()
  return _LOCAL[kind]


def _comparable_state(algorithm):
  state, arrays = algorithm.state()
  return state, {k: v.tobytes() for k, v in (arrays or {}).items()}


@pytest.fixture(scope="module", autouse=True)
def cluster():
  # Every node of the test cluster on the loopback address, for this module's
  # tests only: the nodes' processes read the variable when they start, and
  # this process read it when it imported Ray (its constant says the same).
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv(ray_evaluator.LOOPBACK_ENV, "0")
    patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    c = cluster_utils.Cluster()
    try:
      c.add_node(num_cpus=0, object_store_memory=150 << 20, include_dashboard=False)
      for _ in range(2):
        c.add_node(num_cpus=1, object_store_memory=150 << 20)
      ray.init(address=c.address, log_to_driver=False)
      yield c
    finally:  # also when the cluster did not start whole
      ray.shutdown()
      c.shutdown()


class TestPlacement:

  @pytest.mark.parametrize("workers", [1, 2])
  def test_same_result_locally_and_on_one_and_two_workers(self, workers):
    # One evaluator plays GA, ES and random search in turn (its workers start
    # once): what a worker kept from one run must not change the next.
    spec = _spec(num_envs=2, groups=2)   # other slot counts than locally
    evaluator = _ray_evaluator(spec, workers)
    try:
      for kind in ("ga", "es", "random_search"):
        scores, state = _local_reference(kind)
        algorithm = _algorithm(kind, spec, evaluator)
        history = [algorithm.step() for _ in range(3)]
        assert _scores(history) == scores, (kind, workers)
        assert _comparable_state(algorithm) == state, (kind, workers)
        # The runs are not trivially equal: the networks scored differently.
        assert len({s[1] for s in scores} | {s[2] for s in scores}) > 1, (kind, scores)
    finally:
      evaluator.close()


def _ga_losing_a_worker(worker_index, before_generation, max_worker_restarts):
  """3 GA generations on 2 workers, one of which dies in the given generation."""
  lines = []
  spec = _spec(num_envs=2)
  evaluator = _ray_evaluator(spec, 2, log=lines.append,
                             max_worker_restarts=max_worker_restarts)
  try:
    algorithm = _algorithm("ga", spec, evaluator)
    history = []
    for generation in range(3):
      if generation == before_generation:
        evaluator.arm_exit(worker_index, seconds=0.05)
      history.append(algorithm.step())
    counts = (evaluator.lost, evaluator.restarts, evaluator.workers_alive)
  finally:
    evaluator.close()
  return history, _comparable_state(algorithm), counts, lines


class TestFaults:

  def test_worker_killed_mid_generation_is_replaced_and_nothing_changes(self):
    history, state, (lost, restarts, _), lines = _ga_losing_a_worker(0, 1, 1)
    assert (lost, restarts) == (1, 1)
    assert any("re-dealt" in line for line in lines), lines
    assert any("starting replacement" in line for line in lines), lines
    assert (_scores(history), state) == _local_reference("ga")

  def test_run_goes_on_without_a_worker_that_stays_gone(self):
    history, state, (lost, _, alive), lines = _ga_losing_a_worker(1, 0, 0)
    assert (lost, alive) == (1, 1)
    assert any("no replacement" in line for line in lines), lines
    assert (_scores(history), state) == _local_reference("ga")

  def test_all_workers_lost_keeps_a_checkpoint_that_resumes_locally(self, tmp_path):
    scores, state = _local_reference("ga")
    logdir = str(tmp_path / "run")
    first = _run("ga", logdir, 1, workers=2, max_worker_restarts=0)

    def lose_both_workers(run):
      for i in range(2):
        run.search.evaluator.arm_exit(i, seconds=0.05)

    with pytest.raises(evaluators.WorkersLost, match="generation 1"):
      _run("ga", logdir, 3, resume=True, workers=2, max_worker_restarts=0,
           made=lose_both_workers)
    rest = _run("ga", logdir, 3, resume=True)
    assert _scores(first.history + rest.history) == scores
    assert _comparable_state(rest.search) == state


class TestResume:

  def test_resume_across_placements(self, tmp_path):
    # On Ray, resumed here, resumed on Ray again: both ways across placements.
    scores, state = _local_reference("es")
    logdir = str(tmp_path / "run")
    history = []
    for generations, on_ray in ((1, True), (2, False), (3, True)):
      run = _run("es", logdir, generations, resume=generations > 1,
                 workers=2 if on_ray else 0)
      history += run.history
    assert _scores(history) == scores
    assert _comparable_state(run.search) == state


class TestTraffic:

  def test_bytes_grow_with_the_seed_chains_not_the_weights(self):
    cartpole = EnvProtocol(env="CartPole-v1")
    sent = {}
    for hidden in ((4,), (256, 256)):
      spec = _spec(env=cartpole, arch="mlp", hidden=hidden, env_seed=0)
      evaluator = _ray_evaluator(spec, 2)
      try:
        algorithm = _algorithm("ga", spec, evaluator)
        per_generation = []
        for _ in range(3):
          before = evaluator.bytes_sent
          algorithm.step()
          per_generation.append(evaluator.bytes_sent - before)
      finally:
        evaluator.close()
      sent[hidden] = per_generation
    weights = 4 * spec.layout().dim
    assert weights > 250_000
    # The weights differ ~2000x in size; the bytes sent do not (but for the
    # pickled size of the offsets' values), and are a small part of one network's.
    for small, large in zip(sent[(4,)], sent[(256, 256)]):
      assert abs(small - large) <= 0.02 * small and large < weights / 20, sent
    # The third generation's chains are two mutations longer than the first's.
    assert sent[(4,)][2] > sent[(4,)][0], sent


# HalfCheetah-v5 (MuJoCo), episodes capped at 60 steps, a tanh MLP with a Box
# head and observation normalization: each worker builds its own MuJoCo envs.
_CHEETAH = EnvProtocol(env="HalfCheetah-v5", max_episode_frames=60)
_NORM = normalization.NormalizationConfig(enabled=True, fraction=0.5)


def _mujoco_spec(num_envs, groups):
  probe = worker.make_worker_env(_CHEETAH, 1, 3)
  head = heads.for_env(probe)
  probe.close()
  return worker.WorkerSpec(
      env=_CHEETAH, network=pn.NetworkConfig(arch="mlp", hidden=(8,), activation="tanh"),
      observation_shape=(17,), num_actions=head.size, noise_seed=_SEED, noise_size=_NOISE,
      capacity=_POP, num_envs=num_envs, slot_groups=groups, cache_size=8, env_seed=3,
      head=head, obs_norm_clip=5.0)


def _mujoco_es(spec, evaluator):
  config = es.ESConfig(population=_POP, sigma=0.05, center_episodes=2, seed=_SEED,
                       normalization=_NORM)
  return es.EvolutionStrategy(config, spec.layout(), _table(), evaluator)


def _mujoco_run(evaluator, spec, kill_in=None):
  algorithm = _mujoco_es(spec, evaluator)
  history = []
  try:
    for generation in range(3):
      if generation == kill_in:
        evaluator.arm_exit(0, seconds=0.05)
      history.append(algorithm.step())
    lost = getattr(evaluator, "lost", 0)
  finally:
    evaluator.close()
  return _scores(history), _comparable_state(algorithm), algorithm.normalizer, lost


class TestMujoco:

  def test_normalized_es_same_locally_on_one_and_two_workers_and_after_a_kill(self):
    scores, state, normalizer, _ = _mujoco_run(
        worker.build_local(_mujoco_spec(3, 1), _table()), _mujoco_spec(3, 1))
    assert normalizer.episodes > 0 and normalizer.stats.count > 0
    assert "obs_norm_sum" in state[1] and "obs_norm_elite_std" in state[1]
    runs = [(workers, None) for workers in (1, 2)] + [(2, 1)]
    for workers, kill_in in runs:
      spec = _mujoco_spec(2, 2)   # other slot counts than locally
      lines = []
      evaluator = _ray_evaluator(spec, workers, log=lines.append, max_worker_restarts=1)
      got_scores, got_state, got_normalizer, lost = _mujoco_run(evaluator, spec, kill_in)
      assert got_scores == scores, (workers, kill_in)
      # The running sums and the elite's statistics, bit for bit (in the state's arrays).
      assert got_state == state, (workers, kill_in)
      assert got_normalizer.episodes == normalizer.episodes
      if kill_in is not None:
        assert lost == 1 and any("re-dealt" in line for line in lines), lines
    assert len({s[1] for s in scores} | {s[2] for s in scores}) > 1, scores


def _ray_processes(marker: str):
  """PIDs of live processes whose command line or environment names `marker`."""
  return sorted(processes.mentioning(marker, environ=True))


def _assert_gone(marker: str, timeout: float = 60.0):
  """Waits until no process names `marker` (Ray's take a moment to exit once
  told to); fails with those left after `timeout` seconds (a bound that only
  catches processes that never exit)."""
  deadline = time.monotonic() + timeout
  while _ray_processes(marker) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert _ray_processes(marker) == [], f"Ray processes left {timeout:g} s after the run"


@pytest.fixture
def ray_tmpdir():
  # Short: Ray's socket paths under it must stay within the 107 bytes of a
  # unix socket address.
  path = tempfile.mkdtemp(prefix="tfrl_ray_", dir="/tmp")
  yield path
  shutil.rmtree(path, ignore_errors=True)


class TestCommandLine:

  def _env(self, ray_tmpdir):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_ROOT,
               RAY_TMPDIR=ray_tmpdir)
    env.pop("RAY_ADDRESS", None)
    return env

  _ARGS = ["--env=CartPole-v1", "--num_envs=4", "--hidden=8", "--population=6",
           "--noise_table_size=100000", "--ray_address=local", "--ray_workers=2"]
  _GA = ["--truncation=2", "--elite_candidates=2", "--elite_episodes=2"]

  def test_local_ray_instance_runs_exports_and_leaves_no_process(self, tmp_path,
                                                                 ray_tmpdir):
    logdir = str(tmp_path / "ga")
    env = self._env(ray_tmpdir)
    out = subprocess.run([sys.executable, "-m", "tfrl.ga", *self._ARGS, *self._GA,
                          "--generations=2", f"--logdir={logdir}"], env=env, cwd=_ROOT,
                         capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[ga] gen    2" in out.stdout and "ray: 2 workers" in out.stdout
    assert os.path.exists(os.path.join(logdir, "elite", "saved_model.pb"))
    played = subprocess.run(
        [sys.executable, "-m", "tfrl.evaluate", f"--policy={logdir}/elite",
         "--env=CartPole-v1", "--episodes=2", "--num_envs=2"], env=env, cwd=_ROOT,
        capture_output=True, text=True, timeout=120)
    assert played.returncode == 0, played.stderr[-3000:]
    _assert_gone(ray_tmpdir)

  def test_sigterm_stops_the_run_and_its_ray_processes(self, tmp_path, ray_tmpdir):
    logdir = str(tmp_path / "es")
    env = self._env(ray_tmpdir)
    with open(tmp_path / "stderr.txt", "w+") as stderr, \
        processes.cli(["-m", "tfrl.es", *self._ARGS, "--center_episodes=2",
                       "--generations=100000", f"--logdir={logdir}"], env,
                      stderr=stderr) as proc:
      processes.wait_for_line(proc, "[es] gen    2", timeout=180)
      out = processes.stop(proc, signal.SIGTERM, timeout=120)
      stderr.seek(0)
      err = stderr.read()
      assert proc.returncode == 0, err[-3000:]
      assert "stopped by a signal" in out
      assert os.path.exists(os.path.join(logdir, "checkpoint.json"))
      # Inside the block: leaving it kills what is left of the run's process group.
      _assert_gone(ray_tmpdir)

  def test_no_worker_can_start_one_line_and_exit_1(self, tmp_path, ray_tmpdir):
    out = subprocess.run(
        [sys.executable, "-m", "tfrl.ga", *self._ARGS[:-2], "--ray_address=local",
         "--ray_workers=1", "--ray_worker_cpus=64", "--ray_worker_start_timeout=3",
         f"--logdir={tmp_path / 'ga'}"], env=self._env(ray_tmpdir), cwd=_ROOT,
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 1, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("tfrl.ga: error: no Ray worker started within 3 s"), last

  def test_without_ray_flags_ray_is_not_imported(self, tmp_path, ray_tmpdir):
    # The whole local run in a fresh process; at exit it says whether Ray was loaded.
    code = ("import atexit, runpy, sys\n"
            "atexit.register(lambda: print('ray imported:', 'ray' in sys.modules))\n"
            f"sys.argv = ['tfrl.ga'] + {self._ARGS[:-2] + self._GA!r} + "
            f"['--generations=1', '--logdir={tmp_path / 'ga'}']\n"
            "runpy.run_module('tfrl.ga', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], env=self._env(ray_tmpdir),
                         cwd=_ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[ga] gen    1" in out.stdout and "local:" in out.stdout
    assert "ray imported: False" in out.stdout, out.stdout
