"""The wheel, as a user gets it: built from this source, installed (not
editable) with its `mujoco` extra into a fresh virtualenv holding only its
declared dependencies, and run by preset name from a folder that is not the
repository.

The fresh venv gets its dependencies (TensorFlow, ale-py, ...) from this
interpreter's site-packages through a .pth file that points at a folder of
links to the files of the distributions the wheel requires (with the extra),
and of what they require in turn, and nothing else: no test tool, no Ray, no
other tfrl. pip then resolves the wheel's requirements against them without
a download (`--no-index`), and importing every tfrl module there finds any
dependency the package uses but does not declare.

The wheel must hold every op family's library (a wheel without one would
fall back to gymnasium's envs, or fail, only at run time), and `make_env`
in the venv must pick the MuJoCo ops for a task they serve.

Cost: the wheel build links every op family (ALE and the op objects of the
install come from the build cache, ~/.cache/tfrl), the imports, then one
CartPole generation of the GA.
"""

import ast
import collections
import glob
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile

from absl.testing import absltest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a build from a clone would not see: VCS data, builds, venvs, compiled ops.
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                     "__pycache__", "*.so", "bazel-*", "third_party_local",
                                     ".pytest_cache")
# The extra the wheel is installed with (the MuJoCo ops link its libmujoco).
_EXTRA = "mujoco"
# Imports every tfrl module (not the entry points' __main__, not the op
# libraries, which are no Python modules) and prints which failed.
_IMPORT_ALL = """
import importlib, json, pkgutil, tfrl
failed = {}
names = [m.name for m in pkgutil.walk_packages(tfrl.__path__, "tfrl.", onerror=lambda name:
         failed.setdefault(name, "walk_packages could not import it"))
         if not m.name.endswith(".__main__") and not m.name.startswith("tfrl.ops._")]
for name in names:
  try:
    importlib.import_module(name)
  except Exception as e:  # pylint: disable=broad-except
    failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"modules": names, "failed": failed}))
"""
_MAKE_ENV = ("from tfrl.envs import EnvProtocol, make_env; "
             "print(type(make_env(EnvProtocol(env='HalfCheetah-v5'), 1)).__name__)")


# The venv's own folders: setuptools and Ray put vendored copies of
# distributions (packaging, psutil, ...) on sys.path once imported.
_SITE = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})

# The whole test's time, under pytest's 900 s timeout (setup.cfg) so that a
# hung step fails here and the test's cleanup runs; a bound that only catches
# a hang (the wheel build takes a few minutes with the object cache).
_BUDGET_SECONDS = 840


def _run(args, deadline, extra_env=None, **kwargs):
  """Runs `args` (with `extra_env` set); fails with their output if they exit
  non-zero or outlive `deadline` (time.monotonic()), when subprocess.run kills them."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "PYTHONHOME") and not k.startswith(("TFRL_", "PIP_"))}
  env.update(extra_env or {})
  kwargs["timeout"] = max(deadline - time.monotonic(), 1.0)
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  out = subprocess.run(args, env=env, capture_output=True, text=True, **kwargs)
  if out.returncode:
    raise AssertionError(f"{' '.join(map(str, args))} exited {out.returncode}:\n"
                         f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
  return out


def op_families():
  """The op families of custom_ops/ (each folder with C++ sources)."""
  folder = os.path.join(_ROOT, "custom_ops")
  return sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d, "cc")))


def wheel_requirements(wheel, extras=()):
  """The Requires-Dist of `wheel`'s metadata that apply with `extras`."""
  with zipfile.ZipFile(wheel) as z:
    [metadata] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
    lines = z.read(metadata).decode().splitlines()
  requirements = [Requirement(line.split(":", 1)[1].strip()) for line in lines
                  if line.startswith("Requires-Dist:")]
  return [r for r in requirements
          if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("",) + extras)]


