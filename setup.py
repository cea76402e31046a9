"""Builds tfrl's custom ops against the installed TensorFlow.

`pip install .` (or `pip install -e .`) runs `build_ext`, which
1. fetches the source distribution of the pinned ale-py release from the
   package index by name, checks its SHA-256, and builds ALE with CMake as a
   static, position-independent library (SDL off, the system's zlib), with
   profile-guided optimisation (TFRL_ALE_PGO=0 turns it off), cached under
   ~/.cache/tfrl so that later builds on the machine skip it;
2. compiles every op family, one folder `custom_ops/<family>/` with its op
   registrations `cc/ops/*.cc` and its kernels `cc/kernels/*.cc` (headers
   found there and in `custom_ops/common/`, the headers families share), into
   `tfrl/ops/_<family>_ops.so` with TensorFlow's own compile and link flags
   (tf.sysconfig). Optional parts of a family (BUILD_OPTIONS) are left out
   unless their environment variable is 1. The MuJoCo family compiles
   against the headers of the installed `mujoco` wheel and links its
   libmujoco (a build requirement; without mujoco it is left out).
   Each object file is kept in ~/.cache/tfrl/objects under a hash of
   everything that makes it (compiler, flags, the source and the headers it
   includes from this repository, the versions of TensorFlow's, MuJoCo's and
   ALE's headers), so a rebuild of unchanged sources, a wheel built after an
   install among them, compiles nothing (TFRL_OBJECT_CACHE=0 turns it off;
   objects unused for 30 days are removed).

`python setup.py configure_bazel` writes the local repositories that the
Bazel build (`BUILD`, `WORKSPACE`, `custom_ops/<family>/BUILD`) needs:
TensorFlow's headers, ALE and the installed mujoco wheel.
"""

import concurrent.futures
import dataclasses
import glob
import hashlib
import html.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request

import setuptools
from setuptools.command.build_ext import build_ext

ALE_VERSION = "0.12.1"  # Keep equal to the ale-py pin in pyproject.toml.
ALE_SDIST = f"ale_py-{ALE_VERSION}.tar.gz"
ALE_SDIST_SHA256 = "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249"
ROOT = os.path.dirname(os.path.abspath(__file__))
OPS_DIR = "custom_ops"
# The headers several op families include, found by every family's build.
COMMON_DIR = "common"
# Op families that link the emulator, and the ones that link MuJoCo.
FAMILIES_NEEDING_ALE = {"ale"}
FAMILIES_NEEDING_MUJOCO = {"mujoco"}


@dataclasses.dataclass(frozen=True)
class BuildOption:
  """An optional part of an op family: its sources (relative to the family's
  folder) and the macro its other sources test, both only when enabled."""
  family: str
  sources: tuple
  define: str
  bazel: str  # the same switch in the Bazel build


# Left out of the default build: no preset runs them and no measurement
# showed them a gain (docs/performance_notes.md). VARIABLE=1 compiles one in.
BUILD_OPTIONS = {
    "TFRL_BUILD_AMX": BuildOption(
        "population", ("cc/kernels/population_amx.cc",), "TFRL_POPULATION_AMX",
        "--define=tfrl_amx=1"),
    "TFRL_BUILD_DELTA_CONV2D": BuildOption(
        "population", ("cc/ops/population_delta_conv2d_ops.cc",
                       "cc/kernels/population_delta_conv2d.cc"),
        "TFRL_POPULATION_DELTA_CONV2D", "--define=tfrl_delta_conv2d=1"),
}


def log(message: str) -> None:
  print(f"[tfrl build] {message}", flush=True)


