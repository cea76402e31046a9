"""Python wrappers of the MuJoCo ops (compiled in `_mujoco_ops.so`).

The library links the `mujoco` wheel's libmujoco by its soname, so `mujoco`
is imported first: its modules load that libmujoco, which the op library
then shares (one MuJoCo in the process, its error handler included).
"""

import mujoco  # pylint: disable=unused-import  # loads libmujoco for the ops

from tfrl.ops import load_library

_ops = load_library("mujoco")

env_create = _ops.mujoco_env_create
reset = _ops.mujoco_reset
step = _ops.mujoco_step
observe = _ops.mujoco_observe
