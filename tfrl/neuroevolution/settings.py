"""The settings GA, ES and random search share, one flag per field.

`cli.define_common_flags` generates `--game`, `--population`, ... from these
fields (name, default and help written once, `tfrl/flagconfig.py`); the
algorithms' own settings are fields of `GAConfig` and `ESConfig`.
"""

import dataclasses
from typing import Optional, Tuple

from tfrl import flagconfig
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net


@dataclasses.dataclass(frozen=True)
class Settings:
  """Environment, network, budget and output of a neuroevolution run."""

  game: str = flagconfig.field("pong", "Atari game (AtariEnv, the compiled ALE ops).")
  env: str = flagconfig.field(
      "", "A gymnasium env id (e.g. CartPole-v1); overrides --game.")
  arch: str = flagconfig.field(
      "auto", "Population network: mlp, small (16/32/256), large (Nature "
      "32/64/64/512); auto = mlp for vector obs, large for Atari.",
      choices=("auto",) + tuple(population_net.ARCHS))
  hidden: Tuple[int, ...] = flagconfig.field((64, 64), "Hidden sizes of the mlp arch.")
  population: int = flagconfig.field(64, "Individuals per generation.")
  generations: int = flagconfig.field(100, "Generations to run (total, with --resume).")
  max_frames: int = flagconfig.field(0, "Stop after this many frames (0: no limit).")
  episodes_per_eval: int = flagconfig.field(1, "Episodes per individual per generation.")
  episode_frame_cap: int = flagconfig.field(
      0, "End an evaluation episode after this many frames (0: none).")
  seed: int = flagconfig.field(0, "Seed of the algorithm (and of the noise table).")
  noise_table_size: int = flagconfig.field(noise_lib.DEFAULT_SIZE,
                                           "Floats in the shared noise table.")
  num_envs: int = flagconfig.field(32, "Env slots (split over --slot_groups).")
  slot_groups: int = flagconfig.field(2, "Slot groups pipelined against each other.")
  logdir: str = flagconfig.field(
      "/tmp/tfrl_neuroevolution",
      "Where TensorBoard scalars, checkpoints, the flags and the elite go.")
  resume: bool = flagconfig.field(False, "Resume from the checkpoint in --logdir.")
  export: bool = flagconfig.field(True, "Export the elite SavedModel to <logdir>/elite.")
  export_every: int = flagconfig.field(
      0, "Also export every N generations (0: at the end).")
  target_score: Optional[float] = flagconfig.field(
      None, "Stop once the elite's score reaches this.")
  matmul: str = flagconfig.field(
      "auto", "auto: the compiled population op when built; op: require it; "
      "reference: the pure-TF gather+matmul.", choices=("auto", "op", "reference"))
  weight_dtype: str = flagconfig.field(
      "float32", "Storage of the population's kernels: bfloat16 halves the memory a "
      "step streams through the dense layers (the played and exported networks use "
      "the rounded kernels; float32 arithmetic).",
      choices=tuple(population_net.WEIGHT_DTYPES))
  conv_input_dtype: str = flagconfig.field(
      "float32", "bfloat16: the convolutions round their inputs to bfloat16 and "
      "accumulate in float32, in AMX tiles on CPUs with AMX-BF16 (needs "
      "--weight_dtype=bfloat16; the played and exported networks round the same way).",
      choices=tuple(population_net.CONV_INPUT_DTYPES))
  inference: str = flagconfig.field(
      "auto", "How the networks play an episode: full (every layer at every step) or "
      "incremental (each step computes only what the change of the observation since "
      "the previous step changes: for Atari frames a few percent of the work; the same "
      "logits up to float rounding). auto: incremental for conv nets with float32 "
      "conv inputs, else full.", choices=("auto", "full", "incremental"))
  refresh_steps: int = flagconfig.field(
      100, "With incremental inference, recompute every network in full every N "
      "steps of an episode (bounds the float rounding that incremental steps "
      "accumulate).")
  sticky_actions: int = flagconfig.field(
      0, "Atari: 1 = repeat_action_probability 0.25, 0 = deterministic.")
