"""Random search: the deep GA with no selection (Such et al. 2017).

Every generation is a fresh random population; the elite is the best
individual seen, re-evaluated on --elite_episodes episodes.

    python -m tfrl.random_search --flagfile=flags/random_search_pong.flags
"""

from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl import ga
from tfrl import random_search
from tfrl.neuroevolution import cli as ne_cli

FLAGS = flags.FLAGS
ne_cli.define_flags(ga.GAConfig, exclude=ga.SELECTION_FIELDS)  # no selection


def config_from_flags(fv: flags.FlagValues = FLAGS) -> ne_cli.NeuroevolutionConfig:
  algorithm = flagconfig.build(ga.GAConfig, fv=fv, exclude=ga.SELECTION_FIELDS,
                               random_search=True)
  return ne_cli.config_from_flags(algorithm, fv)


def main(argv):
  ne_cli.check_argv(argv)
  config = config_from_flags()
  # The flags parsed, before TensorFlow's import adds its own (their file replays).
  flags_text = FLAGS.flags_into_string()
  from tfrl import run_loop  # pylint: disable=import-outside-toplevel
  run_loop.run(random_search.build(config), flags_text=flags_text)


if __name__ == "__main__":
  cli.run(main, "tfrl.random_search")
