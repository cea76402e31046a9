"""The environment variables that still change what tfrl runs: documented
overrides, for tests and comparisons, each logged once when it is set.

Everything a run's results depend on is a config field (for the env: the
protocol's `--env_implementation` and `--kernel_isa`, `tfrl/envs/protocol.py`)
and is recorded in the run's identity and its exported policy. These
variables override a field, or pick a build that gives the same results:

  TFRL_POPULATION_ISA=auto|amx|avx512|avx2|sse|portable
      overrides --kernel_isa: the build the population kernels run (read
      once per process by the op library; the build that runs is what a run
      records).
  TFRL_POPULATION_NO_AMX (any value)
      the bfloat16-input convolution does not use AMX tiles (a run records
      avx512 rather than amx).
  TFRL_ALE_NO_SIMD (any value)
      ALE's observation pipeline runs its portable builds instead of the
      AVX-512 VBMI and AVX2 ones: the same bytes (tests/envs/test_atari_env.py),
      so nothing a run records changes.
  TFRL_<FAMILY>_OPS_LIBRARY=PATH
      loads that op library (ale, population, mujoco) instead of
      tfrl/ops/_<family>_ops.so, e.g. one built with Bazel or with an option.

This module is the only place in tfrl that reads them (the C++ libraries read
the first three themselves).
"""

import os
from typing import Optional

from absl import logging

# {variable: what setting it does}, for the log line.
OVERRIDES = {
    "TFRL_POPULATION_ISA": "overrides --kernel_isa for the population kernels",
    "TFRL_POPULATION_NO_AMX": "the bfloat16-input convolution runs without AMX tiles",
    "TFRL_ALE_NO_SIMD": "ALE's observation pipeline runs its portable builds (same bytes)",
}
# The overrides each op family's library reads.
FAMILY_OVERRIDES = {
    "population": ("TFRL_POPULATION_ISA", "TFRL_POPULATION_NO_AMX"),
    "ale": ("TFRL_ALE_NO_SIMD",),
}
_reported = set()
# The C++ libraries act on these when they are set at all, an empty value too.
_SET_IS_ENOUGH = ("TFRL_POPULATION_NO_AMX", "TFRL_ALE_NO_SIMD")


def library_variable(family: str) -> str:
  return f"TFRL_{family.upper()}_OPS_LIBRARY"


def get(variable: str) -> Optional[str]:
  """The override's value (None when unset, or empty where the library ignores an
  empty value); logs it the first time."""
  if variable not in OVERRIDES and not (variable.startswith("TFRL_")
                                        and variable.endswith("_OPS_LIBRARY")):
    raise ValueError(f"{variable} is not a documented override; known: "
                     f"{sorted(OVERRIDES)} and TFRL_<FAMILY>_OPS_LIBRARY.")
  value = os.environ.get(variable)
  if value == "" and variable not in _SET_IS_ENOUGH:
    value = None
  if value is not None and variable not in _reported:
    _reported.add(variable)
    what = OVERRIDES.get(variable, "loads this op library instead of the installed one")
    logging.warning("environment override %s=%s: %s.", variable, value, what)
  return value


def report_family(family: str) -> None:
  """Logs the overrides set for `family`'s library (when it loads)."""
  for variable in FAMILY_OVERRIDES.get(family, ()):
    get(variable)
