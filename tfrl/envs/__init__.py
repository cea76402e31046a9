"""Batched environments with one interface: reset(indices) / step(actions, indices).

`EnvProtocol` says what an env is (`tfrl/envs/protocol.py`) and `make_env`
makes it (`tfrl/envs/make.py`); `play_episodes` plays a policy on one
(`tfrl/envs/episodes.py`).
"""

from tfrl import lazy_names
from tfrl.envs.episodes import play_episodes
from tfrl.envs.make import make_env
from tfrl.envs.protocol import EnvProtocol

__all__ = ["GymEnv", "AtariEnv", "AtariVectorEnv", "EnvProtocol", "make_env",
           "play_episodes"]


# Imported when asked for: the Atari env needs the compiled ALE ops (GymEnv
# works on a machine where they are not built), and the package itself
# imports no TensorFlow (tfrl.render_worker's process must not load it).
__getattr__ = lazy_names.getattr_of(__name__, {
    "GymEnv": "gym_env", "AtariEnv": "atari_env", "AtariVectorEnv": "vector_env"})
