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

from tfrl import lazy_names

# Each name's module, imported when the name is first asked for:
# the entry points parse and check their flags before TensorFlow is loaded.
_MODULES = {
    "EvalResult": "evaluation",
    "Genome": "genome",
    "NetworkConfig": "population_net",
    "NeuroevolutionConfig": "settings",
    "NoiseTable": "noise",
    "ParamBuilder": "genome",
    "ParamLayout": "population_net",
    "PipelinedEvaluator": "evaluation",
    "PopulationNetwork": "population_net",
    "Search": "search",
    "SearchConfig": "settings",
    "SingleNetwork": "single_network",
    "load_checkpoint": "checkpoint:load",
    "save_checkpoint": "checkpoint:save",
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

__getattr__ = lazy_names.getattr_of(__name__, _MODULES)
