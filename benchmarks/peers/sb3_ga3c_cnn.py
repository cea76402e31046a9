"""GA3C's CNN as a Stable-Baselines3 features extractor, for the Pong race's matched rows.

Imported inside Stable-Baselines3's own virtualenv (never tfrl's) by rl-zoo3,
through its documented `policy_kwargs` (benchmarks/peers/pong_rows.py builds
the command; PYTHONPATH points at this folder):

    python -m rl_zoo3.train --algo ppo --env PongNoFrameskip-v4 --hyperparams \\
        policy_kwargs:"dict(features_extractor_class=__import__('sb3_ga3c_cnn').GA3CCnn,
        net_arch=[])"   (one argument)

The network is tfrl's GA3C torso (tfrl/networks.py, CONV_NETS["atari"] with
SAME padding): conv 8x8x16 stride 4, conv 4x4x32 stride 2, dense 256, ReLU
after each; SB3's policy puts its own policy and value heads on the 256
features, as tfrl's ActorCritic does (`net_arch=[]`: otherwise SB3 puts 64x64
MLPs before the heads of any extractor but NatureCNN). SAME padding is
TensorFlow's: the total padding of a side is max((ceil(n / s) - 1) * s + k - n, 0),
its smaller half before, so 84 -> 21 -> 11 as in tfrl. SB3 feeds channels
first, scaled to [0, 1].
"""

import torch
from torch import nn
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

# tfrl's CONV_NETS["atari"]: (filters, kernel, stride) per conv, then the dense
# width (tests/benchmarks/test_races.py checks that they still agree).
CONVS = ((16, 8, 4), (32, 4, 2))
DENSE = 256


def _same_padding(size: int, kernel: int, stride: int):
  """(before, after, output size) of TensorFlow's SAME padding along one side."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2, out


class GA3CCnn(BaseFeaturesExtractor):
  """[B, C, 84, 84] in [0, 1] -> [B, 256]: GA3C's conv torso."""

  def __init__(self, observation_space, features_dim: int = DENSE):
    if features_dim != DENSE:
      raise ValueError(f"GA3CCnn: features_dim is GA3C's dense width {DENSE}, "
                       f"got {features_dim}")
    super().__init__(observation_space, features_dim)
    channels, size, _ = observation_space.shape
    layers = []
    for filters, kernel, stride in CONVS:
      before, after, size = _same_padding(size, kernel, stride)
      layers += [nn.ZeroPad2d((before, after, before, after)),
                 nn.Conv2d(channels, filters, kernel, stride), nn.ReLU()]
      channels = filters
    self.convs = nn.Sequential(*layers, nn.Flatten())
    self.dense = nn.Sequential(nn.Linear(channels * size * size, DENSE), nn.ReLU())

  def forward(self, observations: torch.Tensor) -> torch.Tensor:
    return self.dense(self.convs(observations))
