"""tfrl.ga3c's modules import one another without a cycle, counting the imports
made inside functions: a lower module (the runner, the feed) never reaches back
up into the system that builds it."""

import ast
import os
from typing import Dict, List, Optional, Set

import tfrl

_PACKAGE = "tfrl.ga3c"
_FOLDER = os.path.join(os.path.dirname(tfrl.__file__), "ga3c")


def _modules() -> List[str]:
  return sorted(name[:-3] for name in os.listdir(_FOLDER) if name.endswith(".py"))


def _imported(path: str, modules: Set[str]) -> Set[str]:
  """The package's modules that the file at `path` imports, anywhere in it
  ("__init__" for a name taken from the package itself, e.g. `from tfrl.ga3c import GA3C`)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: from the package's own folder
        base = _PACKAGE + ("." + base if base else "")
      names = [f"{base}.{alias.name}" if base == _PACKAGE else base for alias in node.names]
    else:
      continue
    for name in names:
      if name.startswith(_PACKAGE + "."):
        module = name[len(_PACKAGE) + 1:].split(".")[0]
        found.add(module if module in modules else "__init__")
  return found


def import_graph() -> Dict[str, Set[str]]:
  """{module: the package's modules it imports}."""
  modules = set(_modules())
  return {m: _imported(os.path.join(_FOLDER, m + ".py"), modules) - {m} for m in modules}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
  """One cycle of `graph` as [a, b, ..., a], or None."""
  done: Set[str] = set()

  def visit(node: str, path: List[str]) -> Optional[List[str]]:
    if node in path:
      return path[path.index(node):] + [node]
    if node in done:
      return None
    for after in sorted(graph.get(node, ())):
      cycle = visit(after, path + [node])
      if cycle:
        return cycle
    done.add(node)
    return None

  for start in sorted(graph):
    cycle = visit(start, [])
    if cycle:
      return cycle
  return None


def test_ga3c_modules_import_without_a_cycle():
  graph = import_graph()
  assert "system" in graph["__init__"] and "network" in graph["remote_runner"], graph
  cycle = find_cycle(graph)
  assert cycle is None, " -> ".join(cycle)


def test_find_cycle_finds_one_through_a_function_level_import(tmp_path):
  path = tmp_path / "runner.py"
  path.write_text("def f():\n  from tfrl.ga3c import system\n  from . import queues\n")
  assert _imported(str(path), {"system", "queues"}) == {"system", "queues"}
  graph = {"system": {"feed"}, "feed": {"runner", "queues"}, "runner": {"system"},
           "queues": set()}
  cycle = find_cycle(graph)
  assert cycle[0] == cycle[-1] and sorted(cycle[1:]) == ["feed", "runner", "system"], cycle
  assert find_cycle({"a": {"b"}, "b": set()}) is None
