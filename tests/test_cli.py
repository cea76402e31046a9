"""Entry points end on bad input with one readable line and exit code 2, and each
algorithm's entry point runs through the run skeleton (its `build`, then
`run_loop.run`): the skeleton's lock and checkpoint checks answer for it."""

import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from tfrl import cli

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BadInputTest(parameterized.TestCase):

  @parameterized.parameters(
      ("tfrl.td3", ["--env=Pendulum-v1", "--batch_size=0"], "batch_size must be >= 1"),
      ("tfrl.ga", ["--env=CartPole-v1", "--population=-3"], "population must be >= 2"),
      ("tfrl.es", ["--env=CartPole-v1", "--population=3"], "must be even"),
      ("tfrl.ga3c", ["--env=CartPole-v1", "--profile_steps=7"], "--profile_steps"),
  )
  def test_one_line_and_exit_code_2(self, module, args, expected):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    logdir = os.path.join(tempfile.mkdtemp(), "run")
    out = subprocess.run([sys.executable, "-m", module, *args, f"--logdir={logdir}"],
                         env=env, cwd=_ROOT, capture_output=True, text=True, timeout=180)
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertNotIn("Traceback", out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith(f"{module}: error: "), last)
    self.assertIn(expected, last)

  @parameterized.parameters(
      ("tfrl.td3", ["--env=Pendulum-v1", "--batch_size=0"], "batch_size must be >= 1"),
      ("tfrl.td3", ["--env=Pendulum-v1", "--dense_layer=bogus"], "--dense_layer=bogus"),
      ("tfrl.ga3c", ["--env=CartPole-v1", "--profile_steps=7"], "--profile_steps"),
      ("tfrl.ga3c", ["--env=CartPole-v1", "--no_such_flag"], "no_such_flag"),
      ("tfrl.ga", ["--env=CartPole-v1", "--population=-3"], "population must be >= 2"),
      ("tfrl.es", ["--env=CartPole-v1", "--virtual_batch_norm", "--vbn_reference_size=1"],
       "--vbn_reference_size must be >= 2"),
      ("tfrl.random_search", ["--env=CartPole-v1", "--arch=mlp", "--activation=sigmoid"],
       "--activation"),
      # A logdir that is a file, or below one (README.md, from the repository root).
      ("tfrl.td3", ["--env=Pendulum-v1", "--logdir=README.md"],
       "--logdir=README.md is a file, not a directory."),
      ("tfrl.ga3c", ["--env=CartPole-v1", "--logdir=README.md/run"],
       "--logdir=README.md/run cannot be created: Not a directory."),
  )
  def test_refused_before_tensorflow_is_imported(self, module, args, expected):
    # Flags are parsed and checked first: a bad one costs no TensorFlow import.
    script = ("import runpy, sys\n"
              "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
              "try:\n"
              "  runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
              "finally:\n"
              "  print('tensorflow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script, module, *args],
                         env=dict(os.environ, PYTHONPATH=_ROOT), cwd=_ROOT,
                         capture_output=True, text=True, timeout=180)
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertEqual(out.stdout.split(), ["False"])
    self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
    self.assertIn(expected, out.stderr)

  def test_tensorflow_flags_are_the_ones_its_import_defines(self):
    script = ("import sys\n"
              "from absl import flags\n"
              "import tfrl.ga.__main__, tfrl.es.__main__, tfrl.td3.__main__, tfrl.ga3c.__main__\n"
              "before = set(flags.FLAGS)\n"
              "import tfrl.ga3c.system, tfrl.td3.loop, tfrl.neuroevolution.runner, tfrl.run_loop\n"
              "print(' '.join(sorted(set(flags.FLAGS) - before)))\n")
    out = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=_ROOT),
                         cwd=_ROOT, capture_output=True, text=True, timeout=180, check=True)
    self.assertEqual(out.stdout.split(), sorted(cli.TENSORFLOW_FLAGS))

  def test_an_older_flags_file_with_tensorflows_flags_still_parses(self):
    # Written when the entry points imported TensorFlow before parsing: its
    # flags are there. They parse (after its import); the file's own bad value
    # is then what is refused.
    path = os.path.join(tempfile.mkdtemp(), "flags.txt")
    with open(path, "w") as f:
      f.write("--env=Pendulum-v1\n--test_random_seed=301\n--batch_size=0\n")
    out = subprocess.run([sys.executable, "-m", "tfrl.td3", f"--flagfile={path}",
                          f"--logdir={os.path.join(os.path.dirname(path), 'run')}"],
                         env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
                         cwd=_ROOT, capture_output=True, text=True, timeout=180)
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertEqual(out.stderr.strip().splitlines()[-1],
                     "tfrl.td3: error: TD3Config.batch_size must be >= 1, got 0.")

  def test_a_full_disk_is_one_line_and_exit_code_1(self):
    script = ("import errno\n"
              "from tfrl import cli\n"
              "def main(argv):\n"
              "  raise OSError(errno.ENOSPC, 'No space left on device', '/logs/flags.txt')\n"
              "cli.run(main, 'tfrl.x')\n")
    out = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=_ROOT),
                         cwd=_ROOT, capture_output=True, text=True, timeout=60)
    self.assertEqual(out.returncode, 1, out.stderr)
    self.assertEqual(out.stderr.strip(), "tfrl.x: error: cannot write /logs/flags.txt: No "
                     "space left on device")


