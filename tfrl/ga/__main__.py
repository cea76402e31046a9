"""Deep GA (Such et al. 2017) on batched heterogeneous networks.

    python -m tfrl.ga --flagfile=flags/ga_pong.flags
    python -m tfrl.ga --env=CartPole-v1 --population=32 --generations=20
"""

from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl import ga
from tfrl.neuroevolution import cli as ne_cli

FLAGS = flags.FLAGS
ne_cli.define_flags(ga.GAConfig)


def config_from_flags(fv: flags.FlagValues = FLAGS) -> ne_cli.NeuroevolutionConfig:
  return ne_cli.config_from_flags(flagconfig.build(ga.GAConfig, fv=fv), fv)


def main(argv):
  ne_cli.check_argv(argv)
  config = config_from_flags()
  # The flags parsed, before TensorFlow's import adds its own (their file replays).
  flags_text = FLAGS.flags_into_string()
  from tfrl import run_loop  # pylint: disable=import-outside-toplevel
  run_loop.run(ga.build(config), flags_text=flags_text)


if __name__ == "__main__":
  cli.run(main, "tfrl.ga")
