"""TD3 (Fujimoto et al. 2018) with tfrl's compressible layers (GST's testbed).

`python -m tfrl.td3 --env=Pendulum-v1` / `--env=HalfCheetah-v5` (needs the
`mujoco` package); from Python, `run_loop.run(td3.build(TD3Config(...)))`.
See `tfrl/td3/loop.py` for the loop, `tfrl/td3/phase.py` for a training phase
(env steps, replay and updates in one graph) and `tfrl/td3/learner.py` for the
update.
"""

from tfrl import lazy_names

# Each name's module, imported when the name is first asked for: the entry
# point parses and checks its flags (config.py) before TensorFlow is loaded.
_MODULES = {
    "Actor": "networks",
    "Critic": "networks",
    "ReplayBuffer": "replay",
    "RunSettings": "config",
    "TD3Config": "config",
    "TD3Learner": "learner",
    "build": "loop",
}

__all__ = ["Actor", "Critic", "ReplayBuffer", "RunSettings", "TD3Config", "TD3Learner",
           "build"]

__getattr__ = lazy_names.getattr_of(__name__, _MODULES)
