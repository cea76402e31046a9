"""TF checkpoints of GA3C and TD3: a CheckpointManager that refuses what it cannot trust.

    checkpoints = RunCheckpoints(checkpoint, os.path.join(logdir, "checkpoints"),
                                 identity, max_to_keep=3, resume=resume)
    restored = checkpoints.restore_latest()   # None: nothing to resume
    ...
    checkpoints.save(number)

On top of `tf.train.CheckpointManager` (whose writes are already crash-safe:
the data and index go to temporary names, and the `checkpoint` state file is
replaced atomically once they are complete):

  * the run's identity (`tfrl.resume`) is kept next to the checkpoints in
    `run.json`; a resume with another env, network or layer plan names each
    difference instead of failing deep in TF;
  * a fresh run refuses a directory that holds checkpoints;
  * a state file that TF would silently ignore (truncated, empty), a missing
    index or data file and a restore that fails are each one line naming the
    file (`resume.CorruptCheckpoint`); nothing is deleted;
  * a save that fails (a full disk) is `cli.RunFailed`, the previous
    checkpoint still the latest;
  * a save never writes over the latest checkpoint (see `save`);
  * the first save is all or nothing: TF renames the index into place before
    it writes the state file, so a kill between the two would leave `ckpt-*`
    files that no state file names. The first checkpoint is therefore written
    in `<dir>.first.tmp` and that directory renamed to `<dir>` once complete.
"""

import glob
import json
import os
import re
import shutil
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from google.protobuf import message
import tensorflow as tf

from tfrl import atomic_files
from tfrl import cli
from tfrl import resume
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


class RunCheckpoints:
  """See the module docstring."""

  def __init__(self, checkpoint: tf.train.Checkpoint, directory: str,
               identity: Mapping[str, Any], max_to_keep: int, resume_run: bool):
    self.directory = directory
    self.identity = resume.as_json(identity)
    self._checkpoint = checkpoint
    self._max_to_keep = max_to_keep
    self._resume = resume_run
    self._exists = has_checkpoint(directory)
    if self._exists and not resume_run:
      resume.refuse_fresh_run(directory, "checkpoints")
    if self._exists:
      _check_state_file(directory)
    self.manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)

  @property
  def latest(self) -> Optional[str]:
    return self.manager.latest_checkpoint

  @property
  def latest_number(self) -> Optional[int]:
    """N of the latest checkpoint, `<dir>/ckpt-N` (None: there is none)."""
    latest = self.latest
    try:
      return int(latest.rsplit("-", 1)[1]) if latest else None
    except (IndexError, ValueError):
      return None

  def _saved_identity(self) -> Optional[dict]:
    path = os.path.join(self.directory, IDENTITY_FILE)
    if not os.path.exists(path):
      return None  # a checkpoint from before run.json existed
    try:
      with open(path) as f:
        saved = json.load(f)
    except (OSError, ValueError) as e:
      raise resume.CorruptCheckpoint(path, f"not valid JSON, truncated? ({e})") from e
    if not isinstance(saved, dict):
      raise resume.CorruptCheckpoint(path, "not a JSON object")
    return saved

  def restore_latest(self) -> Optional[str]:
    """Restores the latest checkpoint of a resumed run; its path, or None."""
    if not self._resume or not self._exists:
      return None
    resume.check_same_run(self._saved_identity(), self.identity, self.directory)
    latest = self.latest
    if not os.path.exists(latest + ".index"):
      raise resume.CorruptCheckpoint(latest + ".index", f"missing ({STATE_FILE} names it)")
    if not glob.glob(glob.escape(latest) + ".data-*"):
      raise resume.CorruptCheckpoint(latest + ".data-*", f"missing ({STATE_FILE} names it)")
    try:
      self._checkpoint.restore(latest).assert_existing_objects_matched()
    except _UNREADABLE as e:
      raise resume.CorruptCheckpoint(latest, resume.first_line(e)) from e
    except (AssertionError, ValueError) as e:
      raise ValueError(f"cannot resume from {latest}: it does not match this run's "
                       f"network ({resume.first_line(e)})") from e
    return latest

  def save(self, number: int, write_extras: Optional[Callable[[str], None]] = None) -> str:
    """Writes checkpoint `number`; raises cli.RunFailed if it cannot.

    `write_extras(directory)` writes the files that belong to the checkpoint
    (TD3's replay buffer) before it, into the directory the checkpoint goes to.

    A `number` not above the latest checkpoint's (a run that saves again before
    the counter that numbers its checkpoints moved, e.g. GA3C with no training
    step since its last save) becomes the latest's + 1: TF writes the index
    file of an existing checkpoint in place, so saving over the latest one and
    dying, or meeting a full disk, during that write would leave none whole.
    """
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
      if write_extras is not None:
        write_extras(directory)
      atomic_files.write_json(os.path.join(directory, IDENTITY_FILE), self.identity, indent=1)
      if not first:
        return self.manager.save(checkpoint_number=number)
      # TF's state file names the checkpoint relative to its directory, so it
      # stays valid through the rename.
      tf.train.CheckpointManager(self._checkpoint, directory,
                                 max_to_keep=self._max_to_keep).save(checkpoint_number=number)
      if os.path.isdir(self.directory) and not os.listdir(self.directory):
        os.rmdir(self.directory)  # an empty one left by an earlier tfrl
      os.rename(directory, self.directory)  # refused (ENOTEMPTY, EEXIST) over anything else
      atomic_files.fsync_directory(os.path.dirname(os.path.abspath(self.directory)))
      self.manager = tf.train.CheckpointManager(self._checkpoint, self.directory,
                                                max_to_keep=self._max_to_keep)
      return self.manager.latest_checkpoint
    except (OSError, tf.errors.OpError) as e:
      raise cli.RunFailed(
          f"cannot write checkpoint {number} in {self.directory}: {resume.first_line(e)}; "
          f"the latest complete one is {self.latest or 'none'}") from e
