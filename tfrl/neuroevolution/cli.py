"""Flags shared by `python -m tfrl.ga`, `tfrl.es` and `tfrl.random_search`.

Each entry module calls `define_common_flags()` (and the layer flags) at import
time and defines its own algorithm flags; `main` turns them into typed
configs with the helpers below. Library code never reads FLAGS.
"""

import dataclasses
from typing import Optional

from absl import app
from absl import flags
import tensorflow as tf

from tfrl import flagconfig
from tfrl.layers import flags as layer_flags
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net
from tfrl.neuroevolution import ray_evaluator
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings as settings_lib
from tfrl.neuroevolution import worker as worker_lib


def define_common_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """The shared settings', layer and Ray flags (idempotent)."""
  flagconfig.define(settings_lib.Settings, fv=fv)
  layer_flags.define_layer_flags(fv)
  flagconfig.define(ray_evaluator.RayConfig, prefix="ray_", fv=fv)


def env_spec(fv: flags.FlagValues = flags.FLAGS) -> worker_lib.EnvSpec:
  return worker_lib.EnvSpec(game=fv.game, gym_id=fv.env,
                            sticky_actions=bool(fv.sticky_actions), seed=fv.seed)


def network_config(env, fv: flags.FlagValues = flags.FLAGS) -> population_net.NetworkConfig:
  arch = fv.arch
  if arch == "auto":
    arch = "mlp" if len(env.observation_shape) == 1 else "large"
  use_op = {"auto": None, "op": True, "reference": False}[fv.matmul]
  try:
    hidden = tuple(int(h) for h in fv.hidden)
  except ValueError:
    raise app.UsageError(f"--hidden takes int sizes separated by commas, got "
                         f"{','.join(fv.hidden)!r}.") from None
  return population_net.NetworkConfig(
      arch=arch, hidden=hidden,
      layer_plan=layer_flags.layer_plan_from_flags(fv), use_op=use_op,
      weight_dtype=fv.weight_dtype, conv_input_dtype=fv.conv_input_dtype)


def incremental_inference(config: population_net.NetworkConfig,
                          fv: flags.FlagValues = flags.FLAGS) -> bool:
  """Whether --inference asks for incremental inference of this network."""
  if fv.refresh_steps < 1:
    raise app.UsageError(f"--refresh_steps must be >= 1, got {fv.refresh_steps}.")
  conv = config.arch != "mlp"
  if fv.inference == "incremental" and config.conv_input_dtype != "float32":
    raise app.UsageError("--inference=incremental needs --conv_input_dtype=float32, got "
                         f"{config.conv_input_dtype}.")
  if fv.inference == "auto":
    return conv and config.conv_input_dtype == "float32"
  return fv.inference == "incremental"


@dataclasses.dataclass
class Setup:
  spec: worker_lib.WorkerSpec
  layout: population_net.ParamLayout
  table: noise_lib.NoiseTable
  evaluator: evaluators.Evaluator
  observation_spec: tf.TensorSpec


def worker_spec(capacity: int, fv: flags.FlagValues = flags.FLAGS,
                ray: Optional[ray_evaluator.RayConfig] = None):
  """The WorkerSpec of the flags (per Ray worker with `ray`), and the obs spec."""
  spec = env_spec(fv)
  probe = spec.make(1)  # the observation and action spaces, from a one-slot env
  try:
    if probe.num_actions is None:
      raise app.UsageError("neuroevolution needs a discrete action space.")
    observation_spec = tf.TensorSpec([None] + list(probe.observation_shape),
                                     getattr(probe, "observation_dtype", tf.uint8))
    config = network_config(probe, fv)
    spec = worker_lib.WorkerSpec(
        env=spec, network=config, observation_shape=tuple(probe.observation_shape),
        num_actions=int(probe.num_actions), noise_seed=fv.seed,
        noise_size=fv.noise_table_size, capacity=capacity,
        num_envs=(ray and ray.worker_envs) or fv.num_envs,
        slot_groups=(ray and ray.worker_slot_groups) or fv.slot_groups,
        episode_frame_cap=fv.episode_frame_cap or None,
        incremental=incremental_inference(config, fv), refresh_steps=fv.refresh_steps,
        cache_size=cache_size(fv))
  finally:
    probe.close()
  return spec, observation_spec


