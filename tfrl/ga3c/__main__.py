"""GA3C training: `python -m tfrl.ga3c --game=PongNoFrameskip-v4`.

Presets: `--flagfile=flags/ga3c_pong.flags`, `--flagfile=flags/ga3c_cartpole.flags`.
Layer variants: `--dense_layer=circulant` etc. (tfrl.layers.flags).
The flags of a run are written to `<logdir>/flags.txt`; replay a run with
`--flagfile=<logdir>/flags.txt`. Ctrl-C or SIGTERM stops cleanly with a final
checkpoint and SavedModel (`<logdir>/saved_model`).
"""

from absl import app
from absl import flags

from tfrl import cli
from tfrl import flagconfig
from tfrl.ga3c.config import GA3CConfig
from tfrl.layers import distribution
from tfrl.layers import flags as layer_flags

flagconfig.define(GA3CConfig)
layer_flags.define_layer_flags()


def config_from_flags(fv: flags.FlagValues = flags.FLAGS) -> GA3CConfig:
  """The GA3CConfig of the flags (the layer flags give its layer plan)."""
  try:
    plan = layer_flags.layer_plan_from_flags(fv)
    distribution.require_uniform(plan, "GA3C")
    return flagconfig.build(
        GA3CConfig, fv=fv,
        layer_plan=plan,
        reward_aware=layer_flags.reward_aware_config_from_flags(fv))
  except ValueError as e:
    raise app.UsageError(str(e))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  config = config_from_flags()
  # The flags parsed, before TensorFlow's import adds its own (their file replays).
  flags_text = flags.FLAGS.flags_into_string()
  # Imported once the flags are checked: a bad flag is answered without
  # TensorFlow's import (seconds).
  from tfrl import run_loop  # pylint: disable=import-outside-toplevel
  from tfrl.ga3c import system  # pylint: disable=import-outside-toplevel
  run_loop.run(system.build(config), flags_text=flags_text)


if __name__ == "__main__":
  cli.run(main, "tfrl.ga3c")
