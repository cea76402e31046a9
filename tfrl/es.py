"""OpenAI-ES (Salimans et al. 2017) on batched heterogeneous networks.

    python -m tfrl.es --flagfile=flags/es_pong.flags
    python -m tfrl.es --env=CartPole-v1 --population=32 --generations=20
"""

from absl import app
from absl import flags

from tfrl.neuroevolution import cli
from tfrl.neuroevolution import es

FLAGS = flags.FLAGS
cli.define_common_flags()
flags.DEFINE_float("sigma", 0.02, "Perturbation scale.")
flags.DEFINE_float("learning_rate", 0.01, "Adam step size.")
flags.DEFINE_float("l2", 0.005, "L2 weight decay coefficient.")
flags.DEFINE_integer("center_episodes", 5, "Episodes of the centre's evaluation (elite score).")
flags.DEFINE_boolean("fitness_shaping", True, "Centered ranks instead of raw returns.")


def main(argv):
  cli.check_argv(argv)
  if FLAGS.population % 2:
    raise app.UsageError(f"--population must be even for mirrored sampling, got "
                         f"{FLAGS.population}.")
  config = es.ESConfig(
      population=FLAGS.population, sigma=FLAGS.sigma, learning_rate=FLAGS.learning_rate,
      l2=FLAGS.l2, episodes_per_eval=FLAGS.episodes_per_eval,
      center_episodes=FLAGS.center_episodes, fitness_shaping=FLAGS.fitness_shaping,
      seed=FLAGS.seed)
  cli.main_for(lambda s: es.EvolutionStrategy(config, s.layout, s.table, s.network,
                                              s.evaluator))


if __name__ == "__main__":
  app.run(main)
