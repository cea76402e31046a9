"""What imports what in tfrl/: no module imports itself back through others
(tfrl.envs' protocol and its env classes, GA3C's system and its remote
runner among them), and tfrl.neuroevolution, which GA, ES and random search
share, imports none of them. Read from the sources (every import statement, those inside
functions included), not from what a run happens to import."""

import ast
import os
from typing import Dict, List, Set

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ALGORITHMS = ("tfrl.ga", "tfrl.es", "tfrl.random_search")
_SHARED = "tfrl.neuroevolution"


def _modules() -> Dict[str, str]:
  """{module name: path} of tfrl/ (a package by its own name)."""
  found = {}
  for folder, _, files in os.walk(os.path.join(_ROOT, "tfrl")):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(folder, name)
        module = os.path.relpath(path, _ROOT)[:-len(".py")].replace(os.sep, ".")
        found[module.removesuffix(".__init__")] = path
  return found


def _imported(module: str, path: str, known: Set[str]) -> Set[str]:
  """The modules of `known` that `module` imports, and the packages that
  importing them runs first."""
  with open(path) as f:
    tree = ast.parse(f.read())
  package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
  named = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      named.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parent = package
        for _ in range(node.level - 1):
          parent = parent.rpartition(".")[0]
        base = f"{parent}.{base}" if base else parent
      named.add(base)
      named.update(f"{base}.{alias.name}" for alias in node.names)
  imported = set()
  for name in named:
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
      prefix = ".".join(parts[:end])
      # A module's own packages are already being imported when it runs.
      if prefix in known and not (module == prefix or module.startswith(prefix + ".")):
        imported.add(prefix)
  return imported


def _graph() -> Dict[str, Set[str]]:
  modules = _modules()
  return {m: _imported(m, path, set(modules)) for m, path in modules.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
  """The strongly connected parts of `graph` with more than one module."""
  order, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    order[node] = low[node] = len(order)
    stack.append(node)
    on_stack.add(node)
    for other in sorted(graph[node]):
      if other not in order:
        visit(other)
        low[node] = min(low[node], low[other])
      elif other in on_stack:
        low[node] = min(low[node], order[other])
    if low[node] == order[node]:
      part = []
      while True:
        other = stack.pop()
        on_stack.discard(other)
        part.append(other)
        if other == node:
          break
      if len(part) > 1:
        found.append(sorted(part))

  for node in sorted(graph):
    if node not in order:
      visit(node)
  return found


def _within(module: str, package: str) -> bool:
  return module == package or module.startswith(package + ".")


def test_the_shared_package_imports_no_algorithm():
  graph = _graph()
  shared = [m for m in graph if _within(m, _SHARED)]
  assert len(shared) > 10, shared
  imports = {m: sorted(d for d in graph[m] if any(_within(d, a) for a in _ALGORITHMS))
             for m in shared}
  assert {m: d for m, d in imports.items() if d} == {}


def test_no_import_cycle():
  graph = _graph()
  # The graph sees imports, those inside functions too (the remote runner's).
  assert "tfrl.neuroevolution.runner" in graph["tfrl.ga"]
  assert "tfrl.ga3c.network" in graph["tfrl.ga3c.remote_runner"]
  assert "tfrl.envs.atari_env" in graph["tfrl.envs.make"]
  assert _cycles(graph) == []


def test_the_checker_sees_imports_in_functions_and_cycles(tmp_path):
  probe = tmp_path / "probe.py"
  probe.write_text("def make():\n  from tfrl import ga\n")
  assert _imported("tfrl.neuroevolution.probe", str(probe), {"tfrl", "tfrl.ga"}) == {"tfrl.ga"}
  assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
