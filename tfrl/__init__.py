"""tfrl: fast deep reinforcement learning in pure TensorFlow 2."""

__version__ = "0.1.0"