def file_sha256(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
  return os.environ.get("TFRL_CACHE_DIR", os.path.join(base, "tfrl"))


class _Links(html.parser.HTMLParser):
  """Collects the hrefs of a PEP 503 simple-index page."""

  def __init__(self):
    super().__init__()
    self.hrefs = []

  def handle_starttag(self, tag, attrs):
    if tag == "a":
      self.hrefs.extend(v for k, v in attrs if k == "href")


def fetch_ale_sdist(directory: str) -> str:
  """Downloads the pinned ale-py sdist by name from the package index."""
  local = os.environ.get("TFRL_ALE_SDIST")
  path = local or os.path.join(directory, ALE_SDIST)
  if not os.path.exists(path):
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    page_url = f"{index}/ale-py/"
    log(f"fetching {ALE_SDIST} from {page_url}")
    with urllib.request.urlopen(page_url, timeout=60) as page:
      parser = _Links()
      parser.feed(page.read().decode("utf-8"))
    links = [h for h in parser.hrefs if h.split("#")[0].endswith("/" + ALE_SDIST)
             or h.split("#")[0] == ALE_SDIST]
    if not links:
      raise RuntimeError(f"{ALE_SDIST} is not listed at {page_url}")
    url = urllib.parse.urljoin(page_url, links[0].split("#")[0])
    partial = path + ".part"
    with urllib.request.urlopen(url, timeout=300) as response, open(partial, "wb") as f:
      shutil.copyfileobj(response, f)
    os.replace(partial, path)
  digest = file_sha256(path)
  if digest != ALE_SDIST_SHA256:
    if not local:
      os.remove(path)
    raise RuntimeError(f"{path} has SHA-256 {digest}, expected {ALE_SDIST_SHA256}")
  return path


# ALE is built with profile-guided optimisation unless TFRL_ALE_PGO=0: an
# instrumented build plays these games (custom_ops/ale/cc/tools/
# ale_profile_workload.cc), then the final build uses the recorded profile.
# Measured on a 2-core AMD EPYC VM: 12-20% more emulator frames/s than -O3
# alone, also on games outside this list (Q*bert, Asteroids, Beam Rider);
# -fprofile-partial-training keeps code the run never reached at -O3.
PGO_GAMES = ("pong", "breakout", "space_invaders", "seaquest", "ms_pacman",
             "montezuma_revenge")
PGO_FRAMES_PER_GAME = 10000
ALE_OPT_FLAGS = "-O3 -DNDEBUG"


def ale_pgo_enabled() -> bool:
  value = os.environ.get("TFRL_ALE_PGO", "1")
  if value not in ("0", "1"):
    raise RuntimeError(f"TFRL_ALE_PGO must be 0 or 1, got {value!r}")
  return value == "1"


def _configure_ale(source: str, build: str, prefix: str, cxx_flags: str) -> None:
  # RelWithDebInfo with our own flags: ALE turns on LTO for Release, and LTO
  # objects in a static archive would make every op link slow.
  subprocess.check_call([
      "cmake", "-S", source, "-B", build,
      "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
      f"-DCMAKE_CXX_FLAGS_RELWITHDEBINFO={cxx_flags}",
      "-DBUILD_CPP_LIB=ON", "-DBUILD_PYTHON_LIB=OFF", "-DSDL_SUPPORT=OFF",
      "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
      f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_INSTALL_LIBDIR=lib"],
      stdout=subprocess.DEVNULL)


def _build_and_install_ale(build: str) -> None:
  subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)],
                        stdout=subprocess.DEVNULL)
  subprocess.check_call(["cmake", "--install", build], stdout=subprocess.DEVNULL)


def _record_ale_profile(source: str, build: str, work: str) -> None:
  """Builds an instrumented ALE in `build` and plays PGO_GAMES on it; the
  profile (.gcda files) lands next to the objects for the next build."""
  instrumented = os.path.join(work, "instrumented")
  _configure_ale(source, build, instrumented,
                 f"{ALE_OPT_FLAGS} -fprofile-generate -fprofile-update=single")
  _build_and_install_ale(build)
  workload = os.path.join(work, "ale_profile_workload")
  subprocess.check_call([
      os.environ.get("CXX", "g++"), "-O2", "-std=c++17", "-fprofile-generate",
      os.path.join(ROOT, OPS_DIR, "ale/cc/tools/ale_profile_workload.cc"),
      f"-I{instrumented}/include", f"-I{instrumented}/include/ale",
      f"{instrumented}/lib/libale.a", "-lz", "-lpthread", "-o", workload])
  roms = [os.path.join(source, "src/ale/python/roms", f"{game}.bin") for game in PGO_GAMES]
  missing = [r for r in roms if not os.path.exists(r)]
  if missing:
    raise RuntimeError(f"the ALE source distribution lacks the profile ROMs {missing}; "
                       "set TFRL_ALE_PGO=0 to build without profile-guided optimisation")
  log(f"recording ALE's profile: {len(roms)} games x {PGO_FRAMES_PER_GAME} frames")
  subprocess.check_call([workload, str(PGO_FRAMES_PER_GAME), *roms], cwd=work,
                        stdout=subprocess.DEVNULL)