def installed_closure(requirements, missing_ok=False):
  """{distribution name: its extras} of `requirements` and, transitively,
  what they require, as installed in this interpreter (a missing one raises
  PackageNotFoundError, or with `missing_ok` is kept without what it requires)."""
  extras = {}
  todo = list(requirements)
  while todo:
    requirement = todo.pop()
    name = canonicalize_name(requirement.name)
    if name in extras and set(requirement.extras) <= extras[name]:
      continue
    extras.setdefault(name, set()).update(requirement.extras)
    try:
      found = list(importlib.metadata.distributions(name=name, path=_SITE))
      if not found:
        raise importlib.metadata.PackageNotFoundError(name)
      dist = found[0]
    except importlib.metadata.PackageNotFoundError:
      if missing_ok:
        continue
      raise
    for line in dist.requires or ():
      r = Requirement(line)
      if r.marker is None or any(r.marker.evaluate({"extra": e})
                                 for e in extras[name] | {""}):
        todo.append(r)
  return extras


def imported_modules(folder):
  """{top-level module: [files]} of the absolute imports of the .py files
  under `folder`, less the standard library's and tfrl's (lazy imports too)."""
  found = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(folder, "**", "*.py"), recursive=True)):
    with open(path) as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names = [node.module]
      else:
        continue
      for name in names:
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top not in ("tfrl", "__future__"):
          found[top].append(os.path.relpath(path, _ROOT))
  return found


def _link(source, target):
  os.makedirs(os.path.dirname(target), exist_ok=True)
  if not os.path.lexists(target):
    os.symlink(source, target)


