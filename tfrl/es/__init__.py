"""OpenAI-ES (Salimans et al. 2017) on batched heterogeneous population networks.

`python -m tfrl.es --env=CartPole-v1` (flags: `tfrl/es/__main__.py`); from
Python, `run_loop.run(es.build(config))` with a `NeuroevolutionConfig` whose
`algorithm` is an `ESConfig`. The generation and the gradient estimate:
`tfrl/es/evolution_strategy.py`; virtual batch norm:
`tfrl/es/virtual_batch_norm.py`; what ES shares with the GA and random
search: `tfrl/neuroevolution/`.
"""

from typing import Callable, Optional

from tfrl import lazy_names
from tfrl.es.config import ESConfig
from tfrl.es.config import VBNConfig
from tfrl.neuroevolution import settings

# Imported when first asked for (they need TensorFlow): the entry point reads
# the configs above before it is loaded.
_MODULES = {"EvolutionStrategy": "evolution_strategy", "centered_ranks": "evolution_strategy",
            "estimate_gradient": "evolution_strategy"}


def build(config: settings.NeuroevolutionConfig,
          print_fn: Optional[Callable[[str], None]] = None):
  """The ES run of `config` for `run_loop.run` (a `run_loop.Job`); `print_fn`:
  the console's (default: `runner.print_now`)."""
  from tfrl.neuroevolution import runner  # pylint: disable=import-outside-toplevel
  return runner.build(config, __getattr__("EvolutionStrategy"), print_fn or runner.print_now)


__all__ = ["ESConfig", "EvolutionStrategy", "VBNConfig", "build", "centered_ranks",
           "estimate_gradient"]

__getattr__ = lazy_names.getattr_of(__name__, _MODULES)
