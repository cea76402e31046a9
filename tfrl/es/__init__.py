"""OpenAI-ES (Salimans et al. 2017) on batched heterogeneous population networks.

`python -m tfrl.es --env=CartPole-v1` (flags: `tfrl/es/__main__.py`); from
Python, `run_loop.run(es.build(config))` with a `NeuroevolutionConfig` whose
`algorithm` is an `ESConfig`. The generation and the gradient estimate:
`tfrl/es/evolution_strategy.py`; virtual batch norm:
`tfrl/es/virtual_batch_norm.py`; what ES shares with the GA and random
search: `tfrl/neuroevolution/`.
"""

from typing import Callable

from tfrl import run_loop
from tfrl.es.evolution_strategy import ESConfig
from tfrl.es.evolution_strategy import EvolutionStrategy
from tfrl.es.evolution_strategy import centered_ranks
from tfrl.es.evolution_strategy import estimate_gradient
from tfrl.es.virtual_batch_norm import VBNConfig
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings


def build(config: settings.NeuroevolutionConfig,
          print_fn: Callable[[str], None] = runner.print_now) -> run_loop.Job:
  """The ES run of `config` for `run_loop.run`."""
  return runner.build(config, EvolutionStrategy, print_fn)


__all__ = ["ESConfig", "EvolutionStrategy", "VBNConfig", "build", "centered_ranks",
           "estimate_gradient"]
