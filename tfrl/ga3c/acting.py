"""GA3C's acting side, built by the same code in the learner's process
(tfrl.ga3c.system) and in each remote runner (tfrl.ga3c.remote_runner):

    queues, agents, predictor = acting_loops(config, env, network, num_agents=...,
                                             training_capacity=..., counters=...,
                                             version=...)

`num_agents` agents of `config.envs_per_agent` slots each play `env`; the
predictor answers them from `network`; their segments go into
`queues.training`, which holds `training_capacity` of them.
"""

from typing import Tuple

from tfrl.ga3c.agents import AgentPool
from tfrl.ga3c.config import GA3CConfig
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import Queues


def acting_loops(config: GA3CConfig, env, network, *, num_agents: int,
                 training_capacity: int, counters, version
                 ) -> Tuple[Queues, AgentPool, Predictor]:
  """The queues, the agents and the predictor (see the module docstring).

  `counters`: int64 tf.Variables that the agents (`env_steps`, `episodes`) and
  the predictor (`predictions`, `prediction_batches`) count in; `version`: the
  policy version that the predictor stamps on every action.
  """
  slots = num_agents * config.envs_per_agent
  queues = Queues(
      obs_shape=tuple(env.observation_shape), obs_dtype=env.observation_dtype,
      num_agents=num_agents, envs_per_agent=config.envs_per_agent, t_max=config.t_max,
      # Room for every slot's request: an agent never waits on a full queue.
      prediction_capacity=max(config.prediction_queue_size, slots),
      training_capacity=training_capacity)
  agents = AgentPool(env, queues, num_agents=num_agents, envs_per_agent=config.envs_per_agent,
                     t_max=config.t_max, counters=counters)
  predictor = Predictor(network, queues, batch_size=config.prediction_batch_size,
                        counters=counters, version=version,
                        jit_compile=config.jit_compile_predict)
  return queues, agents, predictor
