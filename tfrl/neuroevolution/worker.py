"""What it takes to play populations: a picklable spec and the one builder of it.

The entry points build a `LocalEvaluator` from a `WorkerSpec` in their own
process; each Ray actor builds the same from the same spec in its process
(its env, population network, noise table and parent cache), so the two
paths cannot drift apart.
"""

import dataclasses
from typing import Optional

from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net
from tfrl.ops import population as population_ops


def make_worker_env(protocol: EnvProtocol, num_envs: int, seed: int):
  """The batched env the population evaluator plays on.

  No auto-reset: the evaluator resets every episode with its seed (an
  auto-reset would spend another reset sequence). The protocol's frame cap is
  the evaluator's to enforce (`WorkerSpec.episode_frame_cap`): it counts the
  same steps as the env would, and plans its graph calls around the cap.
  """
  return make_env(protocol, num_envs, seed, auto_reset=False, enforce_frame_cap=False)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
  """Everything an evaluator's process builds, from flags or a checkpoint."""
  env: EnvProtocol
  network: population_net.NetworkConfig
  observation_shape: tuple
  num_actions: int
  noise_seed: int
  noise_size: int
  capacity: int                # networks per evaluation call
  num_envs: int = 32
  slot_groups: int = 2
  incremental: bool = False
  compact_circulant: bool = False  # see population_net.PopulationNetwork
  refresh_steps: int = 100
  cache_size: int = 64         # chains the parent cache keeps
  env_seed: int = 0            # slot i's env is seeded from (env_seed, i)
  head: Optional[heads.ActionHead] = None  # None: Discrete(num_actions)
  obs_norm_clip: Optional[float] = None    # observation normalization's clip (None: off)

  @property
  def episode_frame_cap(self) -> Optional[int]:
    """The frames after which the evaluator ends an episode (None: the env's own
    limit only); see `tfrl.envs.protocol`."""
    return self.env.max_episode_frames or None

  def layout(self) -> population_net.ParamLayout:
    return population_net.ParamLayout(self.network, self.observation_shape,
                                      self.num_actions, self.head)


def build_local(spec: WorkerSpec, table: Optional[noise_lib.NoiseTable] = None
                ) -> evaluators.LocalEvaluator:
  """The env, population network, parent cache and evaluator of `spec`."""
  # The protocol's build of the population kernels, applied before this
  # process runs any of them (when their library loads, or at once).
  population_ops.request_isa(spec.env.kernel_isa)
  env = make_worker_env(spec.env, spec.num_envs, spec.env_seed)
  if table is None:
    table = noise_lib.NoiseTable(spec.noise_seed, spec.noise_size)
  layout = spec.layout()
  network = population_net.PopulationNetwork(layout, spec.capacity,
                                             compact_circulant=spec.compact_circulant)
  pipelined = evaluation.PipelinedEvaluator(
      env, network, num_groups=spec.slot_groups,
      episode_frame_cap=spec.episode_frame_cap, incremental=spec.incremental,
      refresh_steps=spec.refresh_steps, obs_norm_clip=spec.obs_norm_clip)
  builder = genome_lib.ParamBuilder(table, layout.init_scale, cache_size=spec.cache_size)
  return evaluators.LocalEvaluator(pipelined, builder)
