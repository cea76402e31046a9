"""Uber-style accelerated neuroevolution: what GA, ES and random search
(`tfrl.ga`, `tfrl.es`, `tfrl.random_search`) share, on batched heterogeneous
population networks (Such et al. 2017, 2018; Salimans et al. 2017).

Data flow: seed chains -> weights [P, ...] rebuilt from the shared noise table
-> per-slot network index -> masked heterogeneous batching op (running rows
only) -> actions -> batched env step -> returns -> selection / ES update.

Here: the search's common part (`search.Search`), its run in the run skeleton
(`runner`), the typed config and flags (`settings`, `cli`), the evaluators
(local and Ray), genomes and the noise table, the population network and
observation normalization. This package imports none of the algorithms.
"""

import importlib

# Each name's (module, attribute), imported when the name is first asked for:
# the entry points parse and check their flags before TensorFlow is loaded.
_NAMES = {
    "EvalResult": ("evaluation", "EvalResult"),
    "Genome": ("genome", "Genome"),
    "NetworkConfig": ("population_net", "NetworkConfig"),
    "NeuroevolutionConfig": ("settings", "NeuroevolutionConfig"),
    "NoiseTable": ("noise", "NoiseTable"),
    "ParamBuilder": ("genome", "ParamBuilder"),
    "ParamLayout": ("population_net", "ParamLayout"),
    "PipelinedEvaluator": ("evaluation", "PipelinedEvaluator"),
    "PopulationNetwork": ("population_net", "PopulationNetwork"),
    "Search": ("search", "Search"),
    "SearchConfig": ("settings", "SearchConfig"),
    "SingleNetwork": ("single_network", "SingleNetwork"),
    "load_checkpoint": ("checkpoint", "load"),
    "save_checkpoint": ("checkpoint", "save"),
}

__all__ = [
    "EvalResult",
    "Genome",
    "NetworkConfig",
    "NeuroevolutionConfig",
    "NoiseTable",
    "ParamBuilder",
    "ParamLayout",
    "PipelinedEvaluator",
    "PopulationNetwork",
    "Search",
    "SearchConfig",
    "SingleNetwork",
    "load_checkpoint",
    "save_checkpoint",
]


def __getattr__(name):
  if name not in _NAMES:
    raise AttributeError(f"module 'tfrl.neuroevolution' has no attribute {name!r}")
  module, attribute = _NAMES[name]
  value = getattr(importlib.import_module(f"tfrl.neuroevolution.{module}"), attribute)
  globals()[name] = value
  return value
