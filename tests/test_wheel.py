"""The wheel, as a user gets it: built from this source, installed (not
editable) into a fresh virtualenv, and run by preset name from a folder that
is not the repository.

The fresh venv gets its dependencies (TensorFlow, ale-py, ...) from this
interpreter's site-packages through a .pth file that points at a folder of
links to them, less any tfrl: pip then resolves the wheel's requirements
against them without a download (`--no-index`), and the only tfrl the venv
can import is the wheel's.

Cost: the wheel build links every op family (ALE and the op objects of the
install come from the build cache, ~/.cache/tfrl), then one CartPole
generation of the GA.
"""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a build from a clone would not see: VCS data, builds, venvs, compiled ops.
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                     "__pycache__", "*.so", "bazel-*", "third_party_local",
                                     ".pytest_cache")
# Kept out of the fresh venv's view of this interpreter's packages: any tfrl
# (the editable install of a clone among them) and pip (the venv has its own).
_NOT_SHARED = ("tfrl", "__editable__", "pip")


def _run(args, **kwargs):
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  out = subprocess.run(args, env=env, capture_output=True, text=True, **kwargs)
  if out.returncode:
    raise AssertionError(f"{' '.join(map(str, args))} exited {out.returncode}:\n"
                         f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
  return out


def _shared_packages(folder):
  """A folder of links to this interpreter's installed packages, less tfrl."""
  os.makedirs(folder)
  sources = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
  for source in sources:
    for name in os.listdir(source):
      if not name.startswith(_NOT_SHARED) and not name.endswith(".pth"):
        target = os.path.join(folder, name)
        if not os.path.exists(target):
          os.symlink(os.path.join(source, name), target)
  return folder


class WheelTest(absltest.TestCase):

  def test_packaged_folders_are_the_package_folders(self):
    # pyproject.toml lists the packages (flags/ is mapped in as tfrl.flags):
    # a new package folder under tfrl/ must be added to the list.
    import tomllib  # pylint: disable=import-outside-toplevel
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
      setuptools_config = tomllib.load(f)["tool"]["setuptools"]
    folders = {os.path.relpath(os.path.dirname(p), _ROOT).replace(os.sep, ".")
               for p in glob.glob(os.path.join(_ROOT, "tfrl", "**", "*.py"), recursive=True)}
    self.assertEqual(set(setuptools_config["packages"]), folders | {"tfrl.flags"})
    self.assertEqual(setuptools_config["package-dir"], {"tfrl.flags": "flags"})

  def test_installed_wheel_runs_a_preset_by_name(self):
    work = tempfile.mkdtemp(prefix="tfrl-wheel-")
    try:
      self._build_install_and_run(work)
    finally:
      shutil.rmtree(work, ignore_errors=True)

  def _build_install_and_run(self, work):
    source = os.path.join(work, "source")
    shutil.copytree(_ROOT, source, ignore=_NOT_SOURCE, symlinks=True)
    dist = os.path.join(work, "dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", dist, source], cwd=work, timeout=1500)
    [wheel] = glob.glob(os.path.join(dist, "tfrl-*.whl"))
    with zipfile.ZipFile(wheel) as z:
      names = z.namelist()
    presets = {f"tfrl/flags/{os.path.basename(p)}"
               for p in glob.glob(os.path.join(_ROOT, "flags", "*.flags"))}
    self.assertEqual({n for n in names if n.startswith("tfrl/flags/")}, presets)
    ops = [n for n in names if n.startswith("tfrl/ops/_") and n.endswith("_ops.so")]
    self.assertNotEqual(ops, [])

    venv = os.path.join(work, "venv")
    _run([sys.executable, "-m", "venv", venv], timeout=300)
    python = os.path.join(venv, "bin", "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    with open(os.path.join(site, "shared_dependencies.pth"), "w") as f:
      f.write(_shared_packages(os.path.join(work, "shared")) + "\n")
    # With its requirements resolved (no --no-deps), from nothing but what is there.
    _run([python, "-m", "pip", "install", "--no-index", wheel], timeout=600)

    elsewhere = os.path.join(work, "elsewhere")
    os.makedirs(elsewhere)
    # The wheel's tfrl, its presets and its compiled ops (each loads in TF).
    # (mujoco first: the MuJoCo ops share the libmujoco its modules load.)
    where = _run([python, "-c", "import mujoco, glob, os, tensorflow as tf, tfrl.ops, "
                  "tfrl.presets as p; "
                  "print(p.__file__); print(p.path('ga_cartpole', 'tfrl.ga')); "
                  "ops = sorted(glob.glob(os.path.join(os.path.dirname(tfrl.ops.__file__), "
                  "'_*_ops.so'))); [tf.load_op_library(o) for o in ops]; print(*ops)"],
                 cwd=elsewhere).stdout.split()
    self.assertEqual(where, [os.path.join(site, "tfrl", "presets.py"),
                             os.path.join(site, "tfrl", "flags", "ga_cartpole.flags")]
                     + sorted(os.path.join(site, o) for o in ops))

    logdir = os.path.join(work, "run")
    out = _run([python, "-m", "tfrl.ga", "--preset=ga_cartpole", "--generations=1",
                f"--logdir={logdir}", "--noexport"], cwd=elsewhere, timeout=600)
    self.assertIn("gen    1", out.stdout + out.stderr)
    with open(os.path.join(logdir, "flags.txt")) as f:
      recorded = f.read().splitlines()
    # The preset's settings (not the defaults) and the command line's override.
    for line in ("--env=CartPole-v1", "--population=32", "--hidden=16", "--generations=1"):
      self.assertIn(line, recorded)


if __name__ == "__main__":
  absltest.main()
