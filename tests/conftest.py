"""Test-suite wide pytest settings."""


def pytest_collection_modifyitems(config, items):
  # tf.test.TestCase has a `test_session` helper that pytest would collect and
  # report as a skipped test; it is not one.
  del config
  items[:] = [item for item in items if item.name != "test_session"]
