"""Flags of `python -m tfrl.ga`, `tfrl.es` and `tfrl.random_search`.

Each entry module (`tfrl/<algorithm>/__main__.py`) calls
`define_flags(<its algorithm config>)` at import time and, in `main`,
`config_from_flags(algorithm)`: one typed `settings.NeuroevolutionConfig` (env
protocol, network, evaluator, run, Ray, algorithm, layer plan), which it runs
as `run_loop.run(<algorithm>.build(config))`. Library code never reads FLAGS.
"""

from absl import app
from absl import flags

from tfrl import flagconfig
from tfrl.layers import distribution
from tfrl.layers import flags as layer_flags
from tfrl.neuroevolution import settings as settings_lib

NeuroevolutionConfig = settings_lib.NeuroevolutionConfig


def define_flags(algorithm_cls, fv: flags.FlagValues = flags.FLAGS,
                 exclude=()) -> None:
  """The run's flags, the layer flags and those of `algorithm_cls` (GAConfig or
  ESConfig) but for the fields in `exclude` (idempotent)."""
  flagconfig.define(NeuroevolutionConfig, fv=fv)
  layer_flags.define_layer_flags(fv)
  flagconfig.define(algorithm_cls, fv=fv, exclude=exclude)


def config_from_flags(algorithm: settings_lib.SearchConfig,
                      fv: flags.FlagValues = flags.FLAGS) -> NeuroevolutionConfig:
  """The run's config of the flags and the entry point's algorithm config
  (ValueError, one line, for values its parts refuse)."""
  plan = layer_flags.layer_plan_from_flags(fv)
  distribution.require_uniform(plan, "neuroevolution")
  return flagconfig.build(NeuroevolutionConfig, fv=fv, algorithm=algorithm, layer_plan=plan)


def check_argv(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
