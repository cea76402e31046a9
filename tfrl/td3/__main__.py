"""`python -m tfrl.td3 --env=Pendulum-v1 --logdir=/tmp/td3` (flags below and
the shared layer flags of `tfrl.layers.flags`; presets in `flags/td3_*.flags`)."""

import json

from absl import app
from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl.layers import flags as layer_flags
from tfrl.td3 import config as config_lib
from tfrl.td3 import loop as train_lib

flagconfig.define(config_lib.TD3Config)
flagconfig.define(config_lib.RunOptions)
layer_flags.define_layer_flags()

FLAGS = flags.FLAGS


def config_from_flags(fv=FLAGS) -> config_lib.TD3Config:
  return flagconfig.build(config_lib.TD3Config, fv=fv)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  config = config_from_flags()
  run = flagconfig.build(config_lib.RunOptions)
  plan = layer_flags.layer_plan_from_flags(FLAGS)
  reward_config = layer_flags.reward_aware_config_from_flags(FLAGS)
  summary = train_lib.train(config, plan, reward_config, run.logdir, resume=run.resume,
                            export=run.export, resume_without_replay=run.resume_without_replay,
                            flags_text=FLAGS.flags_into_string())
  summary = {k: v for k, v in summary.items() if k != "layers"}
  print(json.dumps(summary))


if __name__ == "__main__":
  cli.run(main, "tfrl.td3")
