"""Loads tfrl's compiled op libraries (one shared library per op family)."""

import os

import tensorflow as tf

_LIBRARIES = {}
_HERE = os.path.dirname(os.path.abspath(__file__))

BUILD_HINT = (
    "Build the ops with `pip install .` (or `pip install -e .`) from the tfrl "
    "checkout; they are compiled against the installed TensorFlow.")


def library_path(family: str) -> str:
  """Path of the shared library of one op family, e.g. 'ale'."""
  return os.path.join(_HERE, f"_{family}_ops.so")


def load_library(family: str):
  """Loads `_<family>_ops.so` once; raises ImportError saying how to build it."""
  if family not in _LIBRARIES:
    path = os.environ.get(f"TFRL_{family.upper()}_OPS_LIBRARY") or library_path(family)
    if not os.path.exists(path):
      raise ImportError(
          f"tfrl op library '{family}' is missing (looked for {path}). "
          + BUILD_HINT)
    try:
      _LIBRARIES[family] = tf.load_op_library(path)
    except tf.errors.NotFoundError as e:
      raise ImportError(
          f"tfrl op library '{family}' at {path} does not load against this "
          f"TensorFlow ({tf.__version__}): {e.message}. " + BUILD_HINT) from e
  return _LIBRARIES[family]
