"""tfrl.flagconfig: flags generated from a dataclass, and the dataclass built back."""

import dataclasses
from typing import Optional, Tuple

from absl import flags
from absl.testing import absltest

from tfrl import flagconfig


@dataclasses.dataclass(frozen=True)
class _Config:
  count: int = flagconfig.field(3, "How many.")
  rate: float = flagconfig.field(0.5, "How fast.")
  name: str = flagconfig.field("a", "Which one.", choices=("a", "b"))
  on: bool = flagconfig.field(True, "Whether.")
  sizes: Tuple[int, ...] = flagconfig.field((64, 32), "Widths.")
  limit: Optional[float] = flagconfig.field(None, "A bound, or none.")
  internal: int = 7                     # no flag: set by code

  def __post_init__(self):
    if self.count < 0:
      raise ValueError(f"count must be >= 0, got {self.count}.")


@dataclasses.dataclass(frozen=True)
class _Runs:
  dirs: Tuple[str, ...] = flagconfig.field((), "A run; repeat for more.", flag="dir", multi=True)
  seeds: Tuple[int, ...] = flagconfig.field((1,), "Seeds, one per --seed.", flag="seed",
                                            multi=True)


@dataclasses.dataclass(frozen=True)
class _Part:
  game: Optional[str] = flagconfig.field(None, "A game.")
  env: Optional[str] = flagconfig.field(None, "An env; replaces the default game.")

  @classmethod
  def from_flag_values(cls, values, defaults):
    if values["env"] and values["game"] == defaults["game"]:
      values = dict(values, game=None)
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class _Whole:
  part: _Part = flagconfig.nested(_Part, defaults={"game": "pong"})
  other: _Config = flagconfig.nested(_Config, prefix="o_")
  seed: int = flagconfig.field(0, "A seed.")
  extra: object = None


class FlagConfigTest(absltest.TestCase):

  def _flags(self, *args, **kwargs):
    fv = flags.FlagValues()
    flagconfig.define(_Config, prefix="x_", fv=fv, **kwargs)
    fv(["prog", *args])
    return fv

  def test_defaults_round_trip(self):
    fv = self._flags()
    self.assertEqual(flagconfig.build(_Config, prefix="x_", fv=fv), _Config())
    self.assertNotIn("x_internal", fv)
    self.assertEqual(fv["x_count"].help, "How many.")

  def test_values_types_and_overrides(self):
    fv = self._flags("--x_count=9", "--x_rate=2", "--x_name=b", "--nox_on",
                     "--x_sizes=8,4,2", "--x_limit=1.5")
    config = flagconfig.build(_Config, prefix="x_", fv=fv, internal=1)
    self.assertEqual(config, _Config(9, 2.0, "b", False, (8, 4, 2), 1.5, 1))

  def test_bad_values(self):
    with self.assertRaises(flags.IllegalFlagValueError):
      self._flags("--x_name=c")          # not a choice
    fv = self._flags("--x_sizes=8,x")
    with self.assertRaisesRegex(ValueError, "--x_sizes takes int values"):
      flagconfig.build(_Config, prefix="x_", fv=fv)
    fv = self._flags("--x_count=-1")     # the config's own check
    with self.assertRaisesRegex(ValueError, "count must be >= 0"):
      flagconfig.build(_Config, prefix="x_", fv=fv)

  def test_exclude_and_idempotent(self):
    fv = flags.FlagValues()
    flagconfig.define(_Config, fv=fv, exclude=("rate", "sizes"))
    flagconfig.define(_Config, fv=fv, exclude=("rate", "sizes"))  # no redefinition error
    fv(["prog", "--count=4"])
    self.assertNotIn("rate", fv)
    config = flagconfig.build(_Config, fv=fv, exclude=("rate", "sizes"))
    self.assertEqual((config.count, config.rate, config.sizes), (4, 0.5, (64, 32)))

  def test_repeated_flags_with_their_own_names(self):
    fv = flags.FlagValues()
    flagconfig.define(_Runs, fv=fv)
    self.assertNotIn("dirs", fv)
    fv(["prog", "--dir=a,b", "--dir=c", "--seed=3", "--seed=4"])
    # Commas stay inside a value (paths may hold them); each flag is one value.
    self.assertEqual(flagconfig.build(_Runs, fv=fv), _Runs(("a,b", "c"), (3, 4)))
    fv = flags.FlagValues()
    flagconfig.define(_Runs, fv=fv)
    fv(["prog"])
    self.assertEqual(flagconfig.build(_Runs, fv=fv), _Runs())  # the defaults
    fv = flags.FlagValues()
    flagconfig.define(_Runs, fv=fv)
    fv(["prog", "--seed=x"])
    with self.assertRaisesRegex(ValueError, "--seed takes int values one per --seed"):
      flagconfig.build(_Runs, fv=fv)


  def test_nested_configs_with_an_entry_points_defaults(self):
    fv = flags.FlagValues()
    flagconfig.define(_Whole, fv=fv)
    fv(["prog", "--o_count=5", "--seed=2"])
    self.assertEqual(fv["game"].default, "pong")       # the entry point's default
    self.assertEqual(fv["game"].help, "A game.")        # the field's help
    whole = flagconfig.build(_Whole, fv=fv, extra="x")
    self.assertEqual(whole, _Whole(_Part(game="pong"), _Config(count=5), 2, "x"))
    self.assertEqual(_Whole().part, _Part(game="pong"))  # the field's default too
    self.assertEqual(flagconfig.flag_names(_Whole)["o_count"], "other.count")
    self.assertEqual(flagconfig.flag_names(_Whole)["game"], "part.game")

  def test_define_with_defaults_and_from_flag_values(self):
    fv = flags.FlagValues()
    flagconfig.define(_Part, fv=fv, defaults={"game": "pong"})
    fv(["prog", "--env=CartPole-v1"])
    # --env replaces the default game; a game given explicitly would stay.
    self.assertEqual(flagconfig.build(_Part, fv=fv), _Part(env="CartPole-v1"))
    fv(["prog", "--env=CartPole-v1", "--game=breakout"])
    self.assertEqual(flagconfig.build(_Part, fv=fv), _Part("breakout", "CartPole-v1"))
    with self.assertRaisesRegex(TypeError, "no field"):
      flagconfig.define(_Part, fv=flags.FlagValues(), defaults={"gmae": "pong"})


if __name__ == "__main__":
  absltest.main()
