"""TF checkpoints of GA3C and TD3: the skeleton's store, refusing what it cannot trust.

    store = RunCheckpoints(os.path.join(logdir, "checkpoints"), max_to_keep=3)
    run_loop.run(run_loop.Job(make, store, options))   # the algorithm's `checkpoint` is saved

A `run_loop.CheckpointStore` on top of `tf.train.CheckpointManager` (whose
writes are already crash-safe: the data and index go to temporary names, and
the `checkpoint` state file is replaced atomically once they are complete):

  * the run's identity (`tfrl.resume`) is kept next to the checkpoints in
    `run.json`; a resume with another env, network or layer plan names each
    difference instead of failing deep in TF;
  * a state file that TF would silently ignore (truncated, empty), a missing
    `run.json`, index or data file and a restore that fails are each one line
    naming the file (`resume.CorruptCheckpoint`); nothing is deleted;
  * a save that fails (a full disk) is `errors.RunFailed`, the previous
    checkpoint still the latest;
  * a save never writes over the latest checkpoint (see `save`);
  * the first save is all or nothing: TF renames the index into place before
    it writes the state file, so a kill between the two would leave `ckpt-*`
    files that no state file names. The first checkpoint is therefore written
    in `<dir>.first.tmp` and that directory renamed to `<dir>` once complete.

Files that belong to a checkpoint (TD3's replay buffer) are written by a
subclass's `write_extras` and read back by its `restore_extras`.
"""

import glob
import json
import os
import re
import shutil
from typing import Any, Dict, Iterable, Mapping, Optional

from google.protobuf import message
import tensorflow as tf

from tfrl import atomic_files
from tfrl import errors
from tfrl import resume
from tfrl import run_loop
from tfrl.layers import factory as layer_factory

STATE_FILE = "checkpoint"   # tf.train.CheckpointManager's
IDENTITY_FILE = "run.json"
FIRST_SAVE_SUFFIX = ".first.tmp"
# How TF's checkpoint reader reports truncated or corrupt files (a short data
# file is an IndexError, "Read less bytes than requested").
_UNREADABLE = (tf.errors.OpError, IndexError, EOFError, OSError, message.DecodeError)
# A line of the text-format CheckpointState proto TF writes.
_STATE_LINE = re.compile(r'^\w+: ("([^"\\]|\\.)*"|[-+0-9.eE]+)$')


def network_identity(modules: Iterable[tf.Module]) -> Dict[str, Any]:
  """The layers (name:class, with circulant block sizes) and parameter count."""
  layers, parameters = [], 0
  for module in modules:
    for layer in layer_factory.layers_of(module):
      kind = type(layer).__name__
      if getattr(layer, "block_size", None):
        kind += f"(b={layer.block_size})"
      layers.append(f"{getattr(layer, 'plan_name', layer.name)}:{kind}")
    parameters += sum(int(v.shape.num_elements()) for v in module.trainable_variables)
  return {"layers": ", ".join(layers), "parameters": parameters}


def has_checkpoint(directory: str) -> bool:
  """Whether `directory` holds a checkpoint, readable or not."""
  return (os.path.exists(os.path.join(directory, STATE_FILE)) or
          bool(glob.glob(os.path.join(directory, "ckpt-*.index"))))


def _check_state_file(directory: str) -> None:
  """Raises CorruptCheckpoint where TF would warn and start afresh (or crash)."""
  path = os.path.join(directory, STATE_FILE)
  if not os.path.exists(path):
    raise resume.CorruptCheckpoint(path, "missing, though ckpt-* files are there")
  try:
    with open(path) as f:
      lines = [line.strip() for line in f.read().splitlines() if line.strip()]
  except (OSError, UnicodeDecodeError) as e:
    raise resume.CorruptCheckpoint(path, f"unreadable ({e})") from e
  bad = [line for line in lines if not _STATE_LINE.match(line)]
  if bad:
    raise resume.CorruptCheckpoint(path, f"not a checkpoint state, truncated? ({bad[0][:80]!r})")
  if not any(line.startswith("model_checkpoint_path:") for line in lines):
    raise resume.CorruptCheckpoint(path, "names no checkpoint (empty or truncated)")


def _restorable(algorithm, path: str) -> tf.train.Checkpoint:
  """`algorithm.checkpoint`, less those of its `optional_checkpoint_entries`
  (names in `algorithm.checkpoint_entries`, the dict it was built from:
  entries added to the format later) that the checkpoint at `path` lacks:
  they keep their initial values. Every other entry must be there."""
  optional = getattr(algorithm, "optional_checkpoint_entries", None)
  if not optional:
    return algorithm.checkpoint
  saved = {name.split("/")[0] for name, _ in tf.train.list_variables(path)}
  missing = [name for name in optional if name not in saved]
  if not missing:
    return algorithm.checkpoint
  kept = {name: value for name, value in algorithm.checkpoint_entries.items()
          if name not in missing}
  return tf.train.Checkpoint(**kept)


