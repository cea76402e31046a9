"""Random search: the deep GA with no selection (Such et al. 2017).

Every generation is a fresh random population; the elite is the best
individual seen, re-evaluated on `elite_episodes` episodes. It is the GA's
`GeneticAlgorithm` run with `GAConfig(random_search=True)` (`tfrl.ga`).

`python -m tfrl.random_search --env=CartPole-v1` (flags:
`tfrl/random_search/__main__.py`); from Python,
`run_loop.run(random_search.build(config))`.
"""

from typing import Callable

from tfrl import run_loop
from tfrl.ga import GAConfig
from tfrl.ga import GeneticAlgorithm
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings


def build(config: settings.NeuroevolutionConfig,
          print_fn: Callable[[str], None] = runner.print_now) -> run_loop.Job:
  """The random-search run of `config` (its `algorithm` a GAConfig with
  random_search=True) for `run_loop.run`."""
  if isinstance(config.algorithm, GAConfig) and not config.algorithm.random_search:
    raise ValueError("random search runs a GAConfig with random_search=True.")
  return runner.build(config, GeneticAlgorithm, print_fn)


__all__ = ["build"]
