"""TD3's checkpoints: TF checkpoints, each with the replay buffer of its step.

    store = ReplayCheckpoints(os.path.join(logdir, "checkpoints"))

Checkpoint `<dir>/ckpt-<step>` has its buffer in `<dir>/replay-<step>.npz`
(the algorithm's `replay`, a `ReplayBuffer`). Crash safety: a save writes the
buffer first (to a temporary name, renamed), then the TF checkpoint, and only
then removes the buffer of the previous one, so the latest checkpoint always
has its own buffer. A resume refuses a checkpoint whose buffer is missing
unless `resume_without_replay` (the buffer then starts empty).
"""

import glob
import os

from absl import logging

from tfrl import errors
from tfrl import tf_checkpoints


def replay_path(checkpoint_path: str) -> str:
  """The replay buffer saved with `<dir>/ckpt-<step>`: `<dir>/replay-<step>.npz`."""
  directory, name = os.path.split(checkpoint_path)
  return os.path.join(directory, "replay-" + name.split("-", 1)[1] + ".npz")


class ReplayCheckpoints(tf_checkpoints.RunCheckpoints):
  """See the module docstring."""

  def __init__(self, directory: str, resume_without_replay: bool = False,
               max_to_keep: int = 2):
    super().__init__(directory, max_to_keep)
    self._resume_without_replay = resume_without_replay

  def write_extras(self, algorithm, directory: str, number: int) -> None:
    path = os.path.join(directory, f"replay-{number}.npz")
    try:
      algorithm.replay.save(path)
    except OSError as e:
      raise errors.RunFailed(f"cannot write the replay buffer {path}: {e.strerror or e}; "
                          f"the latest complete checkpoint is {self.latest}") from e

  def save(self, algorithm, number, identity) -> str:
    path = super().save(algorithm, number, identity)
    keep = replay_path(path)
    for other in glob.glob(os.path.join(self.directory, "replay*.npz*")):
      if other != keep:
        try:
          os.remove(other)
        except OSError:
          pass
    return path

  def restore_extras(self, algorithm, checkpoint_path: str) -> None:
    path = replay_path(checkpoint_path)
    if os.path.exists(path):
      algorithm.replay.load(path)  # raises resume.CorruptCheckpoint for a bad file
      return
    if not self._resume_without_replay:
      raise ValueError(f"cannot resume from {checkpoint_path}: its replay buffer {path} is "
                       f"missing; pass --resume_without_replay to resume with an empty "
                       f"buffer.")
    logging.warning("Resuming from %s with an empty replay buffer (--resume_without_replay).",
                    checkpoint_path)
