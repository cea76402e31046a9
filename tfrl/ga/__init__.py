"""Deep GA (Such et al. 2017) on batched heterogeneous population networks.

`python -m tfrl.ga --env=CartPole-v1` (flags: `tfrl/ga/__main__.py`); from
Python, `run_loop.run(ga.build(config))` with a `NeuroevolutionConfig` whose
`algorithm` is a `GAConfig`. The generation: `tfrl/ga/genetic_algorithm.py`;
what it shares with ES and random search: `tfrl/neuroevolution/`.
"""

from typing import Callable

from tfrl import run_loop
from tfrl.ga.genetic_algorithm import GAConfig
from tfrl.ga.genetic_algorithm import GeneticAlgorithm
from tfrl.ga.genetic_algorithm import SELECTION_FIELDS
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings


def build(config: settings.NeuroevolutionConfig,
          print_fn: Callable[[str], None] = runner.print_now) -> run_loop.Job:
  """The GA run of `config` for `run_loop.run`."""
  if isinstance(config.algorithm, GAConfig) and config.algorithm.random_search:
    raise ValueError("a GAConfig with random_search=True is random search: "
                     "tfrl.random_search.build runs it.")
  return runner.build(config, GeneticAlgorithm, print_fn)


__all__ = ["GAConfig", "GeneticAlgorithm", "SELECTION_FIELDS", "build"]
