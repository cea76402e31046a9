"""Test-suite wide pytest settings."""

import os

import pytest

# Tests that start Ray, signal or look for processes or mount file systems:
# with two pytest workers (`-n 2 --dist loadgroup`) they all run on one worker,
# one after another, while the rest share the other.
SERIAL_FILES = (
    "tests/ga3c/test_remote.py",
    "tests/neuroevolution/test_config.py",
    "tests/neuroevolution/test_ray.py",
    "tests/ops/test_isa.py",
    "tests/test_cluster_recipe.py",
    "tests/test_file_system_failures.py",
    "tests/test_kill_resume.py",
    "tests/test_logdir_lock.py",
    "tests/test_peer_runs.py",
    "tests/test_signals.py",
)
# Tests that compile the op libraries (sharing the object cache and Bazel's
# server): one after another as well, but beside the serial files, whose
# process checks look only for their own markers. One group of both was the
# suite's critical path (about 90% of its wall clock on the Zen 1 VM).
BUILD_FILES = (
    "tests/ops/test_build_options.py",
    "tests/test_bazel_build.py",
    "tests/test_setup_build.py",
    "tests/test_wheel.py",
)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def missing_serial_files(paths=SERIAL_FILES + BUILD_FILES):
  """The paths of `paths` (relative to the repository root) that are no file."""
  return [p for p in paths if not os.path.isfile(os.path.join(_ROOT, p))]


def pytest_configure(config):
  # A renamed or moved test file would silently leave the serial group (and
  # run beside the tests it must not meet): the run stops instead.
  del config
  missing = missing_serial_files()
  if missing:
    raise pytest.UsageError(f"tests/conftest.py: SERIAL_FILES or BUILD_FILES lists "
                            f"{missing}, which do not exist; list the test files by their "
                            "paths")


# Before xdist's own hook (--dist loadgroup), which reads the xdist_group
# markers set here into the nodeids it schedules by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  # tf.test.TestCase has a `test_session` helper that pytest would collect and
  # report as a skipped test; it is not one.
  del config
  items[:] = [item for item in items if item.name != "test_session"]
  for item in items:
    group = shared_setup_group(item)
    if group:
      item.add_marker(pytest.mark.xdist_group(group))


def shared_setup_group(item) -> str:
  """The xdist group `item` must run in, or "" for any worker: the serial files'
  one; else, so that an expensive shared setup runs once and not on both workers,
  its file when it uses a module-scoped fixture and its class when that class has
  a setUpClass."""
  path = os.path.relpath(str(item.path), _ROOT)
  if path in SERIAL_FILES:
    return "serial"
  if path in BUILD_FILES:
    return "builds"
  definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
  if any(d.scope == "module" for defs in definitions.values() for d in defs
         if d.baseid.startswith(path.replace(os.sep, "/"))):
    return path
  cls = getattr(item, "cls", None)
  if cls is not None and any("setUpClass" in vars(c) for c in cls.__mro__
                             if c.__module__.startswith("tests") or c is cls):
    return f"{path}::{cls.__name__}"
  return ""