def ga_config(fv: flags.FlagValues = flags.FLAGS, random_search: bool = False):
  """The GAConfig of `tfrl.ga`'s flags, or of `tfrl.random_search`'s (which has no
  selection: no --truncation nor --mutation_power)."""
  from tfrl.neuroevolution import ga  # pylint: disable=import-outside-toplevel
  return flagconfig.build(
      ga.GAConfig, fv=fv, exclude=ga.SELECTION_FIELDS if random_search else (),
      population=fv.population, episodes_per_eval=fv.episodes_per_eval, seed=fv.seed,
      random_search=random_search,
      truncation=1 if random_search else min(fv.truncation, fv.population),
      elite_candidates=min(fv.elite_candidates, fv.population))


def cache_size(fv: flags.FlagValues = flags.FLAGS) -> int:
  """Chains a parent cache keeps: the parents, the elite candidates, the elite."""
  names = ("truncation", "elite_candidates")
  return sum(getattr(fv, n) for n in names if n in fv) + 2


def ray_config(fv: flags.FlagValues = flags.FLAGS) -> Optional[ray_evaluator.RayConfig]:
  """The RayConfig of the --ray_* flags, or None without --ray_address."""
  if not fv.ray_address:
    return None
  return flagconfig.build(ray_evaluator.RayConfig, prefix="ray_", fv=fv)


def build(capacity: int, fv: flags.FlagValues = flags.FLAGS,
          log=print) -> Setup:
  """Layout, noise table and evaluator (local, or on Ray) from flags."""
  ray = ray_config(fv)
  spec, observation_spec = worker_spec(capacity, fv, ray)
  layout = spec.layout()
  table = noise_lib.NoiseTable(fv.seed, fv.noise_table_size)
  if ray is None:
    evaluator = worker_lib.build_local(spec, table)
  else:
    evaluator = ray_evaluator.RayEvaluator(spec, ray, table, log=log)
  return Setup(spec, layout, table, evaluator, observation_spec)


def run_config(fv: flags.FlagValues = flags.FLAGS) -> runner.RunConfig:
  # The env a checkpoint was trained on is part of what a resume must match.
  identity = {"game": None if fv.env else fv.game, "env": fv.env or None}
  return runner.RunConfig(
      logdir=fv.logdir, generations=fv.generations, max_frames=fv.max_frames,
      resume=fv.resume, export=fv.export, export_every=fv.export_every,
      target_score=fv.target_score, identity=identity)


def check_argv(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")


def main_for(make_algorithm, fv: flags.FlagValues = flags.FLAGS) -> None:
  """Shared body of the entry points' main: build and run in the run skeleton."""
  log = lambda line: print(line, flush=True)
  config = run_config(fv)

  def build_run() -> runner.Generations:
    # Once the logdir is locked and its checkpoint accepted (tfrl.run_loop):
    # a fresh run over a checkpoint, or an unreadable one, never starts Ray workers.
    setup = build(fv.population, fv, log=log)
    try:
      algorithm = make_algorithm(setup)
      print(f"[{algorithm.name}] {setup.layout.describe()} | population {fv.population} | "
            f"{setup.evaluator.describe()} | "
            f"{'incremental' if setup.spec.incremental else 'full'} inference", flush=True)
    except BaseException:
      setup.evaluator.close()
      raise
    return runner.Generations(algorithm, config, setup.observation_spec, print_fn=log,
                              close=setup.evaluator.close)

  runner.run_built(build_run, config, flags_text=fv.flags_into_string())
