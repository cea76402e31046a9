"""Deep GA (Such et al. 2017) on batched heterogeneous population networks.

`python -m tfrl.ga --env=CartPole-v1` (flags: `tfrl/ga/__main__.py`); from
Python, `run_loop.run(ga.build(config))` with a `NeuroevolutionConfig` whose
`algorithm` is a `GAConfig`. The generation: `tfrl/ga/genetic_algorithm.py`;
what it shares with ES and random search: `tfrl/neuroevolution/`.
"""

from typing import Callable, Optional

from tfrl import lazy_names
from tfrl.ga.config import GAConfig
from tfrl.ga.config import SELECTION_FIELDS
from tfrl.neuroevolution import settings


def build(config: settings.NeuroevolutionConfig,
          print_fn: Optional[Callable[[str], None]] = None):
  """The GA run of `config` for `run_loop.run` (a `run_loop.Job`); `print_fn`:
  the console's (default: `runner.print_now`)."""
  if isinstance(config.algorithm, GAConfig) and config.algorithm.random_search:
    raise ValueError("a GAConfig with random_search=True is random search: "
                     "tfrl.random_search.build runs it.")
  # Imported here, as the algorithm itself below: the package's configs are
  # read by the entry points before TensorFlow is loaded.
  from tfrl.neuroevolution import runner  # pylint: disable=import-outside-toplevel
  return runner.build(config, __getattr__("GeneticAlgorithm"), print_fn or runner.print_now)


__all__ = ["GAConfig", "GeneticAlgorithm", "SELECTION_FIELDS", "build"]

# The algorithm needs TensorFlow: imported when first asked for.
__getattr__ = lazy_names.getattr_of(__name__, {"GeneticAlgorithm": "genetic_algorithm"})
