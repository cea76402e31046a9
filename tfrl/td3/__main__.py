"""`python -m tfrl.td3 --env=Pendulum-v1 --logdir=/tmp/td3` (flags below and
the shared layer flags of `tfrl.layers.flags`; presets in `flags/td3_*.flags`)."""

import json

from absl import app
from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl.layers import flags as layer_flags
from tfrl.td3 import config as config_lib

flagconfig.define(config_lib.TD3Config)
layer_flags.define_layer_flags()

FLAGS = flags.FLAGS


def config_from_flags(fv=FLAGS) -> config_lib.TD3Config:
  """The TD3Config of the flags (the layer flags give its layer plan and controller)."""
  layers = layer_flags.layer_flags(fv)
  return flagconfig.build(config_lib.TD3Config, fv=fv, layer_plan=layers.plan(),
                          reward_aware=layers.reward_aware())


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  config = config_from_flags()
  # The flags parsed, before TensorFlow's import adds its own (their file replays).
  flags_text = FLAGS.flags_into_string()
  # Imported once the flags are checked: a bad flag is answered without
  # TensorFlow's import (seconds).
  from tfrl import run_loop  # pylint: disable=import-outside-toplevel
  from tfrl.td3 import loop  # pylint: disable=import-outside-toplevel
  summary = run_loop.run(loop.build(config), flags_text=flags_text)
  summary = {k: v for k, v in summary.items() if k != "layers"}
  print(json.dumps(summary))


if __name__ == "__main__":
  cli.run(main, "tfrl.td3")
