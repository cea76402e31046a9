"""Python wrappers of the ALE ops (compiled in `_ale_ops.so`)."""

from tfrl.ops import load_library

_ops = load_library("ale")

env_create = _ops.ale_env_create
reset = _ops.ale_reset
step = _ops.ale_step
observe = _ops.ale_observe
action_set = _ops.ale_action_set


def kernel_info() -> dict:
  """Which builds of the observation pipeline ran in this process.

  {path: ran} for 'grey_levels_avx512_vbmi', 'grey_levels_portable' (palette
  to grey levels, with the max-pool) and 'resize_avx2', 'resize_portable'
  (the area resize). The SIMD builds run where the CPU has the instructions,
  unless the environment variable TFRL_ALE_NO_SIMD is set (any value).
  """
  paths, ran = _ops.ale_kernel_info()
  return {p.decode(): bool(r) for p, r in zip(paths.numpy(), ran.numpy())}


def slot_seed(seed: int, slot: int) -> int:
  """The ALE seed of emulator `slot`; the same formula as the C++ kernel."""
  return (seed * 1000003 + slot) & 0x7FFFFFFF