def build_ale() -> str:
  """Builds (or reuses) static ALE; returns its install prefix."""
  pgo = ale_pgo_enabled()
  prefix = os.path.join(cache_dir(), f"ale-{ALE_VERSION}-{'pgo' if pgo else 'o3'}")
  stamp = os.path.join(prefix, "BUILT")
  if os.path.exists(stamp):
    log(f"using the cached ALE build in {prefix}")
    return prefix
  os.makedirs(cache_dir(), exist_ok=True)
  for tool in ("cmake", "make"):
    if shutil.which(tool) is None:
      raise RuntimeError(f"building ALE needs {tool}: apt-get install cmake make g++ zlib1g-dev")
  sdist = fetch_ale_sdist(cache_dir())
  with tempfile.TemporaryDirectory(prefix="tfrl-ale-") as work:
    with tarfile.open(sdist) as tar:
      tar.extractall(work, filter="data")
    source = os.path.join(work, f"ale_py-{ALE_VERSION}")
    build = os.path.join(work, "build")
    shutil.rmtree(prefix, ignore_errors=True)
    flags = ALE_OPT_FLAGS
    if pgo:
      log("building ALE twice (static, PIC, SDL off; profile-guided: instrumented, then "
          "optimised; TFRL_ALE_PGO=0 builds once); this takes a few minutes once")
      _record_ale_profile(source, build, work)
      # Same build directory, so each object finds its .gcda next to it.
      flags += " -fprofile-use -fprofile-partial-training -fprofile-correction -Wno-missing-profile"
    else:
      log("building ALE (static, PIC, SDL off); this takes a few minutes once")
    _configure_ale(source, build, prefix, flags)
    _build_and_install_ale(build)
  open(stamp, "w").close()
  return prefix


def mujoco_dir():
  """The installed mujoco package's folder (include/ and libmujoco), or None."""
  spec = importlib.util.find_spec("mujoco")
  if spec is None or not spec.submodule_search_locations:
    return None
  folder = list(spec.submodule_search_locations)[0]
  if not glob.glob(os.path.join(folder, "libmujoco.so*")):
    return None
  return folder


def tensorflow_flags():
  """Compile and link flags of the TensorFlow this build runs against."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()


def enabled_options(environ=None):
  """{variable: BuildOption} of the options whose variable is 1 in `environ`."""
  environ = os.environ if environ is None else environ
  enabled = {}
  for variable, option in BUILD_OPTIONS.items():
    value = environ.get(variable, "0")
    if value not in ("0", "1"):
      raise RuntimeError(f"{variable} must be 0 or 1, got {value!r}")
    if value == "1":
      enabled[variable] = option
  return enabled


@dataclasses.dataclass(frozen=True)
class Family:
  """One op family's library: its sources (relative to ROOT), macros and the
  folders its quoted #includes are found in (-I, in order)."""
  name: str
  sources: tuple
  defines: tuple
  include_dirs: tuple


def op_families(environ=None):
  """{family: Family} from the custom_ops layout, with the enabled options."""
  enabled = enabled_options(environ)
  families = {}
  for folder in sorted(glob.glob(os.path.join(ROOT, OPS_DIR, "*", "cc", "ops"))):
    name = os.path.basename(os.path.dirname(os.path.dirname(folder)))
    base = os.path.join(OPS_DIR, name)
    options = [o for o in BUILD_OPTIONS.values() if o.family == name]
    optional = {os.path.join(base, src) for o in options for src in o.sources}
    wanted = {os.path.join(base, src) for o in enabled.values() if o.family == name
              for src in o.sources}
    sources = [os.path.relpath(p, ROOT)
               for pattern in ("cc/ops/*.cc", "cc/kernels/*.cc")
               for p in sorted(glob.glob(os.path.join(ROOT, base, pattern)))]
    sources = [p for p in sources if p not in optional or p in wanted]
    defines = tuple(o.define for o in enabled.values() if o.family == name)
    families[name] = Family(name, tuple(sources), defines,
                            (os.path.join(ROOT, base, "cc", "kernels"),
                             os.path.join(ROOT, OPS_DIR, COMMON_DIR)))
  return families


# Headers outside this repository that name their library's version.
_VERSION_HEADERS = ("tensorflow/core/public/release_version.h",
                    "tensorflow/core/public/version.h", "mujoco/mujoco.h", "ale/version.hpp")
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)
OBJECT_CACHE_DAYS = 30


def local_includes(source: str, include_dirs) -> list:
  """The repository's headers that `source` includes, directly or not (quoted
  #includes found next to the including file or in `include_dirs`)."""
  found, todo = [], [source]
  while todo:
    path = todo.pop()
    with open(path, encoding="utf-8", errors="replace") as f:
      names = _QUOTED_INCLUDE.findall(f.read())
    for name in names:
      for folder in (os.path.dirname(path), *include_dirs):
        header = os.path.join(folder, name)
        if os.path.isfile(header):
          if header not in found:
            found.append(header)
            todo.append(header)
          break
  return sorted(found)


