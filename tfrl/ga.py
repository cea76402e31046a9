"""Deep GA (Such et al. 2017) on batched heterogeneous networks.

    python -m tfrl.ga --flagfile=flags/ga_pong.flags
    python -m tfrl.ga --env=CartPole-v1 --population=32 --generations=20
"""

from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl.neuroevolution import cli as ne_cli
from tfrl.neuroevolution import ga

FLAGS = flags.FLAGS
ne_cli.define_common_flags()
flagconfig.define(ga.GAConfig)


def main(argv):
  ne_cli.check_argv(argv)
  config = ne_cli.ga_config()
  ne_cli.main_for(lambda s: ga.GeneticAlgorithm(config, s.layout, s.table, s.evaluator))


if __name__ == "__main__":
  cli.run(main, "tfrl.ga")
