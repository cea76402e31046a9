"""OpenAI-ES (Salimans et al. 2017) on batched heterogeneous networks.

    python -m tfrl.es --flagfile=flags/es_pong.flags
    python -m tfrl.es --env=CartPole-v1 --population=32 --generations=20
    python -m tfrl.es --flagfile=flags/es_pong.flags --virtual_batch_norm
"""

from absl import flags

from tfrl import cli
from tfrl import es
from tfrl import flagconfig
from tfrl.neuroevolution import cli as ne_cli

FLAGS = flags.FLAGS
ne_cli.define_flags(es.ESConfig)
flagconfig.define(es.VBNConfig, prefix="vbn_")
# A switch rather than a setting: it turns VBNConfig (the --vbn_* flags) on.
flags.DEFINE_boolean("virtual_batch_norm", False,
                     "Virtual batch norm (Salimans et al. 2017): normalize every hidden "
                     "layer of every evaluated network by its own statistics on a fixed "
                     "reference batch from random play, collected once per run.")


def config_from_flags(fv: flags.FlagValues = FLAGS) -> ne_cli.NeuroevolutionConfig:
  vbn_config = (flagconfig.build(es.VBNConfig, prefix="vbn_", fv=fv)
                if fv.virtual_batch_norm else None)
  return ne_cli.config_from_flags(flagconfig.build(es.ESConfig, fv=fv, vbn=vbn_config), fv)


def main(argv):
  ne_cli.check_argv(argv)
  config = config_from_flags()
  # The flags parsed, before TensorFlow's import adds its own (their file replays).
  flags_text = FLAGS.flags_into_string()
  from tfrl import run_loop  # pylint: disable=import-outside-toplevel
  run_loop.run(es.build(config), flags_text=flags_text)


if __name__ == "__main__":
  cli.run(main, "tfrl.es")
