"""The CPU's feature flags, for tests that skip what the CPU cannot run."""


def cpu_flags():
  """The CPU's feature flags from /proc/cpuinfo (empty set elsewhere)."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()
