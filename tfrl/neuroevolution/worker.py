"""What it takes to play populations: a picklable spec and the one builder of it.

The entry points build a `LocalEvaluator` from a `WorkerSpec` in their own
process; each Ray actor builds the same from the same spec in its process
(its env, population network, noise table and parent cache), so the two
paths cannot drift apart.
"""

import dataclasses
from typing import Optional

from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net


@dataclasses.dataclass(frozen=True)
class EnvSpec:
  """An Atari game (the compiled ALE ops) or a gymnasium env id."""
  game: str = "pong"
  gym_id: str = ""             # a gymnasium id; overrides `game`
  sticky_actions: bool = False
  seed: int = 0

  def make(self, num_envs: int, auto_reset: bool = False):
    """The batched env. The evaluator resets every episode with its seed, so
    it needs no auto-reset (which would spend another reset sequence)."""
    if self.gym_id:
      from tfrl.envs import GymEnv  # pylint: disable=import-outside-toplevel
      return GymEnv(self.gym_id, num_envs, seed=self.seed, auto_reset=auto_reset)
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    return AtariEnv(self.game, num_envs, seed=self.seed, auto_reset=auto_reset,
                    repeat_action_probability=0.25 if self.sticky_actions else 0.0)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
  """Everything an evaluator's process builds, from flags or a checkpoint."""
  env: EnvSpec
  network: population_net.NetworkConfig
  observation_shape: tuple
  num_actions: int
  noise_seed: int
  noise_size: int
  capacity: int                # networks per evaluation call
  num_envs: int = 32
  slot_groups: int = 2
  episode_frame_cap: Optional[int] = None
  incremental: bool = False
  refresh_steps: int = 100
  cache_size: int = 64         # chains the parent cache keeps

  def layout(self) -> population_net.ParamLayout:
    return population_net.ParamLayout(self.network, self.observation_shape,
                                      self.num_actions)


def build_local(spec: WorkerSpec, table: Optional[noise_lib.NoiseTable] = None
                ) -> evaluators.LocalEvaluator:
  """The env, population network, parent cache and evaluator of `spec`."""
  env = spec.env.make(spec.num_envs)
  if table is None:
    table = noise_lib.NoiseTable(spec.noise_seed, spec.noise_size)
  layout = spec.layout()
  network = population_net.PopulationNetwork(layout, spec.capacity)
  pipelined = evaluation.PipelinedEvaluator(
      env, network, num_groups=spec.slot_groups,
      episode_frame_cap=spec.episode_frame_cap, incremental=spec.incremental,
      refresh_steps=spec.refresh_steps)
  builder = genome_lib.ParamBuilder(table, layout.init_scale, cache_size=spec.cache_size)
  return evaluators.LocalEvaluator(pipelined, builder)
