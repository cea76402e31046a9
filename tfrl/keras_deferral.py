"""TensorFlow's import without Keras's.

`import tensorflow` (2.21) imports Keras 3 at its end, "so that any function
that needs to happen at load time will trigger" (Keras's optimizers register
in the SavedModel registry), and Keras imports matplotlib where it is
installed: 1.3 s of TensorFlow's 5.4 s on a 2.0 GHz Zen 1 core, paid by every
tfrl process and Ray worker. tfrl uses no Keras, so while TensorFlow's
`__init__` runs, the `keras` package refuses to load (TensorFlow catches the
ImportError and goes on). Once TensorFlow is imported Keras loads as usual,
`tf.keras` included, and registers itself then.
"""

import importlib.abc
import importlib.machinery
import sys


class _RefusingLoader(importlib.abc.Loader):

  def create_module(self, spec):
    raise ImportError("tfrl defers Keras until TensorFlow has been imported")

  def exec_module(self, module):  # never reached: create_module raises
    raise ImportError("tfrl defers Keras until TensorFlow has been imported")


class _DeferKeras(importlib.abc.MetaPathFinder):
  """Finds `keras` as usual (TensorFlow reads its location), but while
  TensorFlow initializes, its loader refuses."""

  def find_spec(self, name, path=None, target=None):
    if name != "keras" or not _tensorflow_initializing():
      return None
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None:
      spec.loader = _RefusingLoader()
    return spec


def _tensorflow_initializing() -> bool:
  module = sys.modules.get("tensorflow")
  return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


_FINDER = _DeferKeras()


def install():
  """Defers Keras in this process (idempotent; before TensorFlow's import)."""
  if _FINDER not in sys.meta_path:
    sys.meta_path.insert(0, _FINDER)
