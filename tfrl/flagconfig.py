"""absl flags generated from a config dataclass, and the config built back.

A setting's name, type, default and help are written once, on its field:

    @dataclasses.dataclass(frozen=True)
    class RayConfig:
      workers: int = flagconfig.field(2, "Ray actors that play the population.")

    flagconfig.define(RayConfig, prefix="ray_")   # --ray_workers=2
    config = flagconfig.build(RayConfig, prefix="ray_")

Supported field types: bool, int, float, str (an enum with `choices`),
Optional[...] of those (default None), and Tuple[str | int, ...]: a list flag
(`--sizes=64,32`), or with `multi=True` a repeated one (`--logdir=a --logdir=b`,
for values that may hold commas, such as paths).
"""

import dataclasses
import typing
from typing import Any, Optional, Sequence

from absl import flags

_HELP = "tfrl_help"
_CHOICES = "tfrl_choices"
_FLAG = "tfrl_flag"
_MULTI = "tfrl_multi"


def field(default: Any, help: str,  # pylint: disable=redefined-builtin
          choices: Optional[Sequence[str]] = None, *, flag: Optional[str] = None,
          multi: bool = False):
  """A dataclass field with the help text (and enum choices) of its flag.

  `flag`: the flag's name when it is not the field's (`--logdir` fills
  `logdirs`). `multi`: a tuple field read from a repeated flag.
  """
  return dataclasses.field(default=default,
                           metadata={_HELP: help, _CHOICES: tuple(choices or ()),
                                     _FLAG: flag, _MULTI: multi})


def flag_name(f: dataclasses.Field, prefix: str = "") -> str:
  """The name of the flag of a field made with `field`."""
  return prefix + (f.metadata.get(_FLAG) or f.name)


def _base_type(annotation):
  origin = typing.get_origin(annotation)
  if origin is typing.Union:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(args) == 1:
      return _base_type(args[0])
  if origin in (tuple, list):
    return tuple, (typing.get_args(annotation) or (str,))[0]
  return annotation, None


def _fields(config_cls, exclude=()):
  hints = typing.get_type_hints(config_cls)
  for f in dataclasses.fields(config_cls):
    if _HELP in f.metadata and f.name not in exclude:
      yield f, hints[f.name]


def define(config_cls, prefix: str = "", fv: flags.FlagValues = flags.FLAGS,
           exclude: Sequence[str] = ()) -> None:
  """Defines a flag `<prefix><field>` per field made with `field` (idempotent),
  but for the fields named in `exclude`."""
  for f, annotation in _fields(config_cls, exclude):
    name = flag_name(f, prefix)
    if name in fv:
      continue
    kind, item = _base_type(annotation)
    help_text, choices = f.metadata[_HELP], f.metadata[_CHOICES]
    if f.metadata.get(_MULTI):
      if kind is not tuple:
        raise TypeError(f"{config_cls.__name__}.{f.name}: multi=True needs a Tuple field.")
      default = [str(v) for v in f.default] if f.default else None
      flags.DEFINE_multi_string(name, default, help_text, flag_values=fv)
    elif choices:
      flags.DEFINE_enum(name, f.default, list(choices), help_text, flag_values=fv)
    elif kind is bool:
      flags.DEFINE_boolean(name, f.default, help_text, flag_values=fv)
    elif kind is int:
      flags.DEFINE_integer(name, f.default, help_text, flag_values=fv)
    elif kind is float:
      flags.DEFINE_float(name, f.default, help_text, flag_values=fv)
    elif kind is str:
      flags.DEFINE_string(name, f.default, help_text, flag_values=fv)
    elif kind is tuple:
      default = None if f.default is None else [str(v) for v in f.default]
      flags.DEFINE_list(name, default, help_text, flag_values=fv)
    else:
      raise TypeError(f"{config_cls.__name__}.{f.name}: no flag type for {annotation}.")


def build(config_cls, prefix: str = "", fv: flags.FlagValues = flags.FLAGS,
          exclude: Sequence[str] = (), **overrides):
  """`config_cls` with every flag-backed field read from its flag.

  Fields without a flag (or in `exclude`) keep their defaults unless given in
  `overrides`; the config's own checks (`__post_init__`) run as usual.
  """
  values = {}
  for f, annotation in _fields(config_cls, exclude):
    name = flag_name(f, prefix)
    value = fv[name].value
    kind, item = _base_type(annotation)
    if f.metadata.get(_MULTI) and value is None:
      value = f.default  # the repeated flag was not given
    if kind is tuple and value is not None:
      try:
        value = tuple(item(v) for v in value)
      except ValueError:
        how = "one per --" + name if f.metadata.get(_MULTI) else "separated by commas"
        raise ValueError(f"--{name} takes {item.__name__} values {how}, got "
                         f"{','.join(value)!r}.") from None
    values[f.name] = value
  values.update(overrides)
  return config_cls(**values)
