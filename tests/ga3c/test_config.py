"""GA3CConfig: the trainer's batch bounds, the learner process's env slots, a Ray
runner's queue, the learning-rate schedule, the torso."""

import pytest

from tfrl import networks
from tfrl.ga3c import network as network_lib
from tfrl.ga3c.config import GA3CConfig


def _config(**kwargs):
  return GA3CConfig(**{"agents": 1, "max_agents": 1, **kwargs})


def test_an_explicit_max_batch_is_honoured_in_whole_segments():
  # 1,024 samples of 32-step segments: 32 segments, not 4x the minimum.
  config = _config(t_max=32, training_min_batch_size=1024, training_max_batch_size=1024)
  assert (config.segments_per_min_batch, config.segments_per_max_batch) == (32, 32)
  config = _config(t_max=5, training_min_batch_size=80, training_max_batch_size=322)
  assert (config.segments_per_min_batch, config.segments_per_max_batch) == (16, 65)


def test_max_batch_0_is_4x_the_minimum():
  config = _config(t_max=5, training_min_batch_size=80)
  assert (config.segments_per_min_batch, config.segments_per_max_batch) == (16, 64)
  assert _config(t_max=5).segments_per_max_batch == 4


def test_a_max_below_the_minimum_is_refused():
  with pytest.raises(ValueError, match=r"training_max_batch_size \(40\) must be 0 \(4x the "
                                       r"minimum\) or at least training_min_batch_size \(80\)"):
    _config(t_max=5, training_min_batch_size=80, training_max_batch_size=40)


def test_only_ray_runners_leave_the_learner_one_idle_agents_slots():
  # A runner plays max_agents x envs_per_agent slots; the learner steps none.
  remote = GA3CConfig(agents=0, max_agents=8, envs_per_agent=4, ray_address="local")
  assert (remote.local_agents, remote.num_env_slots) == (1, 4)
  local = GA3CConfig(agents=2, max_agents=8, envs_per_agent=4)
  assert (local.local_agents, local.num_env_slots) == (8, 32)


def test_a_runner_holds_its_queue_size_or_by_default_the_larger_of_queue_and_slots():
  remote = dict(agents=0, max_agents=8, envs_per_agent=4, ray_address="local")
  assert GA3CConfig(**remote, training_queue_size=16).runner_queue_capacity == 32
  assert GA3CConfig(**remote, training_queue_size=64).runner_queue_capacity == 64
  assert GA3CConfig(**remote, ray_runner_queue_size=4).runner_queue_capacity == 4
  with pytest.raises(ValueError, match=r"ray_runner_queue_size must be 0 \(the default\) or "
                                       r"at least envs_per_agent \(4: "):
    GA3CConfig(**remote, ray_runner_queue_size=3)


def test_linear_lr_reaches_0_at_lr_decay_frames_else_at_max_frames():
  linear = dict(learning_rate=4e-4, lr_schedule="linear", max_frames=10_000_000)
  assert _config(**linear).learning_rate_at(5_000_000) == pytest.approx(2e-4)
  assert _config(**linear).learning_rate_at(10_000_000) == 0.0
  # A run stopped at 10M frames on a 40M-frame schedule.
  later = _config(**linear, lr_decay_frames=40_000_000)
  assert later.learning_rate_at(10_000_000) == pytest.approx(3e-4)
  assert later.learning_rate_at(50_000_000) == 0.0
  assert _config(learning_rate=4e-4).learning_rate_at(10_000_000) == 4e-4
  assert _config(lr_schedule="linear", lr_decay_frames=100).learning_rate_at(50) > 0
  with pytest.raises(ValueError, match=r"set --max_frames or --lr_decay_frames"):
    _config(lr_schedule="linear")
  with pytest.raises(ValueError, match=r"lr_decay_frames must be >= 0"):
    _config(lr_decay_frames=-1)


@pytest.mark.parametrize("torso, expected", [("atari", networks.AtariTorso),
                                             ("nature", networks.NatureTorso)])
def test_torso_picks_the_conv_net(torso, expected):
  network = network_lib.make_network(_config(torso=torso), 6, (84, 84, 4))
  assert type(network.torso) is expected


def test_an_unknown_torso_is_refused():
  with pytest.raises(ValueError, match="torso must be one of atari, nature, got 'resnet'"):
    _config(torso="resnet")
