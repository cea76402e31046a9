"""The user docs against the code and files they describe.

- The flag tables of docs/runs.md are generated from the flag definitions of
  `tfrl.evaluate` and `tfrl.plot`; `PYTHONPATH=. python tests/test_docs.py
  --write` rewrites them after a flag changes.
- Every result file the docs name exists in benchmarks/results/.
- The README stays a short page for users.
"""

import glob
import itertools
import os
import re
import sys

from absl import flags
from absl.testing import absltest

from tfrl import flagconfig

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUNS = os.path.join(_ROOT, "docs", "runs.md")
_BLOCK = re.compile(r"(<!-- flags: (?P<name>[^>]+?) -->\n)(?P<table>.*?)(<!-- end flags -->)",
                    re.S)
_USER_DOCS = ["README.md", "benchmarks/README.md", *sorted(
    os.path.relpath(p, _ROOT) for p in glob.glob(os.path.join(_ROOT, "docs", "*.md")))]


def _shown_default(flag) -> str:
  value = flag.default
  if value is None or value == []:
    return "none"
  if isinstance(value, bool):
    return "on" if value else "off"
  if isinstance(value, list):
    return "`" + ",".join(str(v) for v in value) + "`"
  if value == "":
    return "empty"
  return f"`{value}`"


def flag_table(fv: flags.FlagValues, names) -> str:
  """A Markdown table of the flags `names` of `fv`: flag, default, help."""
  rows = ["| flag | default | meaning |", "|---|---|---|"]
  for name in names:
    flag = fv[name]
    meaning = " ".join(flag.help.split())
    # absl's decorations: "<a|b>: " before an enum's help, a note after a repeated flag's.
    meaning = re.sub(r"^<[^>]*>: ", "", meaning)
    meaning = meaning.replace(".; repeat this option to specify a list of values", " (repeat the flag).")
    choices = getattr(flag.parser, "enum_values", None)
    if choices:
      meaning += f" One of: {', '.join(choices)}."
    meaning = meaning.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    rows.append(f"| `--{name}` | {_shown_default(flag)} | {meaning} |")
  return "\n".join(rows) + "\n"


def generated_tables():
  """{marker name: table} for the flag blocks of docs/runs.md."""
  # pylint: disable=import-outside-toplevel
  from tfrl import evaluate  # defines its flags on flags.FLAGS when imported
  from tfrl import plot
  from tfrl.envs.protocol import EnvProtocol
  plot_flags = flags.FlagValues()
  plot.define_flags(plot_flags)
  return {
      "tfrl.evaluate": flag_table(flags.FLAGS, flagconfig.flag_names(evaluate.EvalConfig)),
      "tfrl.evaluate protocol": flag_table(flags.FLAGS, flagconfig.flag_names(EnvProtocol)),
      "tfrl.plot": flag_table(plot_flags, flagconfig.flag_names(plot.PlotConfig)),
  }


def _expand(name: str):
  """`a{,_b}.json` -> a.json, a_b.json (the docs' shorthand for two files)."""
  braces = re.findall(r"\{([^}]*)\}", name)
  if not braces:
    return [name]
  parts = re.split(r"\{[^}]*\}", name)
  out = []
  for choice in itertools.product(*(b.split(",") for b in braces)):
    out.append("".join(p + c for p, c in itertools.zip_longest(parts, choice, fillvalue="")))
  return out


def named_result_files(text: str):
  """The result files a doc names: `benchmarks/results/X` and bare `<benchmark>_<machine>...json`."""
  names = set(re.findall(r"benchmarks/results/([\w{},*.-]+\.json)", text))
  names |= set(re.findall(r"`([\w{},*-]+_(?:intel|zen1|zen3|zen4|amd|seed)[\w{},*-]*\.json)`",
                          text))
  return {n for name in names if "<" not in name for n in _expand(name)}


class DocsTest(absltest.TestCase):

  def test_flag_tables_are_generated_from_the_flag_definitions(self):
    with open(_RUNS) as f:
      text = f.read()
    blocks = {m.group("name"): m.group("table") for m in _BLOCK.finditer(text)}
    expected = generated_tables()
    self.assertEqual(sorted(blocks), sorted(expected))
    for name, table in expected.items():
      self.assertEqual(blocks[name], table,
                       f"docs/runs.md's {name} flags differ from their definitions: run "
                       "`PYTHONPATH=. python tests/test_docs.py --write`")

  def test_every_result_file_the_docs_name_exists(self):
    results = os.path.join(_ROOT, "benchmarks", "results")
    missing = []
    for doc in _USER_DOCS:
      with open(os.path.join(_ROOT, doc)) as f:
        names = named_result_files(f.read())
      missing += [f"{doc}: {n}" for n in sorted(names) if not glob.glob(os.path.join(results, n))]
    self.assertEmpty(missing)

  def test_readme_is_short(self):
    with open(os.path.join(_ROOT, "README.md")) as f:
      self.assertLess(len(f.read().splitlines()), 250)


def write_tables():
  with open(_RUNS) as f:
    text = f.read()
  tables = generated_tables()
  text = _BLOCK.sub(lambda m: m.group(1) + tables[m.group("name")] + m.group(4), text)
  with open(_RUNS, "w") as f:
    f.write(text)
  print(f"wrote {len(tables)} flag tables into {_RUNS}")


if __name__ == "__main__":
  if "--write" in sys.argv:
    flags.FLAGS(sys.argv[:1])
    write_tables()
  else:
    absltest.main()
