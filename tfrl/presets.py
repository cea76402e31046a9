"""Presets: the ready-made flag files of the top-level `flags/` folder, by name.

    python -m tfrl.ga3c --preset=ga3c_pong      # = --flagfile=<the preset's file>

A preset's name is its file name without `.flags`; the part before the first
`_` that names an entry point says which one it is for (`ga3c_pong`:
`tfrl.ga3c`; `random_search_pong`: `tfrl.random_search`). An installed
package carries the folder as `tfrl/flags` (pyproject.toml maps it there); a
clone reads the folder itself.

A preset may start from another with `--flagfile=flags/<other>.flags`.
absl would open that path relative to the working folder, so `expand` puts
a preset's flags on the command line itself, with such lines replaced by the
other preset's flags, read from the same folder: the same flags in the same
order as the file, from any folder.
"""

import os
import re
from typing import List, Optional, Sequence

# The entry points that have presets, longest first, so that "ga3c_pong"
# belongs to ga3c rather than to ga.
ENTRY_POINTS = ("random_search", "ga3c", "td3", "ga", "es")
SUFFIX = ".flags"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_INSTALLED = os.path.join(_PACKAGE_DIR, "flags")
_CLONE = os.path.join(os.path.dirname(_PACKAGE_DIR), "flags")
_PRESET_ARG = re.compile(r"^--?preset(?:=(.*))?$")
# A preset's line that starts from another preset: --flagfile=flags/NAME.flags
_INCLUDE = re.compile(r"^--?flagfile=flags/([^/]+)\.flags$")


def directory() -> str:
  """The folder the presets are read from (installed package, else clone)."""
  return _INSTALLED if os.path.isdir(_INSTALLED) else _CLONE


def entry_point(name: str) -> Optional[str]:
  """The entry point a preset name is for ("tfrl.ga3c"), None if none."""
  for short in ENTRY_POINTS:
    if name.startswith(short + "_"):
      return f"tfrl.{short}"
  return None


def names(prog: Optional[str] = None) -> List[str]:
  """Every preset's name, or those for entry point `prog` ("tfrl.ga")."""
  folder = directory()
  found = sorted(f[:-len(SUFFIX)] for f in os.listdir(folder)
                 if f.endswith(SUFFIX)) if os.path.isdir(folder) else []
  return [n for n in found if prog is None or entry_point(n) == prog]


def path(name: str, prog: Optional[str] = None) -> str:
  """The file of preset `name`; ValueError (one line) if there is none, or
  if it is for another entry point than `prog`."""
  known = names()
  if name not in known:
    listed = names(prog) if prog else known
    where = f" of {prog}" if prog else ""
    raise ValueError(f"no preset named {name!r}; the presets{where} are: "
                     f"{', '.join(listed) or 'none'}")
  owner = entry_point(name)
  if prog is not None and owner != prog:
    raise ValueError(f"preset {name} is for {owner}, not {prog}: "
                     f"python -m {owner} --preset={name}")
  return os.path.join(directory(), name + SUFFIX)


def flag_lines(name: str, _including: Sequence[str] = ()) -> List[str]:
  """The flags of preset `name` as absl reads its file (comments and blank
  lines dropped), with every line that starts from another preset replaced by
  that preset's flags. ValueError if an included preset is missing or
  includes itself."""
  if name in _including:
    raise ValueError(f"preset {name} includes itself: {' -> '.join([*_including, name])}")
  if name not in names():
    where = f"preset {_including[-1]} includes" if _including else "no preset named"
    raise ValueError(f"{where} {name!r}, which is not among the presets in {directory()}")
  lines = []
  with open(os.path.join(directory(), name + SUFFIX)) as f:
    for line in f:
      if line.isspace() or line.startswith(("#", "//")):
        continue   # absl's rule for comments in a flag file
      include = _INCLUDE.match(line.strip())
      if include:
        lines.extend(flag_lines(include.group(1), (*_including, name)))
      else:
        lines.append(line.strip())
  return lines


def expand(argv: Sequence[str], prog: str) -> List[str]:
  """argv with every `--preset=NAME` (or `--preset NAME`) replaced by the
  preset's flags (`flag_lines`), in place, so that flags after it override
  them. Arguments after `--` are left alone. ValueError on an unknown name."""
  out, i = [argv[0]], 1
  while i < len(argv):
    arg = argv[i]
    if arg == "--":
      out.extend(argv[i:])
      break
    match = _PRESET_ARG.match(arg)
    if match is None:
      out.append(arg)
    else:
      name = match.group(1)
      if name is None:   # "--preset NAME"
        if i + 1 >= len(argv):
          raise ValueError(f"--preset needs a name: {', '.join(names(prog))}")
        i += 1
        name = argv[i]
      path(name, prog)   # checks the name and its entry point
      out.extend(flag_lines(name))
    i += 1
  return out
