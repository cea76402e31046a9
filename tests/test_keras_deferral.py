"""TensorFlow imported after tfrl loads no Keras, and Keras still works
after it (tfrl.keras_deferral): in a fresh interpreter each, since the
test process has TensorFlow already."""

import subprocess
import sys

from tests import processes

_AFTER_TFRL = """
import sys, tempfile
import tfrl
import tensorflow as tf
assert "keras" not in sys.modules, "Keras was imported with TensorFlow"
# A tf.Module's SavedModel round trip needs no Keras.
module = tf.Module()
module.v = tf.Variable([1.0, 2.0])
module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([2])])
folder = tempfile.mkdtemp()
tf.saved_model.save(module, folder)
loaded = tf.saved_model.load(folder)
assert loaded.f(tf.ones(2)).numpy().tolist() == [1.0, 2.0]
assert "keras" not in sys.modules
# Asked for after the import, Keras loads whole (its optimizers included).
layer = tf.keras.layers.Dense(3)
assert tuple(layer(tf.ones((1, 2))).shape) == (1, 3)
assert "keras.src.optimizers" in sys.modules
print("ok")
"""

# Keras imported first imports TensorFlow itself: the deferral must stay out
# of its way.
_KERAS_FIRST = """
import tfrl
import keras
import tensorflow as tf
assert tf.keras.optimizers.Adam is not None
print("ok")
"""


def _run(source: str) -> str:
  done = subprocess.run([sys.executable, "-c", source], env=processes.cli_env(),
                        cwd=processes.ROOT, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  return done.stdout


def test_tensorflow_after_tfrl_loads_no_keras_until_asked():
  assert _run(_AFTER_TFRL).strip().endswith("ok")


def test_keras_imported_first_loads_as_usual():
  assert _run(_KERAS_FIRST).strip().endswith("ok")