def declared_packages(folder, names):
  """A folder of links to the installed files of the distributions `names`
  (as their RECORDs list them) and nothing else: a top-level folder wholly
  theirs is one link; one they share with others (a namespace package such
  as google/) is a folder of links to their files only."""
  owners = collections.defaultdict(set)  # top-level entry -> distributions
  files = collections.defaultdict(list)  # top-level entry -> [(source, relative path)]
  for dist in importlib.metadata.distributions(path=_SITE):
    name = canonicalize_name(dist.metadata["Name"])
    for path in dist.files or ():
      if path.parts[0] != "..":  # scripts in bin/ and the like
        owners[path.parts[0]].add(name)
        if name in names:
          files[path.parts[0]].append((str(dist.locate_file(path)), str(path)))
  missing = [n for n in names if not any(n in o for o in owners.values())]
  if missing:
    raise AssertionError(f"no installed files listed for {missing} (no RECORD?)")
  os.makedirs(folder)
  for top, entries in files.items():
    if owners[top] <= set(names):
      source = entries[0][0][:len(entries[0][0]) - len(entries[0][1])] + top
      _link(source, os.path.join(folder, top))
    else:
      for source, relative in entries:
        _link(source, os.path.join(folder, relative))
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

  def test_every_import_is_a_declared_dependency(self):
    # Also the imports made only when a feature is used (matplotlib for
    # tfrl.plot, Ray for --ray_address), which importing the modules does not
    # reach: each must come from a distribution pyproject.toml declares (a
    # dependency or an extra's) or one they require.
    import tomllib  # pylint: disable=import-outside-toplevel
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
      project = tomllib.load(f)["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
      requirements += [Requirement(r) for r in extra]
    declared = set(installed_closure(requirements, missing_ok=True))
    providers = importlib.metadata.packages_distributions()
    undeclared = {module: files for module, files in imported_modules(
        os.path.join(_ROOT, "tfrl")).items()
                  if not {canonicalize_name(d) for d in providers.get(module, [module])}
                  & declared}
    self.assertEqual(undeclared, {})

  def test_installed_wheel_runs_a_preset_by_name(self):
    work = tempfile.mkdtemp(prefix="tfrl-wheel-")
    try:
      self._build_install_and_run(work, time.monotonic() + _BUDGET_SECONDS)
    finally:
      shutil.rmtree(work, ignore_errors=True)

  def _build_install_and_run(self, work, deadline):
    source = os.path.join(work, "source")
    shutil.copytree(_ROOT, source, ignore=_NOT_SOURCE, symlinks=True)
    dist = os.path.join(work, "dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", dist, source], deadline, cwd=work)
    [wheel] = glob.glob(os.path.join(dist, "tfrl-*.whl"))
    with zipfile.ZipFile(wheel) as z:
      names = z.namelist()
    presets = {f"tfrl/flags/{os.path.basename(p)}"
               for p in glob.glob(os.path.join(_ROOT, "flags", "*.flags"))}
    self.assertEqual({n for n in names if n.startswith("tfrl/flags/")}, presets)
    # Every op family's library, and no other (setup.py: tfrl/ops/_<family>_ops.so).
    self.assertEqual(op_families(), ["ale", "mujoco", "population"])
    ops = sorted(n for n in names if n.startswith("tfrl/ops/") and n.endswith(".so"))
    self.assertEqual(ops, [f"tfrl/ops/_{f}_ops.so" for f in op_families()])
    modules = sorted(n[:-len(".py")].replace("/", ".").removesuffix(".__init__")
                     for n in names if n.endswith(".py") and not n.endswith("__main__.py"))

    venv = os.path.join(work, "venv")
    _run([sys.executable, "-m", "venv", venv], deadline)
    python = os.path.join(venv, "bin", "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                deadline).stdout.strip()
    # The venv's own setuptools (venv installs one) would shadow the lock's,
    # which a user's install with an index would put in its place.
    _run([python, "-m", "pip", "uninstall", "-y", "setuptools"], deadline)
    declared = installed_closure(wheel_requirements(wheel, (_EXTRA,)))
    self.assertIn("mujoco", declared)
    for undeclared in ("tfrl", "pytest", "ray", "opencv-python-headless"):
      self.assertNotIn(undeclared, declared)
    with open(os.path.join(site, "shared_dependencies.pth"), "w") as f:
      f.write(declared_packages(os.path.join(work, "shared"), declared) + "\n")
    # With its requirements resolved (no --no-deps), from nothing but what is
    # there, under the lock as a user installs it (and no machine's pip config).
    _run([python, "-m", "pip", "install", "--no-index", f"{wheel}[{_EXTRA}]"], deadline,
         extra_env={"PIP_CONSTRAINT": os.path.join(_ROOT, "requirements.lock"),
                    "PIP_CONFIG_FILE": os.devnull})

    elsewhere = os.path.join(work, "elsewhere")
    os.makedirs(elsewhere)
    # The wheel's tfrl, its presets and its compiled ops (each loads in TF).
    # (mujoco first: the MuJoCo ops share the libmujoco its modules load.)
    where = _run([python, "-c", "import mujoco, glob, os, tensorflow as tf, tfrl.ops, "
                  "tfrl.presets as p; "
                  "print(p.__file__); print(p.path('ga_cartpole', 'tfrl.ga')); "
                  "ops = sorted(glob.glob(os.path.join(os.path.dirname(tfrl.ops.__file__), "
                  "'_*_ops.so'))); [tf.load_op_library(o) for o in ops]; print(*ops)"],
                 deadline, cwd=elsewhere).stdout.split()
    self.assertEqual(where, [os.path.join(site, "tfrl", "presets.py"),
                             os.path.join(site, "tfrl", "flags", "ga_cartpole.flags")]
                     + sorted(os.path.join(site, o) for o in ops))
    # Every module imports with the declared dependencies alone.
    imported = json.loads(_run([python, "-c", _IMPORT_ALL], deadline,
                               cwd=elsewhere).stdout.splitlines()[-1])
    self.assertEqual(imported["failed"], {})
    self.assertEqual(sorted(imported["modules"]), [m for m in modules if m != "tfrl"])
    # make_env steps a task the MuJoCo ops serve with them.
    made = _run([python, "-c", _MAKE_ENV], deadline, cwd=elsewhere).stdout.split()
    self.assertEqual(made[-1:], ["MujocoEnv"])

    logdir = os.path.join(work, "run")
    out = _run([python, "-m", "tfrl.ga", "--preset=ga_cartpole", "--generations=1",
                f"--logdir={logdir}", "--noexport"], deadline, cwd=elsewhere)
    self.assertIn("gen    1", out.stdout + out.stderr)
    with open(os.path.join(logdir, "flags.txt")) as f:
      recorded = f.read().splitlines()
    # The preset's settings (not the defaults) and the command line's override.
    for line in ("--env=CartPole-v1", "--population=32", "--hidden=16", "--generations=1"):
      self.assertIn(line, recorded)


if __name__ == "__main__":
  absltest.main()
