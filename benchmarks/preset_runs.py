"""A neuroevolution preset's algorithm built as its entry point builds it, for benchmarks.

    kind, config = preset_runs.config("ga_frostbite_small", ["population=64"])
    setup, algorithm = preset_runs.build(config)         # local, or Ray per config.ray
    metrics = algorithm.step()                           # one whole generation
    setup.evaluator.close()

`config` parses the preset's flags (and `extra`, written without the leading
`--`) into the run's typed `NeuroevolutionConfig`, exactly as `python -m
tfrl.ga --preset=...` would; `build` makes its layout, noise table, evaluator
and GA / ES / random search from the run's seed, as the entry point's
`build(config)` does (`runner.build_search`).
"""

from absl import app
from absl import flags

from tfrl import es
from tfrl import flagconfig
from tfrl import ga
from tfrl import presets
from tfrl.neuroevolution import cli as ne_cli
from tfrl.neuroevolution import runner

KINDS = {"tfrl.es": "es", "tfrl.ga": "ga", "tfrl.random_search": "random_search"}


def config(preset: str, extra=()):
  """(kind, NeuroevolutionConfig) of `preset` plus the flags `extra`."""
  prog = presets.entry_point(preset)
  kind = KINDS.get(prog)
  if kind is None:
    raise app.UsageError(f"--preset={preset} is not a GA, ES or random-search preset.")
  cls = es.ESConfig if kind == "es" else ga.GAConfig
  exclude = ga.SELECTION_FIELDS if kind == "random_search" else ()
  fv = flags.FlagValues()
  ne_cli.define_flags(cls, fv, exclude=exclude)
  fv(presets.expand(["prog", f"--preset={preset}", *[f"--{f}" for f in extra]], prog))
  overrides = {"random_search": True} if kind == "random_search" else {}
  algorithm = flagconfig.build(cls, fv=fv, exclude=exclude, **overrides)
  return kind, ne_cli.config_from_flags(algorithm, fv)


def build(run_config):
  """(setup, algorithm): the run's evaluator and its GA / ES / random search."""
  search_cls = (es.EvolutionStrategy if isinstance(run_config.algorithm, es.ESConfig)
                else ga.GeneticAlgorithm)
  return runner.build_search(run_config, search_cls, log=lambda line: None)
