"""GA3C's actor-critic network, made from the run's config: the learner's
(tfrl.ga3c.system) and each remote runner's copy (tfrl.ga3c.remote_runner)."""

import tensorflow as tf

from tfrl import networks
from tfrl.ga3c.config import GA3CConfig


def make_network(config: GA3CConfig, num_actions: int, observation_shape,
                 compute_dtype=tf.float32):
  """The `--torso` conv net for image observations (the paper's by default), an MLP
  otherwise."""
  kwargs = {}
  if config.layer_plan is not None:
    kwargs["plan"] = config.layer_plan
  if len(observation_shape) == 3:
    torso = networks.CONV_TORSOS[config.torso](compute_dtype=compute_dtype, **kwargs)
  else:
    torso = networks.MLPTorso(list(config.hidden_sizes), compute_dtype=compute_dtype,
                              **kwargs)
  return networks.ActorCritic(num_actions, torso, **kwargs)
