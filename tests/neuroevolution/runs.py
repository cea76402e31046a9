"""GA, ES and random-search runs for tests, made the one way the entry points
make them: `run_loop.run(<algorithm>.build(config))`, in the test's logdir.

    summary, generations = runs.run(ga.build(runs.config(ga_config, logdir)))
    generations.history   # each generation's metrics
    generations.search    # the GeneticAlgorithm / EvolutionStrategy it ran

The evaluator is closed when the run ends, as in the entry points: a test
that compares two runs runs both.
"""

from typing import Any, Callable, Dict, Optional, Tuple

from tfrl import run_loop
from tfrl.envs import EnvProtocol
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings

CARTPOLE = EnvProtocol(env="CartPole-v1")


def config(algorithm: settings.SearchConfig, logdir: str, env: EnvProtocol = CARTPOLE,
           network: Optional[settings.NetworkSettings] = None,
           evaluator: Optional[settings.EvaluatorSettings] = None,
           layer_plan: Any = None, **run: Any) -> settings.NeuroevolutionConfig:
  """A run of `algorithm` on `env` (CartPole by default: an 8-unit mlp, 16 env
  slots in 2 groups, a small noise table), no export unless `run` says so;
  `run` holds `settings.RunSettings` fields (generations, resume, ...)."""
  run = {"export": False, **run}
  return settings.NeuroevolutionConfig(
      env=env, network=network or settings.NetworkSettings(arch="mlp", hidden=(8,)),
      evaluator=evaluator or settings.EvaluatorSettings(num_envs=16, slot_groups=2,
                                                        noise_table_size=100_000),
      run=settings.RunSettings(logdir=logdir, **run), algorithm=algorithm,
      layer_plan=layer_plan)


def run(job: run_loop.Job, made: Optional[Callable[[runner.Generations], None]] = None
        ) -> Tuple[Dict[str, Any], runner.Generations]:
  """`run_loop.run(job)`: its summary and the `runner.Generations` it ran.
  `made(generations)`, if given, is called once the run has made it (before
  a resume restores it and its first generation)."""
  kept = []

  def keep(generations: runner.Generations) -> None:
    kept.append(generations)
    if made is not None:
      made(generations)

  summary = run_loop.run(job.then(keep))
  return summary, kept[0]
