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


def _read(path):
  with open(path, "rb") as f:
    return f.read()


class RunCheckpointsTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    self.directory = os.path.join(tempfile.mkdtemp(prefix="tfrl_tf_checkpoints_"), "ckpts")
    self.addCleanup(shutil.rmtree, os.path.dirname(self.directory), ignore_errors=True)

  def _saver(self, variable, resume=False):
    return tf_checkpoints.RunCheckpoints(tf.train.Checkpoint(v=variable), self.directory,
                                         _IDENTITY, max_to_keep=3, resume_run=resume)

  def test_saving_the_latest_number_again_takes_the_next_one(self):
    v = tf.Variable([1.0, 2.0])
    saver = self._saver(v)
    first = saver.save(5)
    self.assertEqual(os.path.basename(first), "ckpt-5")
    files = {name: _read(os.path.join(self.directory, name))
             for name in os.listdir(self.directory) if name.startswith("ckpt-5.")}
    v.assign([3.0, 4.0])
    second = saver.save(5)
    self.assertEqual(os.path.basename(second), "ckpt-6")
    self.assertEqual(saver.latest_number, 6)
    for name, content in files.items():  # ckpt-5 untouched
      self.assertEqual(_read(os.path.join(self.directory, name)), content, name)
    self.assertEqual(os.path.basename(saver.save(4)), "ckpt-7")  # never below the latest
    self.assertEqual(os.path.basename(saver.save(10)), "ckpt-10")
    v.assign([0.0, 0.0])
    self.assertEqual(self._saver(v, resume=True).restore_latest(), saver.latest)
    self.assertAllEqual(v.numpy(), [3.0, 4.0])

  def test_a_kill_during_a_save_after_resuming_keeps_a_whole_checkpoint(self):
    # A resumed run saves before its counter moved (GA3C's first save when no
    # training step happened yet) and is SIGKILLed at its first write of the
    # new index file (strace's fault injection). The previous checkpoint must
    # still restore.
    strace = _strace()
    self.assertIsNotNone(strace, _NO_STRACE)
    v = tf.Variable([1.0, 2.0])
    first = self._saver(v).save(5)
    script = textwrap.dedent("""
        import sys
        import tensorflow as tf
        from tfrl import tf_checkpoints
        v = tf.Variable([0.0, 0.0])
        saver = tf_checkpoints.RunCheckpoints(tf.train.Checkpoint(v=v), sys.argv[1],
                                              {"algorithm": "test"}, 3, True)
        saver.restore_latest()
        v.assign([3.0, 4.0])
        saver.save(5)
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
    self.assertEqual(self._saver(v, resume=True).restore_latest(), first)
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
        import sys
        import tensorflow as tf
        from tfrl import tf_checkpoints
        v = tf.Variable([3.0, 4.0])
        saver = tf_checkpoints.RunCheckpoints(tf.train.Checkpoint(v=v), sys.argv[1],
                                              {"algorithm": "test"}, 3, False)
        print("saving", flush=True)
        saver.save(7)
        print("saved", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
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
      self.assertIsNone(self._saver(v, resume=True).restore_latest(), n)
      self.assertFalse(tf_checkpoints.has_checkpoint(self.directory), n)
      self.assertEqual(os.path.basename(self._saver(v).save(1)), "ckpt-1")  # a fresh run
    else:
      self.fail("the save did not complete within 40 renames")
    # run.json, TF's data file, index and state file, the directory.
    self.assertGreaterEqual(kills, 5)
    v = tf.Variable([0.0, 0.0])
    self.assertEqual(os.path.basename(self._saver(v, resume=True).restore_latest()), "ckpt-7")
    self.assertAllEqual(v.numpy(), [3.0, 4.0])

if __name__ == "__main__":
  tf.test.main()
