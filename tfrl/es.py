"""OpenAI-ES (Salimans et al. 2017) on batched heterogeneous networks.

    python -m tfrl.es --flagfile=flags/es_pong.flags
    python -m tfrl.es --env=CartPole-v1 --population=32 --generations=20
    python -m tfrl.es --flagfile=flags/es_pong.flags --virtual_batch_norm
"""

from absl import app
from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import cli as ne_cli
from tfrl.neuroevolution import es
from tfrl.neuroevolution import vbn

FLAGS = flags.FLAGS
ne_cli.define_flags(es.ESConfig)
flagconfig.define(vbn.VBNConfig, prefix="vbn_")
# A switch rather than a setting: it turns VBNConfig (the --vbn_* flags) on.
flags.DEFINE_boolean("virtual_batch_norm", False,
                     "Virtual batch norm (Salimans et al. 2017): normalize every hidden "
                     "layer of every evaluated network by its own statistics on a fixed "
                     "reference batch from random play, collected once per run.")


def config_from_flags(fv: flags.FlagValues = FLAGS) -> ne_cli.NeuroevolutionConfig:
  vbn_config = (flagconfig.build(vbn.VBNConfig, prefix="vbn_", fv=fv)
                if fv.virtual_batch_norm else None)
  return ne_cli.config_from_flags(flagconfig.build(es.ESConfig, fv=fv, vbn=vbn_config), fv)


def _check_resume(config: ne_cli.NeuroevolutionConfig) -> None:
  """A resume keeps the checkpoint's virtual batch norm (before anything starts)."""
  logdir = config.run.logdir
  if not (config.run.resume and checkpoint.exists(logdir)):
    return
  saved = bool(checkpoint.load(logdir)[0].get("virtual_batch_norm", False))
  if saved != (config.algorithm.vbn is not None):
    raise app.UsageError(
        f"the checkpoint in {logdir} was trained {'with' if saved else 'without'} "
        f"virtual batch norm; resume it with --{'' if saved else 'no'}virtual_batch_norm.")


def main(argv):
  ne_cli.check_argv(argv)
  config = config_from_flags()
  _check_resume(config)
  ne_cli.main_for(
      lambda s: es.EvolutionStrategy(config.algorithm, s.layout, s.table, s.evaluator),
      config)


if __name__ == "__main__":
  cli.run(main, "tfrl.es")
