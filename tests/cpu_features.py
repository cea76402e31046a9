"""The CPU's feature flags, for tests that skip what the CPU cannot run.

`cpu_flags()` is `tfrl.precision.cpu_flags`: the flags of /proc/cpuinfo (an
empty set elsewhere), read by one function for the library and the tests.
"""

from tfrl.precision import cpu_flags  # pylint: disable=unused-import
