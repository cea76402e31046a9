"""Presets: the ready-made flag files of the top-level `flags/` folder, by name.

    python -m tfrl.ga3c --preset=ga3c_pong      # = --flagfile=<the preset's file>

A preset's name is its file name without `.flags`; the part before the first
`_` that names an entry point says which one it is for (`ga3c_pong`:
`tfrl.ga3c`; `random_search_pong`: `tfrl.random_search`). An installed
package carries the folder as `tfrl/flags` (pyproject.toml maps it there); a
clone reads the folder itself.
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


def expand(argv: Sequence[str], prog: str) -> List[str]:
  """argv with every `--preset=NAME` (or `--preset NAME`) replaced by
  `--flagfile=<its file>`, in place, so that flags after it override it.
  Arguments after `--` are left alone. ValueError on an unknown name."""
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
      out.append(f"--flagfile={path(name, prog)}")
    i += 1
  return out