# C and C++ comments, for object_key.
_C_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.DOTALL)


def object_key(command: bytes, defines, source: str, include_dirs) -> str:
  """Hash of what makes `source`'s object: the `command` (build_identity), the
  source and its headers, and those `defines` that their code names (TFRL_*
  macros reach no header outside the repository; a name in a comment does
  not count, so that an option's build reuses the objects it cannot change)."""
  texts = []
  for path in [source, *local_includes(source, include_dirs)]:
    with open(path, "rb") as f:
      texts.append((os.path.relpath(path, ROOT), f.read()))
  code = [_C_COMMENT.sub(b" ", text) for _, text in texts]
  named = [d for d in defines if any(d.encode() in text for text in code)]
  digest = hashlib.sha256(command)
  for define in named:
    digest.update(define.encode() + b"\0")
  for name, text in texts:
    digest.update(name.encode() + b"\0" + hashlib.sha256(text).digest())
  return digest.hexdigest()


def build_identity(cxx: str, flags) -> bytes:
  """The compiler's version and `flags` with this checkout's path left out and
  each -I folder outside it named by its library's version headers (so that
  TensorFlow 2.21's headers are the same in any virtualenv, pip's build
  environment among them)."""
  identity = [subprocess.run([cxx, "--version"], capture_output=True, check=True).stdout]
  for flag in flags:
    folder = flag[2:] if flag.startswith("-I") else None
    versions = [os.path.join(folder, h) for h in _VERSION_HEADERS] if folder else []
    versions = [v for v in versions if os.path.isfile(v)]
    if folder and not folder.startswith(ROOT + os.sep) and versions:
      flag = "-I" + ",".join(f"{os.path.relpath(v, folder)}:{file_sha256(v)}" for v in versions)
    identity.append(flag.replace(ROOT, "<root>").encode())
  return b"\0".join(identity)


class ObjectCache:
  """Object files by key under cache_dir()/objects (TFRL_OBJECT_CACHE=0: none)."""

  def __init__(self):
    value = os.environ.get("TFRL_OBJECT_CACHE", "1")
    if value not in ("0", "1"):
      raise RuntimeError(f"TFRL_OBJECT_CACHE must be 0 or 1, got {value!r}")
    self.folder = os.path.join(cache_dir(), "objects") if value == "1" else None
    if self.folder:
      os.makedirs(self.folder, exist_ok=True)
      stale = OBJECT_CACHE_DAYS * 86400
      for entry in os.scandir(self.folder):
        try:
          if entry.stat().st_mtime < time.time() - stale:
            os.remove(entry.path)
        except FileNotFoundError:
          pass  # another build removed it

  def fetch(self, key: str, obj: str) -> bool:
    cached = self.folder and os.path.join(self.folder, key + ".o")
    if not cached or not os.path.isfile(cached):
      return False
    os.utime(cached)  # recently used: not pruned
    shutil.copyfile(cached, obj)
    return True

  def store(self, key: str, obj: str) -> None:
    if self.folder:
      partial = os.path.join(self.folder, f"{key}.{os.getpid()}.partial")
      shutil.copyfile(obj, partial)
      os.replace(partial, os.path.join(self.folder, key + ".o"))


def compile_family(family: Family, output: str, objects_dir: str, tf_flags,
                   ale_prefix=None, mujoco=None) -> None:
  """Compiles `family`'s sources (in parallel, unless the object cache has
  them) and links them into `output`."""
  cxx = os.environ.get("CXX", "g++")
  tf_compile, tf_link = tf_flags
  # Paths in the objects relative to the checkout: the same object wherever it is.
  flags = ["-O3", "-fPIC", "-Wno-deprecated-declarations", f"-ffile-prefix-map={ROOT}/=",
           *tf_compile, *(f"-I{folder}" for folder in family.include_dirs)]
  defines = [f"-D{d}=1" for d in family.defines]
  libs = []
  if family.name in FAMILIES_NEEDING_ALE:
    flags += [f"-I{ale_prefix}/include", f"-I{ale_prefix}/include/ale"]
    # Keep ALE's symbols private, so that a second ALE in the process
    # (ale-py's own module) cannot interpose on ours.
    libs += [f"{ale_prefix}/lib/libale.a", "-lz", "-Wl,--exclude-libs,ALL"]
  if family.name in FAMILIES_NEEDING_MUJOCO:
    # No FMA contraction: the tasks' rewards add as numpy does, term by term.
    flags += [f"-I{mujoco}/include", "-ffp-contract=off"]
    # Linked by its soname; at run time `import mujoco` has loaded it.
    libs += sorted(glob.glob(os.path.join(mujoco, "libmujoco.so.*")))[:1]
  os.makedirs(objects_dir, exist_ok=True)
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  cache = ObjectCache()
  identity = build_identity(cxx, flags)
  cached = []

  def compile_one(source):
    source = os.path.join(ROOT, source)
    obj = os.path.join(objects_dir, os.path.basename(source) + ".o")
    key = object_key(identity, family.defines, source, family.include_dirs)
    if cache.fetch(key, obj):
      cached.append(source)
    else:
      subprocess.check_call([cxx, *flags, *defines, "-c", source, "-o", obj])
      cache.store(key, obj)
    return obj

  options = f", options {', '.join(family.defines)}" if family.defines else ""
  log(f"compiling op family '{family.name}' ({len(family.sources)} files{options})")
  with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    objects = list(pool.map(compile_one, family.sources))
  subprocess.check_call([cxx, "-shared", "-o", output, *objects, *libs, *tf_link])
  log(f"built {output} ({len(cached)} of {len(objects)} objects from the object cache)")


