"""Uber-style accelerated neuroevolution: GA, ES and random search on batched
heterogeneous population networks (Such et al. 2017, 2018; Salimans et al. 2017).

Data flow: seed chains -> weights [P, ...] rebuilt from the shared noise table
-> per-slot network index -> masked heterogeneous batching op (running rows
only) -> actions -> batched env step -> returns -> selection / ES update.
"""

from tfrl.neuroevolution.checkpoint import load as load_checkpoint
from tfrl.neuroevolution.checkpoint import save as save_checkpoint
from tfrl.neuroevolution.es import ESConfig, EvolutionStrategy, centered_ranks, estimate_gradient
from tfrl.neuroevolution.evaluation import EvalResult, PipelinedEvaluator
from tfrl.neuroevolution.ga import GAConfig, GeneticAlgorithm
from tfrl.neuroevolution.genome import Genome, ParamBuilder
from tfrl.neuroevolution.noise import NoiseTable
from tfrl.neuroevolution.population_net import NetworkConfig, ParamLayout, PopulationNetwork
from tfrl.neuroevolution.single_network import SingleNetwork
from tfrl.neuroevolution.runner import RunConfig, build, export_elite, run
