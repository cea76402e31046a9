"""Loads tfrl's compiled op libraries (one shared library per op family)."""

import os

import tensorflow as tf

from tfrl.ops import overrides

_LIBRARIES = {}
_HERE = os.path.dirname(os.path.abspath(__file__))

BUILD_HINT = (
    "Build the ops with `pip install .` (or `pip install -e .`) from the tfrl "
    "checkout; they are compiled against the installed TensorFlow.")


def library_path(family: str) -> str:
  """Path of the shared library of one op family, e.g. 'ale'."""
  return os.path.join(_HERE, f"_{family}_ops.so")


def is_loaded(family: str) -> bool:
  """Whether this process has loaded the family's library."""
  return family in _LIBRARIES


def load_library(family: str):
  """Loads `_<family>_ops.so` once (or the library a TFRL_<FAMILY>_OPS_LIBRARY
  override names: `tfrl.ops.overrides`); raises ImportError saying how to build it."""
  if family not in _LIBRARIES:
    path = overrides.get(overrides.library_variable(family)) or library_path(family)
    if not os.path.exists(path):
      raise ImportError(
          f"tfrl op library '{family}' is missing (looked for {path}). "
          + BUILD_HINT)
    try:
      _LIBRARIES[family] = tf.load_op_library(path)
      overrides.report_family(family)
    except tf.errors.NotFoundError as e:
      raise ImportError(
          f"tfrl op library '{family}' at {path} does not load against this "
          f"TensorFlow ({tf.__version__}): {e.message}. " + BUILD_HINT) from e
  return _LIBRARIES[family]
