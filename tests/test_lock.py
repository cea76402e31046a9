"""requirements.lock: the versions both README commands install.

The lock pins every distribution that tfrl, its extras and its build need, as
one resolution of all of them (its header names the command that wrote it;
docs/building.md). The README's commands install with
`PIP_CONSTRAINT=requirements.lock`, which also reaches pip's isolated build
environment, so that a fresh machine gets exactly what CI tested, whatever
has been released since. These tests fail when:

  * a distribution in this venv is missing from the lock or has another
    version than the lock's (the install did not follow the lock, or the lock
    lacks a package a new release started to need);
  * pyproject.toml declares a requirement (a dependency, an extra's, the build
    system's) that the lock's version does not satisfy, names a package in two
    places with different specifiers, or adds one the lock never resolved;
  * an extra does not resolve against the lock with pip's own resolver,
    offline (`--no-index`), from what is installed.
"""

import collections
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tomllib

from absl.testing import absltest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = os.path.join(_ROOT, "requirements.lock")
# In every venv, but installed by venv itself, not by the README's commands.
_NOT_LOCKED = {"pip", "tfrl"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*$")
_VIA_PROJECT = "tfrl (pyproject.toml)"


def locked_versions(path: str = LOCK) -> dict:
  """{canonical name: Version} of the lock's `name==version` lines."""
  pins = {}
  with open(path) as f:
    for number, line in enumerate(f, 1):
      if not line.strip() or line.lstrip().startswith("#"):
        continue
      match = _PIN.match(line)
      if not match:
        raise AssertionError(f"{path}:{number}: not a 'name==version' pin: {line.strip()!r}")
      name = canonicalize_name(match.group(1))
      if name in pins:
        raise AssertionError(f"{path}:{number}: {name} pinned twice")
      pins[name] = Version(match.group(2))
  return pins


def project_requirements() -> dict:
  """{place: [Requirement]}: pyproject.toml's dependencies, each extra's and
  the build system's."""
  with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
    pyproject = tomllib.load(f)
  places = {"dependencies": pyproject["project"]["dependencies"],
            "build-system": pyproject["build-system"]["requires"]}
  for extra, requirements in pyproject["project"]["optional-dependencies"].items():
    places[f"extra {extra}"] = requirements
  return {place: [Requirement(r) for r in requirements] for place, requirements in places.items()}


def disagreements(requirements: dict, pins: dict) -> list:
  """What in `requirements` ({place: [Requirement]}) the lock's `pins` do not
  satisfy, or names with two different specifiers."""
  problems = []
  specifiers = collections.defaultdict(set)
  for place, listed in requirements.items():
    for requirement in listed:
      name = canonicalize_name(requirement.name)
      if name == "tfrl":
        continue  # the test extra takes other extras by name
      specifiers[name].add((str(requirement.specifier), place))
      if name not in pins:
        problems.append(f"{place}: {requirement} is not in requirements.lock")
      elif not requirement.specifier.contains(pins[name], prereleases=True):
        problems.append(f"{place}: {requirement} excludes the lock's {name}=={pins[name]}")
  for name, found in sorted(specifiers.items()):
    if len({specifier for specifier, _ in found}) > 1:
      problems.append(f"{name} is declared differently: "
                      + ", ".join(f"{place}: '{spec}'" for spec, place in
                                 sorted(found, key=lambda found: found[1])))
  return problems


# The venv's own folders: what pip installed there, not the vendored
# distributions that setuptools and Ray put on sys.path once imported.
SITE = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def installed_versions() -> dict:
  """{canonical name: Version} of the distributions installed in this venv."""
  return {canonicalize_name(d.metadata["Name"]): Version(d.version)
          for d in importlib.metadata.distributions(path=SITE)}


class LockTest(absltest.TestCase):

  def test_installed_distributions_are_the_locks(self):
    pins = locked_versions()
    installed = installed_versions()
    unpinned = sorted(n for n in installed if n not in pins and n not in _NOT_LOCKED)
    self.assertEqual(unpinned, [], "installed but not in requirements.lock")
    other = {n: f"installed {v}, locked {pins[n]}" for n, v in installed.items()
             if n in pins and v != pins[n]}
    self.assertEqual(other, {})

  def test_declared_requirements_agree_with_the_lock(self):
    self.assertEqual(disagreements(project_requirements(), locked_versions()), [])

  def test_the_lock_resolves_exactly_what_pyproject_declares(self):
    # The lock's header says which packages the project itself asked for
    # ("via tfrl (pyproject.toml)"): a dependency added to pyproject.toml
    # without writing the lock again, or one dropped, shows here.
    with open(LOCK) as f:
      text = f.read()
    self.assertIn("--all-extras", text.splitlines()[1])
    direct, current = set(), None
    for line in text.splitlines():
      match = _PIN.match(line)
      if match:
        current = canonicalize_name(match.group(1))
      elif _VIA_PROJECT in line:
        direct.add(current)
    declared = {canonicalize_name(r.name) for place, listed in project_requirements().items()
                if place != "build-system" for r in listed} - {"tfrl"}
    self.assertEqual(direct, declared)

  def test_both_readme_commands_install_with_the_lock(self):
    with open(os.path.join(_ROOT, "README.md")) as f:
      readme = f.read()
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
      command = readme.split(marker, 1)[1].split("```", 2)[1]
      installs = re.findall(r"(\S*)\s+\.venv/bin/pip install", command)
      self.assertEqual(installs, ["PIP_CONSTRAINT=$PWD/requirements.lock"], marker)

  def test_disagreements_are_found(self):
    # The checks above would fail on the drift that broke a fresh install:
    # one extra pinning what another leaves free, a pin the lock does not have.
    pins = {"imageio": Version("2.38.2"), "mujoco": Version("4.0.0")}
    requirements = {"extra mujoco": [Requirement("imageio==2.38.1")],
                    "extra test": [Requirement("imageio"), Requirement("mujoco==4.0.0"),
                                   Requirement("pytest>=8")]}
    self.assertEqual(disagreements(requirements, pins), [
        "extra mujoco: imageio==2.38.1 excludes the lock's imageio==2.38.2",
        "extra test: pytest>=8 is not in requirements.lock",
        "imageio is declared differently: extra mujoco: '==2.38.1', extra test: ''"])

  def test_every_extra_resolves_offline_against_the_lock(self):
    # pip's resolver, without an index: every requirement of each extra (and
    # of what they require) must be met by an installed distribution that
    # the lock allows; anything else would need a download and fails.
    for place, requirements in project_requirements().items():
      if place == "build-system":
        continue
      with self.subTest(place=place):
        names = [str(r) for r in requirements if canonicalize_name(r.name) != "tfrl"]
        # No config file either: a machine's own find-links could serve a wheel.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_CONSTRAINT=LOCK,
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run",
                              "--no-index", *names],
                             env=env, capture_output=True, text=True, check=False)
        self.assertEqual(out.returncode, 0, out.stdout[-2000:] + out.stderr[-2000:])
        self.assertNotIn("Would install", out.stdout)


if __name__ == "__main__":
  absltest.main()