class BuildTfOps(build_ext):
  """Compiles each op family into tfrl/ops/_<family>_ops.so with g++."""

  def run(self):
    self._families = op_families()
    names = {ext.name.rsplit("._", 1)[1][:-len("_ops")] for ext in self.extensions}
    self._ale = build_ale() if names & FAMILIES_NEEDING_ALE else None
    self._mujoco = mujoco_dir() if names & FAMILIES_NEEDING_MUJOCO else None
    self._tf_flags = tensorflow_flags()
    super().run()

  def get_ext_filename(self, ext_name):
    return os.path.join(*ext_name.split(".")) + ".so"

  def build_extension(self, ext):
    family = self._families[ext.name.rsplit("._", 1)[1][:-len("_ops")]]
    compile_family(family, self.get_ext_fullpath(ext.name),
                   os.path.join(self.build_temp, family.name), self._tf_flags, self._ale,
                   self._mujoco)


class ConfigureBazel(setuptools.Command):
  """Links TensorFlow, ALE and mujoco into third_party_local/ for the Bazel build."""

  description = "write the local repositories of the Bazel build"
  user_options = []

  def initialize_options(self):
    pass

  def finalize_options(self):
    pass

  def run(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    local = os.path.join(ROOT, "third_party_local")
    os.makedirs(local, exist_ok=True)
    targets = {"tensorflow": os.path.dirname(tf.sysconfig.get_include()),
               "ale": build_ale(), "mujoco": mujoco_dir()}
    if targets["mujoco"] is None:
      raise RuntimeError("the Bazel build compiles the MuJoCo ops against the installed "
                         "mujoco wheel: pip install mujoco")
    for name, target in targets.items():
      link = os.path.join(local, name)
      if os.path.islink(link) and os.readlink(link) == target:
        continue  # Unchanged: keep Bazel's cache valid.
      if os.path.islink(link):
        os.remove(link)
      os.symlink(target, link)
      log(f"third_party_local/{name} -> {target}")
    # TensorFlow's own flags, less the include path and the framework library
    # (the repository has both, so no action names this checkout's venv).
    compile_flags, link_flags = tensorflow_flags()
    copts = [f for f in compile_flags if not f.startswith("-I")]
    link_flags = [f for f in link_flags if not f.startswith(("-L", "-l"))]
    config = os.path.join(local, "config")
    os.makedirs(config, exist_ok=True)
    if not os.path.exists(os.path.join(config, "BUILD")):
      open(os.path.join(config, "BUILD"), "w").close()
    text = ("# Written by `python setup.py configure_bazel` from tf.sysconfig.\n"
            f"TF_COPTS = {copts!r}\nTF_LINKOPTS = {link_flags!r}\n")
    path = os.path.join(config, "tf_flags.bzl")
    if not os.path.exists(path) or open(path).read() != text:
      with open(path, "w") as f:
        f.write(text)


def extensions():
  """One extension per op family; the MuJoCo family only where mujoco is installed."""
  families = op_families()
  if mujoco_dir() is None:
    log("mujoco is not installed: the MuJoCo ops are left out (GymEnv steps MuJoCo tasks)")
    families = {n: f for n, f in families.items() if n not in FAMILIES_NEEDING_MUJOCO}
  return [setuptools.Extension(f"tfrl.ops._{name}_ops", list(family.sources))
          for name, family in families.items()]


if __name__ == "__main__":
  setuptools.setup(
      ext_modules=extensions(),
      cmdclass={"build_ext": BuildTfOps, "configure_bazel": ConfigureBazel},
  )
