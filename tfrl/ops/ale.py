"""Python wrappers of the ALE ops (compiled in `_ale_ops.so`)."""

from tfrl.ops import load_library

_ops = load_library("ale")

env_create = _ops.ale_env_create
reset = _ops.ale_reset
step = _ops.ale_step
observe = _ops.ale_observe
action_set = _ops.ale_action_set


def slot_seed(seed: int, slot: int) -> int:
  """The ALE seed of emulator `slot`; the same formula as the C++ kernel."""
  return (seed * 1000003 + slot) & 0x7FFFFFFF