class RunCheckpoints(run_loop.CheckpointStore):
  """See the module docstring. The algorithm's `checkpoint` (a
  `tf.train.Checkpoint`) is what is saved and restored."""

  def __init__(self, directory: str, max_to_keep: int):
    self.directory = directory
    self._max_to_keep = max_to_keep
    self._manager: Optional[tf.train.CheckpointManager] = None

  def _manage(self, checkpoint: tf.train.Checkpoint, directory: Optional[str] = None):
    return tf.train.CheckpointManager(checkpoint, directory or self.directory,
                                      max_to_keep=self._max_to_keep)

  def exists(self) -> bool:
    return has_checkpoint(self.directory)

  def check(self) -> None:
    _check_state_file(self.directory)
    self.saved_identity()

  @property
  def latest(self) -> Optional[str]:
    if self._manager is not None:
      return self._manager.latest_checkpoint
    return tf.train.latest_checkpoint(self.directory) if self.exists() else None

  @property
  def latest_number(self) -> Optional[int]:
    """N of the latest checkpoint, `<dir>/ckpt-N` (None: there is none)."""
    latest = self.latest
    try:
      return int(latest.rsplit("-", 1)[1]) if latest else None
    except (IndexError, ValueError):
      return None

  def saved_identity(self) -> dict:
    path = os.path.join(self.directory, IDENTITY_FILE)
    try:
      with open(path) as f:
        saved = json.load(f)
    except FileNotFoundError as e:
      raise resume.CorruptCheckpoint(path, f"missing ({STATE_FILE} names a checkpoint)") from e
    except (OSError, ValueError) as e:
      raise resume.CorruptCheckpoint(path, f"not valid JSON, truncated? ({e})") from e
    if not isinstance(saved, dict):
      raise resume.CorruptCheckpoint(path, "not a JSON object")
    return saved

  def restore(self, algorithm) -> str:
    """Restores the latest checkpoint into `algorithm.checkpoint`, then its extras."""
    self._manager = self._manage(algorithm.checkpoint)
    latest = self.latest
    if not os.path.exists(latest + ".index"):
      raise resume.CorruptCheckpoint(latest + ".index", f"missing ({STATE_FILE} names it)")
    if not glob.glob(glob.escape(latest) + ".data-*"):
      raise resume.CorruptCheckpoint(latest + ".data-*", f"missing ({STATE_FILE} names it)")
    try:
      _restorable(algorithm, latest).restore(latest).assert_existing_objects_matched()
    except _UNREADABLE as e:
      raise resume.CorruptCheckpoint(latest, resume.first_line(e)) from e
    except (AssertionError, ValueError) as e:
      raise ValueError(f"cannot resume from {latest}: it does not match this run's "
                       f"network ({resume.first_line(e)})") from e
    self.restore_extras(algorithm, latest)
    return latest

  def restore_extras(self, algorithm, checkpoint_path: str) -> None:
    """Reads the files saved with `checkpoint_path` by `write_extras` (none here)."""

  def write_extras(self, algorithm, directory: str, number: int) -> None:
    """Writes files that belong to checkpoint `number` into `directory` (none here)."""

  def save(self, algorithm, number: int, identity: Mapping[str, Any]) -> str:
    """Writes checkpoint `number`; raises errors.RunFailed if it cannot.

    `write_extras` writes the files that belong to the checkpoint before it,
    into the directory the checkpoint goes to.

    A `number` not above the latest checkpoint's becomes the latest's + 1: TF
    writes the index file of an existing checkpoint in place, so saving over
    the latest one and dying, or meeting a full disk, during that write would
    leave none whole.
    """
    checkpoint = algorithm.checkpoint
    if self._manager is None:
      self._manager = self._manage(checkpoint)
    latest = self.latest_number
    if latest is not None and number <= latest:
      number = latest + 1
    first = latest is None
    # The first checkpoint goes to a staging directory renamed into place whole.
    directory = self.directory + FIRST_SAVE_SUFFIX if first else self.directory
    try:
      if first:
        shutil.rmtree(directory, ignore_errors=True)  # what a killed first save left
        os.makedirs(directory)
      self.write_extras(algorithm, directory, number)
      atomic_files.write_json(os.path.join(directory, IDENTITY_FILE), resume.as_json(identity),
                              indent=1)
      if not first:
        return self._manager.save(checkpoint_number=number)
      # TF's state file names the checkpoint relative to its directory, so it
      # stays valid through the rename.
      self._manage(checkpoint, directory).save(checkpoint_number=number)
      if os.path.isdir(self.directory) and not os.listdir(self.directory):
        os.rmdir(self.directory)  # an empty one left by an earlier tfrl
      os.rename(directory, self.directory)  # refused (ENOTEMPTY, EEXIST) over anything else
      atomic_files.fsync_directory(os.path.dirname(os.path.abspath(self.directory)))
      self._manager = self._manage(checkpoint)
      return self._manager.latest_checkpoint
    except (OSError, tf.errors.OpError) as e:
      raise errors.RunFailed(
          f"cannot write checkpoint {number} in {self.directory}: {resume.first_line(e)}; "
          f"the latest complete one is {self.latest or 'none'}") from e
