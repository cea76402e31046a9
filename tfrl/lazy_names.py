"""A package's names imported when first asked for (PEP 562's module
`__getattr__`): the entry points import the packages' configs to parse and
check their flags, and a bad flag is answered before TensorFlow, which the
packages' other modules import, is loaded (seconds)."""

import importlib
import sys
from typing import Callable, Mapping


def getattr_of(package: str, modules: Mapping[str, str]) -> Callable[[str], object]:
  """The `__getattr__` of `package` for `modules`: {name: its module in the
  package, or "module:attribute" when the name is another's}."""

  def __getattr__(name):
    if name not in modules:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, _, attribute = modules[name].partition(":")
    value = getattr(importlib.import_module(f"{package}.{module}"), attribute or name)
    setattr(sys.modules[package], name, value)
    return value

  return __getattr__
