"""A uniform replay buffer held in one tf.Variable, written and sampled inside
the training graph (no Python per transition or per sample).

    replay = ReplayBuffer(obs_dim=17, action_dim=6, capacity=1_000_000)
    replay.add(obs, action, reward, next_obs, terminated)      # eager or in a graph
    obs, action, reward, next_obs, discount = replay.sample(rng, 50, 256)  # [50, 256, ...]

Row i of the ring holds one transition laid out as [obs | action | reward |
next_obs | discount]: one scatter writes it and one gather reads a batch.
`discount` is 0 at a true termination and 1 otherwise (time-limit
truncations bootstrap, as in Fujimoto et al.'s TD3). Sampling draws rows
uniformly from the filled part only, from a `tf.random.Generator` the caller
owns. `save` / `load` keep the .npz format of TD3's checkpoints (one array
per field, the filled rows only), one field at a time so that a large buffer
(Humanoid: 2.9 GB at 1M transitions) is not copied whole.
"""

import pickle
import zipfile

import numpy as np
import tensorflow as tf

from tfrl import atomic_files
from tfrl import resume


class ReplayBuffer(tf.Module):
  """Ring buffer of (obs, action, reward, next_obs, discount) transitions (see
  the module docstring). `size` and `index` (the next row written) are Python
  ints; `filled` and `position` the variables behind them, for graphs."""

  FIELDS = ("obs", "action", "reward", "next_obs", "discount")

  def __init__(self, obs_dim: int, action_dim: int, capacity: int, name="replay"):
    super().__init__(name=name)
    for what, value in (("capacity", capacity), ("obs_dim", obs_dim),
                        ("action_dim", action_dim)):
      if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"ReplayBuffer {what} must be a positive int, got {value!r}.")
    self.capacity = int(capacity)
    widths = (obs_dim, action_dim, 1, obs_dim, 1)
    starts = np.cumsum((0,) + widths)
    # field -> (first column, width, shape of one transition's value)
    self._columns = {f: (int(s), int(w), (w,) if f in ("obs", "action", "next_obs") else ())
                     for f, s, w in zip(self.FIELDS, starts, widths)}
    self.width = int(starts[-1])
    with tf.init_scope():
      self._rows = tf.Variable(tf.zeros([self.capacity, self.width]), trainable=False,
                               name="rows")
      self.filled = tf.Variable(0, dtype=tf.int64, trainable=False, name="filled")
      self.position = tf.Variable(0, dtype=tf.int64, trainable=False, name="position")

  @property
  def size(self) -> int:
    return int(self.filled)

  @property
  def index(self) -> int:
    return int(self.position)

  def add(self, obs, action, reward, next_obs, terminated):
    """Writes one transition at `index` (overwriting the oldest when full)."""
    discount = 1.0 - tf.cast(terminated, tf.float32)
    row = tf.concat([tf.reshape(tf.cast(v, tf.float32), [-1])
                     for v in (obs, action, reward, next_obs, discount)], axis=0)
    i = self.position.read_value()
    self._rows.scatter_update(tf.IndexedSlices(row[None], i[None]))
    self.position.assign((i + 1) % self.capacity)
    self.filled.assign(tf.minimum(self.filled + 1, self.capacity))

  def sample_indices(self, rng: tf.random.Generator, num_batches, batch_size):
    """[num_batches, batch_size] row indices, uniform over the filled rows."""
    size = self.filled.read_value()
    check = tf.debugging.assert_positive(size, message="ReplayBuffer.sample on an empty "
                                                      "buffer (add transitions first).")
    with tf.control_dependencies([check]):
      return rng.uniform([num_batches, batch_size], minval=0, maxval=size, dtype=tf.int64)

  def gather(self, indices):
    """The fields of rows `indices` (any shape S): tensors [*S, ...], FIELDS' order."""
    rows = tf.gather(self._rows, indices)
    out = []
    for f in self.FIELDS:
      start, width, shape = self._columns[f]
      value = rows[..., start:start + width]
      out.append(value if shape else value[..., 0])
    return tuple(out)

  def sample(self, rng: tf.random.Generator, num_batches, batch_size):
    """(obs, action, reward, next_obs, discount), each [num_batches, batch_size, ...]."""
    return self.gather(self.sample_indices(rng, num_batches, batch_size))

  def _field(self, f: str, n: int) -> np.ndarray:
    start, width, shape = self._columns[f]
    value = tf.slice(self._rows, [0, start], [n, width]).numpy()
    return value if shape else value[:, 0]

  def save(self, path: str):
    """Writes the filled rows to `path` whole or not at all (raises OSError, old file intact)."""
    n = self.size
    atomic_files.save_npz(path, size=n, index=self.index,
                          **{f: self._field(f, n) for f in self.FIELDS})

  def _read(self, path: str):
    """(size, index, {field: array}) of a saved buffer, checked; ValueError and
    the like for a bad file."""
    # allow_pickle: buffers of earlier versions hold their sampler's state pickled.
    with np.load(path, allow_pickle=True) as data:
      n = int(data["size"])
      if n > self.capacity:
        raise ValueError(f"Saved replay holds {n} > capacity {self.capacity} transitions.")
      fields = {f: data[f] for f in self.FIELDS}
      index = int(data["index"]) % self.capacity
    for f, values in fields.items():
      expected = (n,) + self._columns[f][2]
      if values.shape != expected:
        raise ValueError(f"{f} has shape {values.shape}, expected {expected}")
    return n, index, fields

  def load(self, path: str):
    """Restores a saved buffer; a bad file is one `resume.CorruptCheckpoint` line."""
    try:
      n, index, fields = self._read(path)
    except (OSError, ValueError, TypeError, EOFError, KeyError, zipfile.BadZipFile,
            pickle.UnpicklingError) as e:
      raise resume.CorruptCheckpoint(path, f"unreadable replay buffer, truncated? "
                                           f"({resume.first_line(e)})") from e
    # Only now, with the whole file read, does the buffer change.
    for f, values in fields.items():
      start, width, _ = self._columns[f]
      if n:
        self._rows[:n, start:start + width].assign(
            np.asarray(values, np.float32).reshape(n, width))
    self.filled.assign(n)
    self.position.assign(index)
