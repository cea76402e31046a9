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

from tfrl.neuroevolution.checkpoint import load as load_checkpoint
from tfrl.neuroevolution.checkpoint import save as save_checkpoint
from tfrl.neuroevolution.evaluation import EvalResult, PipelinedEvaluator
from tfrl.neuroevolution.genome import Genome, ParamBuilder
from tfrl.neuroevolution.noise import NoiseTable
from tfrl.neuroevolution.population_net import NetworkConfig, ParamLayout, PopulationNetwork
from tfrl.neuroevolution.search import Search
from tfrl.neuroevolution.settings import NeuroevolutionConfig, SearchConfig
from tfrl.neuroevolution.single_network import SingleNetwork
