"""RunCheckpoints never writes over its latest checkpoint.

TF writes the index file of an existing checkpoint in place (only the data
file is renamed into place), so a save under the latest checkpoint's number
that dies half-way leaves a truncated index and no whole checkpoint. GA3C
numbers its checkpoints by training steps and saved again under the same
number whenever no training step happened since its last save (e.g. the
first save of a resumed run).

A first save killed at any point leaves either no checkpoint or a whole one:
TF renames the index into place before it writes the state file.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import tensorflow as tf

from tfrl import resume
from tfrl import tf_checkpoints

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IDENTITY = {"algorithm": "test"}
_RENAMES = "rename,renameat,renameat2"


_NO_STRACE = ("needs strace, with ptrace allowed, to kill a save half-way: apt-get install "
              "strace (the README's test command installs it)")


def _strace():
  strace = shutil.which("strace")
  if strace is None or subprocess.run([strace, "-qq", "-o", os.devnull, "true"],
                                      capture_output=True).returncode != 0:
    return None
  return strace


class _Saved:
  """What the store saves of an algorithm: its `checkpoint`."""

  def __init__(self, variable):
    self.checkpoint = tf.train.Checkpoint(v=variable)


def _read(path):
  with open(path, "rb") as f:
    return f.read()


class RunCheckpointsTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    self.directory = os.path.join(tempfile.mkdtemp(prefix="tfrl_tf_checkpoints_"), "ckpts")
    self.addCleanup(shutil.rmtree, os.path.dirname(self.directory), ignore_errors=True)

  def _store(self):
    return tf_checkpoints.RunCheckpoints(self.directory, max_to_keep=3)

  def _restore(self, variable):
    """What a resume restores into `variable`: the latest checkpoint's path, or None."""
    store = self._store()
    if not store.exists():
      return None
    store.check()
    return store.restore(_Saved(variable))

  def test_saving_the_latest_number_again_takes_the_next_one(self):
    v = tf.Variable([1.0, 2.0])
    saver, saved = self._store(), _Saved(v)
    first = saver.save(saved, 5, _IDENTITY)
    self.assertEqual(os.path.basename(first), "ckpt-5")
    files = {name: _read(os.path.join(self.directory, name))
             for name in os.listdir(self.directory) if name.startswith("ckpt-5.")}
    v.assign([3.0, 4.0])
    second = saver.save(saved, 5, _IDENTITY)
    self.assertEqual(os.path.basename(second), "ckpt-6")
    self.assertEqual(saver.latest_number, 6)
    for name, content in files.items():  # ckpt-5 untouched
      self.assertEqual(_read(os.path.join(self.directory, name)), content, name)
    # never below the latest
    self.assertEqual(os.path.basename(saver.save(saved, 4, _IDENTITY)), "ckpt-7")
    self.assertEqual(os.path.basename(saver.save(saved, 10, _IDENTITY)), "ckpt-10")
    v.assign([0.0, 0.0])
    self.assertEqual(self._restore(v), saver.latest)
    self.assertAllEqual(v.numpy(), [3.0, 4.0])

  def test_an_older_checkpoint_restores_without_its_optional_entries_only(self):
    # Written before the format gained `extra`: `v` comes back, `extra` keeps
    # its initial value; an entry not declared optional must be there.
    self._store().save(_Saved(tf.Variable([1.0, 2.0])), 1, _IDENTITY)
    v, extra = tf.Variable([0.0, 0.0]), tf.Variable([7.0])
    newer = _Saved(v)
    newer.checkpoint_entries = {"v": v, "extra": extra}
    newer.checkpoint = tf.train.Checkpoint(**newer.checkpoint_entries)
    with self.assertRaisesRegex(ValueError, "does not match this run"):
      self._store().restore(newer)
    newer.optional_checkpoint_entries = ("extra",)
    self._store().restore(newer)
    self.assertAllEqual(v.numpy(), [1.0, 2.0])
    self.assertAllEqual(extra.numpy(), [7.0])
    # A checkpoint that has the optional entry restores it.
    extra.assign([3.0])
    self._store().save(newer, 2, _IDENTITY)
    extra.assign([0.0])
    self._store().restore(newer)
    self.assertAllEqual(extra.numpy(), [3.0])

  def test_a_checkpoint_without_its_identity_file_is_corrupt(self):
    v = tf.Variable([1.0, 2.0])
    self._store().save(_Saved(v), 1, _IDENTITY)
    os.remove(os.path.join(self.directory, tf_checkpoints.IDENTITY_FILE))
    with self.assertRaises(resume.CorruptCheckpoint) as cm:
      self._store().check()
    path = os.path.join(self.directory, tf_checkpoints.IDENTITY_FILE)
    self.assertStartsWith(str(cm.exception), f"cannot load the checkpoint {path}: missing")

  def test_a_kill_during_a_save_after_resuming_keeps_a_whole_checkpoint(self):
    # A resumed run saves before its counter moved (GA3C's first save when no
    # training step happened yet) and is SIGKILLed at its first write of the
    # new index file (strace's fault injection). The previous checkpoint must
    # still restore.
    strace = _strace()
    self.assertIsNotNone(strace, _NO_STRACE)
    v = tf.Variable([1.0, 2.0])
    first = self._store().save(_Saved(v), 5, _IDENTITY)
    script = textwrap.dedent("""
        import sys, types
        import tensorflow as tf
        from tfrl import tf_checkpoints
        v = tf.Variable([0.0, 0.0])
        saved = types.SimpleNamespace(checkpoint=tf.train.Checkpoint(v=v))
        saver = tf_checkpoints.RunCheckpoints(sys.argv[1], 3)
        saver.restore(saved)
        v.assign([3.0, 4.0])
        saver.save(saved, 5, {"algorithm": "test"})
        print("not killed")
    """)
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    indexes = [os.path.join(self.directory, f"ckpt-{n}.index") for n in (5, 6)]
    out = subprocess.run(
        [strace, "-f", "-qq", "-o", os.devnull, *(f"-P{p}" for p in indexes),
         "-e", "trace=write", "-e", "inject=write:signal=KILL:when=1",
         sys.executable, "-c", script, self.directory],
        env=env, capture_output=True, text=True, timeout=300)
    self.assertNotIn("not killed", out.stdout, out.stderr[-2000:])
    v.assign([0.0, 0.0])
    self.assertEqual(self._restore(v), first)
    self.assertAllEqual(v.numpy(), [1.0, 2.0])

  def test_a_kill_anywhere_in_the_first_save_leaves_no_checkpoint(self):
    # The process is SIGKILLed at its n-th rename (strace's fault injection),
    # for every n until the save completes: TF's data file, index and state
    # file, and last the rename that puts the first checkpoint in place. After
    # each kill a resume finds no checkpoint (never a broken one), and a fresh
    # run may start over what is left.
    strace = _strace()
    self.assertIsNotNone(strace, _NO_STRACE)
    script = textwrap.dedent("""
        import sys, types
        import tensorflow as tf
        from tfrl import tf_checkpoints
        v = tf.Variable([3.0, 4.0])
        saved = types.SimpleNamespace(checkpoint=tf.train.Checkpoint(v=v))
        saver = tf_checkpoints.RunCheckpoints(sys.argv[1], 3)
        print("saving", flush=True)
        saver.save(saved, 7, {"algorithm": "test"})
        print("saved", flush=True)
    """)
    # No bytecode written while importing: its renames would each cost a run
    # killed before the save.
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONDONTWRITEBYTECODE="1")
    kills = 0
    for n in range(1, 40):
      shutil.rmtree(os.path.dirname(self.directory), ignore_errors=True)
      os.makedirs(os.path.dirname(self.directory))
      out = subprocess.run(
          [strace, "-f", "-qq", "-o", os.devnull, "-e", f"trace={_RENAMES}",
           "-e", f"inject={_RENAMES}:signal=KILL:when={n}",
           sys.executable, "-c", script, self.directory],
          env=env, capture_output=True, text=True, timeout=300)
      if "saved" in out.stdout:
        break
      if "saving" not in out.stdout:
        continue  # killed before the save (a rename while importing)
      kills += 1
      v = tf.Variable([0.0, 0.0])
      self.assertIsNone(self._restore(v), n)
      self.assertFalse(tf_checkpoints.has_checkpoint(self.directory), n)
      fresh = self._store().save(_Saved(v), 1, _IDENTITY)  # a fresh run
      self.assertEqual(os.path.basename(fresh), "ckpt-1")
    else:
      self.fail("the save did not complete within 40 renames")
    # run.json, TF's data file, index and state file, the directory.
    self.assertGreaterEqual(kills, 5)
    v = tf.Variable([0.0, 0.0])
    self.assertEqual(os.path.basename(self._restore(v)), "ckpt-7")
    self.assertAllEqual(v.numpy(), [3.0, 4.0])

if __name__ == "__main__":
  tf.test.main()
