"""Random search: the deep GA with no selection (Such et al. 2017).

Every generation is a fresh random population; the elite is the best
individual seen, re-evaluated on `elite_episodes` episodes. It is the GA's
`GeneticAlgorithm` run with `GAConfig(random_search=True)` (`tfrl.ga`).

`python -m tfrl.random_search --env=CartPole-v1` (flags:
`tfrl/random_search/__main__.py`); from Python,
`run_loop.run(random_search.build(config))`.
"""

from typing import Callable, Optional

from tfrl.ga.config import GAConfig
from tfrl.neuroevolution import settings


def build(config: settings.NeuroevolutionConfig,
          print_fn: Optional[Callable[[str], None]] = None):
  """The random-search run of `config` (its `algorithm` a GAConfig with
  random_search=True) for `run_loop.run` (a `run_loop.Job`); `print_fn`: the
  console's (default: `runner.print_now`)."""
  if isinstance(config.algorithm, GAConfig) and not config.algorithm.random_search:
    raise ValueError("random search runs a GAConfig with random_search=True.")
  # Imported here: the entry point checks its flags before TensorFlow is loaded.
  from tfrl.ga.genetic_algorithm import GeneticAlgorithm  # pylint: disable=import-outside-toplevel
  from tfrl.neuroevolution import runner  # pylint: disable=import-outside-toplevel
  return runner.build(config, GeneticAlgorithm, print_fn or runner.print_now)


__all__ = ["build"]
