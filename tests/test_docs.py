"""The user docs against the code and files they describe.

- The flag tables of docs/runs.md are generated from the flag definitions of
  `tfrl.evaluate` and `tfrl.plot`; `PYTHONPATH=. python tests/test_docs.py
  --write` rewrites them after a flag changes.
- Every result file the docs name exists in benchmarks/results/.
- Every relative link and image of the README, benchmarks/README.md and
  docs/ points to a file that exists, and an anchor to one of its headings.
- The README stays a short page for users: its Results table has one line
  per row of at most 40 words a cell; no docs page is over 400 lines.
- The docs' running text names no commit: a result's provenance lives in its
  JSON, which the text links.
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
_DOCS_PAGES = sorted(
    os.path.relpath(p, _ROOT) for p in glob.glob(os.path.join(_ROOT, "docs", "*.md")))
_USER_DOCS = ["README.md", "benchmarks/README.md", *_DOCS_PAGES]
_MAX_PAGE_LINES = 400
_MAX_CELL_WORDS = 40
_RESULTS_COLUMNS = ["what", "figure", "against", "seeds", "machine", "details"]
# What `grep -nE '\b[0-9a-f]{7,40}\b' docs/*.md` finds: an abbreviated or full commit.
_COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
_FENCE = re.compile(r"^\s*```.*?^\s*```[^\n]*$", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\]\n]|\][^(\n])*\]\(([^)\s]+)\)")


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


def _read(doc: str) -> str:
  with open(os.path.join(_ROOT, doc)) as f:
    return f.read()


def heading_anchors(text: str):
  """GitHub's anchors of a Markdown page's headings (outside code blocks)."""
  anchors, seen = set(), {}
  for line in _FENCE.sub("", text).splitlines():
    match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
    if not match:
      continue
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))  # a link keeps its text
    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(slug if count == 0 else f"{slug}-{count}")
  return anchors


def relative_links(text: str):
  """The link and image targets of a page that are not URLs (code left out)."""
  text = _INLINE_CODE.sub("", _FENCE.sub("", text))
  return [t for t in _LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken_links(doc: str):
  """'doc: target (why)' for each relative link of `doc` that does not resolve."""
  broken = []
  for target in relative_links(_read(doc)):
    path, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(_ROOT, os.path.dirname(doc), path)) if path \
        else os.path.join(_ROOT, doc)
    if not os.path.exists(resolved):
      broken.append(f"{doc}: {target} (no such file)")
    elif anchor and (not resolved.endswith(".md") or
                     anchor not in heading_anchors(_read(os.path.relpath(resolved, _ROOT)))):
      broken.append(f"{doc}: {target} (no heading with that anchor)")
  return broken


def results_table(readme: str):
  """The README's Results table: its rows as lists of cells, header first."""
  section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
  rows = [line for line in section.splitlines() if line.startswith("|")]
  return [[c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]
          for row in rows if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", row.strip())]


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

  def test_every_relative_link_resolves_to_a_file_and_heading(self):
    broken = [b for doc in _USER_DOCS for b in broken_links(doc)]
    self.assertEmpty(broken, "links whose file or heading is missing")

  def test_readme_results_table_has_one_short_line_per_row(self):
    rows = results_table(_read("README.md"))
    self.assertEqual(rows[0], _RESULTS_COLUMNS)
    self.assertGreater(len(rows), 1)
    for row in rows[1:]:
      self.assertLen(row, len(_RESULTS_COLUMNS), f"a Results row with other columns: {row}")
      for column, cell in zip(_RESULTS_COLUMNS, row):
        self.assertLessEqual(len(cell.split()), _MAX_CELL_WORDS,
                             f"README Results, {column} of '{row[0]}': "
                             f"{len(cell.split())} words; the narrative belongs in docs/")

  def test_docs_pages_are_at_most_400_lines(self):
    long_pages = {doc: n for doc in _DOCS_PAGES
                  if (n := len(_read(doc).splitlines())) > _MAX_PAGE_LINES}
    self.assertEmpty(long_pages, "split these pages by topic")

  def test_docs_running_text_names_no_commit(self):
    found = [f"{doc}:{i}: {line.strip()}" for doc in _DOCS_PAGES
             for i, line in enumerate(_read(doc).splitlines(), 1) if _COMMIT.search(line)]
    self.assertEmpty(found, "a result's commit lives in its JSON: link the JSON instead")


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
