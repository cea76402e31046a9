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

A config made of configs holds each part in a `nested` field: its flags are
defined and built with the outer config's. An entry point may give some flags
defaults of its own (`defaults=`, on `define` or `nested`); their name, type
and help stay those of the field:

    @dataclasses.dataclass(frozen=True)
    class RunConfig:
      env: EnvProtocol = flagconfig.nested(EnvProtocol, defaults={"game": "pong"})
      ray: RayConfig = flagconfig.nested(RayConfig, prefix="ray_")

A config class may define `from_flag_values(cls, values, defaults)` to say
how its flags' values (a dict by field name; `defaults` are the flags'
defaults) become the config, e.g. when one flag's value replaces another's
default; `build` calls it instead of the constructor.
"""

import dataclasses
import functools
import typing
from typing import Any, Dict, Mapping, Optional, Sequence

from absl import flags

_HELP = "tfrl_help"
_CHOICES = "tfrl_choices"
_FLAG = "tfrl_flag"
_MULTI = "tfrl_multi"
_NESTED = "tfrl_nested"


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


def nested(config_cls, *, prefix: str = "", defaults: Optional[Mapping[str, Any]] = None):
  """A field holding a `config_cls` whose flags come with the outer config's.

  `prefix` goes before its flags' names (after the outer prefix); `defaults`
  replace the defaults of some of its fields, for its flags and for the
  field's own default value.
  """
  defaults = dict(defaults or {})
  _check_defaults(config_cls, defaults)
  return dataclasses.field(default_factory=functools.partial(config_cls, **defaults),
                           metadata={_NESTED: (config_cls, prefix, defaults)})


def _check_defaults(config_cls, defaults: Mapping[str, Any]) -> None:
  unknown = set(defaults) - {f.name for f in dataclasses.fields(config_cls)}
  if unknown:
    raise TypeError(f"{config_cls.__name__} has no field(s) {sorted(unknown)} to default.")


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


def _nested_fields(config_cls, exclude=()):
  for f in dataclasses.fields(config_cls):
    if _NESTED in f.metadata and f.name not in exclude:
      yield f, f.metadata[_NESTED]


def define(config_cls, prefix: str = "", fv: flags.FlagValues = flags.FLAGS,
           exclude: Sequence[str] = (), defaults: Optional[Mapping[str, Any]] = None) -> None:
  """Defines a flag `<prefix><field>` per field made with `field` (idempotent),
  and those of `nested` fields, but for the fields named in `exclude`.

  `defaults` replace the defaults of the flags of some fields (an entry
  point's own); the fields keep their name, type and help.
  """
  defaults = dict(defaults or {})
  _check_defaults(config_cls, defaults)
  for f, annotation in _fields(config_cls, exclude):
    name = flag_name(f, prefix)
    if name not in fv:
      _define_flag(config_cls, f, annotation, name, defaults.get(f.name, f.default), fv)
  for f, (sub_cls, sub_prefix, sub_defaults) in _nested_fields(config_cls, exclude):
    define(sub_cls, prefix + sub_prefix, fv, defaults=sub_defaults)


def _define_flag(config_cls, f: dataclasses.Field, annotation, name: str, default,
                 fv: flags.FlagValues) -> None:
  kind, _ = _base_type(annotation)
  help_text, choices = f.metadata[_HELP], f.metadata[_CHOICES]
  if f.metadata.get(_MULTI):
    if kind is not tuple:
      raise TypeError(f"{config_cls.__name__}.{f.name}: multi=True needs a Tuple field.")
    default = [str(v) for v in default] if default else None
    flags.DEFINE_multi_string(name, default, help_text, flag_values=fv)
  elif choices:
    flags.DEFINE_enum(name, default, list(choices), help_text, flag_values=fv)
  elif kind is bool:
    flags.DEFINE_boolean(name, default, help_text, flag_values=fv)
  elif kind is int:
    flags.DEFINE_integer(name, default, help_text, flag_values=fv)
  elif kind is float:
    flags.DEFINE_float(name, default, help_text, flag_values=fv)
  elif kind is str:
    flags.DEFINE_string(name, default, help_text, flag_values=fv)
  elif kind is tuple:
    default = None if default is None else [str(v) for v in default]
    flags.DEFINE_list(name, default, help_text, flag_values=fv)
  else:
    raise TypeError(f"{config_cls.__name__}.{f.name}: no flag type for {annotation}.")


def flag_names(config_cls, prefix: str = "", exclude: Sequence[str] = ()) -> Dict[str, str]:
  """{flag name: field name} of the flags `define` makes for `config_cls`
  (those of nested fields too, by their dotted path, e.g. "env.game")."""
  names = {flag_name(f, prefix): f.name for f, _ in _fields(config_cls, exclude)}
  for f, (sub_cls, sub_prefix, _) in _nested_fields(config_cls, exclude):
    names.update({flag: f"{f.name}.{path}"
                  for flag, path in flag_names(sub_cls, prefix + sub_prefix).items()})
  return names


def build(config_cls, prefix: str = "", fv: flags.FlagValues = flags.FLAGS,
          exclude: Sequence[str] = (), **overrides):
  """`config_cls` with every flag-backed field read from its flag.

  Fields without a flag (or in `exclude`) keep their defaults unless given in
  `overrides`; `nested` fields are built from their own flags. The config's
  own checks (`__post_init__`) run as usual, and its `from_flag_values`, if
  it has one, makes it (see the module docstring).
  """
  values, flag_defaults = {}, {}
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
    flag_defaults[f.name] = fv[name].default
  for f, (sub_cls, sub_prefix, _) in _nested_fields(config_cls, exclude):
    if f.name not in overrides:
      values[f.name] = build(sub_cls, prefix + sub_prefix, fv)
  values.update(overrides)
  make = getattr(config_cls, "from_flag_values", None)
  if make is not None:
    return make(values, flag_defaults)
  return config_cls(**values)
