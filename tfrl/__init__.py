"""tfrl: fast deep reinforcement learning in pure TensorFlow 2."""

from tfrl import keras_deferral as _keras_deferral

__version__ = "0.1.0"

_keras_deferral.install()
