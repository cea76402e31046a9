"""Flags of `python -m tfrl.ga`, `tfrl.es` and `tfrl.random_search`, and the run.

Each entry module calls `define_flags(<its algorithm config>)` at import time
and `config_from_flags(algorithm)` in `main`: one typed
`settings.NeuroevolutionConfig` (env protocol, network, evaluator, run, Ray,
algorithm, layer plan) from which everything below is built. Library code
never reads FLAGS.
"""

import dataclasses

from absl import app
from absl import flags
import tensorflow as tf

from tfrl import flagconfig
from tfrl.layers import flags as layer_flags
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net
from tfrl.neuroevolution import ray_evaluator
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings as settings_lib
from tfrl.neuroevolution import worker as worker_lib

NeuroevolutionConfig = settings_lib.NeuroevolutionConfig


def define_flags(algorithm_cls, fv: flags.FlagValues = flags.FLAGS,
                 exclude=()) -> None:
  """The run's flags, the layer flags and those of `algorithm_cls` (GAConfig or
  ESConfig) but for the fields in `exclude` (idempotent)."""
  flagconfig.define(NeuroevolutionConfig, fv=fv)
  layer_flags.define_layer_flags(fv)
  flagconfig.define(algorithm_cls, fv=fv, exclude=exclude)


def config_from_flags(algorithm: settings_lib.SearchConfig,
                      fv: flags.FlagValues = flags.FLAGS) -> NeuroevolutionConfig:
  """The run's config of the flags and the entry point's algorithm config
  (ValueError, one line, for values its parts refuse)."""
  return flagconfig.build(NeuroevolutionConfig, fv=fv, algorithm=algorithm,
                          layer_plan=layer_flags.layer_plan_from_flags(fv))


@dataclasses.dataclass
class Setup:
  spec: worker_lib.WorkerSpec
  layout: population_net.ParamLayout
  table: noise_lib.NoiseTable
  evaluator: evaluators.Evaluator
  observation_spec: tf.TensorSpec


def worker_spec(config: NeuroevolutionConfig, capacity: int):
  """The WorkerSpec of a run (per Ray worker with --ray_address), and the obs spec."""
  seed = config.algorithm.seed
  probe = worker_lib.make_worker_env(config.env, 1, seed)  # the spaces, from one slot
  try:
    head = heads.for_env(probe, config.network.action_head)
    norm = config.algorithm.normalization
    if norm.enabled and len(probe.observation_shape) != 1:
      raise ValueError(f"--obs_norm needs vector observations, got shape "
                       f"{list(probe.observation_shape)} from {config.env.name}.")
    observation_spec = tf.TensorSpec([None] + list(probe.observation_shape),
                                     getattr(probe, "observation_dtype", tf.uint8))
    network = config.network.network_config(probe.observation_shape, config.layer_plan)
    ray = config.ray if config.uses_ray else None
    spec = worker_lib.WorkerSpec(
        env=config.env, network=network, observation_shape=tuple(probe.observation_shape),
        num_actions=head.size, noise_seed=seed,
        noise_size=config.evaluator.noise_table_size, capacity=capacity,
        num_envs=(ray and ray.worker_envs) or config.evaluator.num_envs,
        slot_groups=(ray and ray.worker_slot_groups) or config.evaluator.slot_groups,
        incremental=config.network.incremental(network),
        # Incremental inference reads circulant kernels compact, unless VBN
        # folds its statistics into them.
        compact_circulant=(config.network.incremental(network)
                           and getattr(config.algorithm, "vbn", None) is None),
        refresh_steps=config.network.refresh_steps, cache_size=config.cache_size(),
        env_seed=seed, head=None if head.is_discrete else head,
        obs_norm_clip=norm.clip if norm.enabled else None)
  finally:
    probe.close()
  return spec, observation_spec


def build(config: NeuroevolutionConfig, log=print) -> Setup:
  """Layout, noise table and evaluator (local, or on Ray) of a run."""
  spec, observation_spec = worker_spec(config, config.algorithm.capacity())
  layout = spec.layout()
  table = noise_lib.NoiseTable(config.algorithm.seed, config.evaluator.noise_table_size)
  if not config.uses_ray:
    evaluator = worker_lib.build_local(spec, table)
  else:
    evaluator = ray_evaluator.RayEvaluator(spec, config.ray, table, log=log)
  return Setup(spec, layout, table, evaluator, observation_spec)


def run_config(config: NeuroevolutionConfig) -> runner.RunConfig:
  run = config.run
  # The env protocol a checkpoint was trained on is part of what a resume must match.
  return runner.RunConfig(
      logdir=run.logdir, generations=run.generations, max_frames=run.max_frames,
      resume=run.resume, export=run.export, export_every=run.export_every,
      target_score=run.target_score, identity=config.env.identity(),
      env_protocol=config.env, profile_generation=run.profile_generation)


def check_argv(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")


def main_for(make_algorithm, ne_config: NeuroevolutionConfig,
             fv: flags.FlagValues = flags.FLAGS) -> None:
  """Shared body of the entry points' main: build and run in the run skeleton."""
  log = lambda line: print(line, flush=True)
  config = run_config(ne_config)

  def build_run() -> runner.Generations:
    # Once the logdir is locked and its checkpoint accepted (tfrl.run_loop): a
    # fresh run over a checkpoint, or an unreadable one, never starts Ray workers.
    setup = build(ne_config, log=log)
    try:
      algorithm = make_algorithm(setup)
      print(f"[{algorithm.name}] {setup.layout.describe()} | population "
            f"{ne_config.algorithm.population} | "
            f"{setup.evaluator.describe()} | "
            f"{'incremental' if setup.spec.incremental else 'full'} inference", flush=True)
    except BaseException:
      setup.evaluator.close()
      raise
    return runner.Generations(algorithm, config, setup.observation_spec, print_fn=log,
                              close=setup.evaluator.close)

  runner.run_built(build_run, config, flags_text=fv.flags_into_string())
