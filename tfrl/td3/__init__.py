"""TD3 (Fujimoto et al. 2018) with tfrl's compressible layers (GST's testbed).

`python -m tfrl.td3 --env=Pendulum-v1` / `--env=HalfCheetah-v5` (needs the
`mujoco` package); from Python, `run_loop.run(td3.build(TD3Config(...)))`.
See `tfrl/td3/loop.py` for the loop, `tfrl/td3/phase.py` for a training phase
(env steps, replay and updates in one graph) and `tfrl/td3/learner.py` for the
update.
"""

from tfrl.td3.config import RunSettings
from tfrl.td3.config import TD3Config
from tfrl.td3.learner import TD3Learner
from tfrl.td3.networks import Actor
from tfrl.td3.networks import Critic
from tfrl.td3.replay import ReplayBuffer
from tfrl.td3.loop import build

__all__ = ["Actor", "Critic", "ReplayBuffer", "RunSettings", "TD3Config", "TD3Learner",
           "build"]
