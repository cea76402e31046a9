"""A TD3 preset's config as `python -m tfrl.td3` builds it, and what a peer must match.

Shared by benchmarks/td3_throughput.py and benchmarks/race_td3.py; defines no
flags of the process (the preset is parsed on flag values of its own).
"""

from absl import app
from absl import flags


def td3_config(preset: str, extra):
  """The TD3Config of `preset` plus the flags `extra` (without the leading --),
  parsed as the entry point parses them, on flag values of its own."""
  # pylint: disable=import-outside-toplevel
  from tfrl import flagconfig
  from tfrl import presets
  from tfrl.layers import flags as layer_flags
  from tfrl.td3 import config as config_lib
  if presets.entry_point(preset) != "tfrl.td3":
    raise app.UsageError(f"--preset={preset} is not a TD3 preset: "
                         f"{', '.join(presets.names('tfrl.td3'))}.")
  fv = flags.FlagValues()
  flagconfig.define(config_lib.TD3Config, fv=fv)
  layer_flags.define_layer_flags(fv)
  fv(presets.expand(["prog", f"--preset={preset}", *[f"--{f}" for f in extra]], "tfrl.td3"))
  layers = layer_flags.layer_flags(fv)
  return flagconfig.build(config_lib.TD3Config, fv=fv, layer_plan=layers.plan(),
                          reward_aware=layers.reward_aware())


def settings(config) -> dict:
  """What a peer must match, and how tfrl ran."""
  from tfrl.envs import protocol as protocol_lib  # pylint: disable=import-outside-toplevel
  return {"env": config.protocol.env,
          "env_implementation": protocol_lib.implementation(config.protocol),
          "hidden_sizes": list(config.hidden_sizes), "batch_size": config.batch_size,
          "update_every": config.update_every, "updates_per_env_step": 1,
          "replay_size": config.replay_size, "policy_delay": config.policy_delay,
          "dense_layer_plan": repr(config.layer_plan)}


def pruning_settings(preset: str) -> dict:
  """What a peer's TD3 with pruning must match of `preset`, as the entry point
  builds it: the env, the default layer's pruning schedule and the TD3 sizes."""
  config = td3_config(preset, [])
  spec = config.layer_plan.default
  return {"env": config.protocol.env, "target_sparsity": spec.target_sparsity,
          "pruning_begin": spec.begin_step, "pruning_end": spec.end_step,
          "pruning_frequency": spec.frequency, "learning_starts": config.start_steps,
          "batch_size": config.batch_size,
          "hidden": ",".join(str(h) for h in config.hidden_sizes)}