# Short runs of the entry points, one per algorithm family (ES and random search
# run through the GA's `tfrl.neuroevolution.runner`); the tests below end them in
# the run skeleton (tfrl.run_loop) before they train.
_ARGS = {
    "tfrl.ga": ["--env=CartPole-v1", "--population=4", "--generations=1", "--num_envs=4",
                "--hidden=4", "--noise_table_size=10000"],
    "tfrl.ga3c": ["--env=CartPole-v1", "--agents=1", "--max_agents=1", "--max_frames=100"],
    "tfrl.td3": ["--env=Pendulum-v1", "--total_steps=20", "--start_steps=10",
                 "--hidden_sizes=8", "--batch_size=4", "--eval_every=0"],
}

# A checkpoint that is there but cannot be read, per kind of entry point.
_TRUNCATED = {
    "tfrl.ga": ("checkpoint.json", '{"algorithm": "ga", "generation": 3, "fr',
                "not valid JSON, truncated?"),
    "tfrl.ga3c": ("checkpoints/checkpoint", 'model_checkpoint_path: "ckpt-1',
                  "not a checkpoint state, truncated?"),
    "tfrl.td3": ("checkpoints/checkpoint", "", "names no checkpoint (empty or truncated)"),
}


class BadLogdirTest(parameterized.TestCase):

  def _tempdir(self):
    path = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, path, ignore_errors=True)
    return path

  def _run(self, module, logdir, *extra):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-m", module, *_ARGS[module], f"--logdir={logdir}",
                          *extra], env=env, cwd=_ROOT, capture_output=True, text=True,
                         timeout=180)
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertNotIn("Traceback", out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith(f"{module}: error: "), last)
    self.assertLen([l for l in out.stderr.splitlines() if ": error: " in l], 1)
    return last[len(f"{module}: error: "):]

  @parameterized.parameters(*sorted(_ARGS))
  def test_logdir_that_is_a_file(self, module):
    path = os.path.join(self._tempdir(), "file")
    with open(path, "w") as f:
      f.write("not a folder")
    self.assertEqual(self._run(module, path), f"--logdir={path} is a file, not a directory.")
    self.assertIn("cannot be created: Not a directory",
                  self._run(module, os.path.join(path, "run")))

  @parameterized.parameters(*sorted(_TRUNCATED))
  def test_unreadable_checkpoint_is_kept_and_one_line(self, module):
    logdir = os.path.join(self._tempdir(), "run")
    name, content, problem = _TRUNCATED[module]
    path = os.path.join(logdir, name)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
      f.write(content)
    message = self._run(module, logdir, "--resume")
    self.assertStartsWith(message, f"cannot load the checkpoint {path}: {problem}")
    # A fresh run refuses it too (the skeleton's refusal, whose rules
    # tests/test_run_loop.py checks), and neither run changed a file.
    self.assertIn("of an earlier run; pass --resume to continue it, or pick another "
                  "--logdir (nothing was overwritten).", self._run(module, logdir))
    with open(path) as f:
      self.assertEqual(f.read(), content)
    self.assertEqual(sorted(os.listdir(logdir)), sorted({name.split("/")[0]}))


if __name__ == "__main__":
  absltest.main()
