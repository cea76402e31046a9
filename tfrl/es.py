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
ne_cli.define_common_flags()
flagconfig.define(es.ESConfig)
flagconfig.define(vbn.VBNConfig, prefix="vbn_")
# A switch rather than a setting: it turns VBNConfig (the --vbn_* flags) on.
flags.DEFINE_boolean("virtual_batch_norm", False,
                     "Virtual batch norm (Salimans et al. 2017): normalize every hidden "
                     "layer of every evaluated network by its own statistics on a fixed "
                     "reference batch from random play, collected once per run.")


def main(argv):
  ne_cli.check_argv(argv)
  if FLAGS.population % 2:
    raise app.UsageError(f"--population must be even for mirrored sampling, got "
                         f"{FLAGS.population}.")
  if FLAGS.virtual_batch_norm and FLAGS.ray_address:
    raise app.UsageError("--virtual_batch_norm is not supported with --ray_address yet "
                         "(it runs in the local evaluator only).")
  if FLAGS.virtual_batch_norm and FLAGS.vbn_reference_size < 2:
    raise app.UsageError(f"--vbn_reference_size must be >= 2, got "
                         f"{FLAGS.vbn_reference_size}.")
  if FLAGS.resume and checkpoint.exists(FLAGS.logdir):
    saved = bool(checkpoint.load(FLAGS.logdir)[0].get("virtual_batch_norm", False))
    if saved != FLAGS.virtual_batch_norm:
      raise app.UsageError(
          f"the checkpoint in {FLAGS.logdir} was trained {'with' if saved else 'without'} "
          f"virtual batch norm; resume it with --{'' if saved else 'no'}virtual_batch_norm.")
  vbn_config = (flagconfig.build(vbn.VBNConfig, prefix="vbn_")
                if FLAGS.virtual_batch_norm else None)
  config = flagconfig.build(
      es.ESConfig, population=FLAGS.population, episodes_per_eval=FLAGS.episodes_per_eval,
      seed=FLAGS.seed, vbn=vbn_config)
  ne_cli.main_for(lambda s: es.EvolutionStrategy(config, s.layout, s.table, s.evaluator))


if __name__ == "__main__":
  cli.run(main, "tfrl.es")
