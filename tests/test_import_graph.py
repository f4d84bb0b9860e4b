"""No import loops: between quantspec's packages, and between its modules.

The graph comes from the import statements of every module (at module level and inside functions
alike: a function-level import is an edge too).  A node of the package graph is a subpackage
(``quantspec/onnx/``) or a module at the top of the package (``quantspec/cli.py``); the root
``quantspec/__init__.py`` imports nothing by statement (it loads subpackages on first use), so any
package may take names from it.  A node of the module graph is a module; ``from . import x`` is an
edge to the submodule ``x`` when there is one, else to the package's ``__init__``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "quantspec"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _targets(name: str, node: ast.AST) -> list[str]:
    """The quantspec modules an import statement of module ``name`` loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "quantspec"]
    if node.level:
        base = name.split(".") if _is_package(name) else name.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module.split(".")[0] != "quantspec":
        return []
    out = []
    for alias in node.names:
        sub = f"{module}.{alias.name}"
        out.append(sub if sub in MODULES else module)
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(name, node):
                    while target not in MODULES and "." in target:
                        target = target.rsplit(".", 1)[0]
                    if target != name:
                        edges[name].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_no_import_loop_between_packages():
    edges: dict[str, set[str]] = defaultdict(set)
    for a, targets in _edges().items():
        for b in targets:
            pa, pb = _package_of(a), _package_of(b)
            if pa != pb and pb != "quantspec":
                edges[pa].add(pb)
    assert _cycles(edges) == []


def test_no_import_loop_between_modules():
    """A package's ``__init__`` that re-exports its submodules' names and a submodule that takes
    names from its own package's ``__init__`` would be a loop: submodules import each other."""
    edges = {a: {b for b in targets if b != "quantspec"} for a, targets in _edges().items()}
    assert _cycles(edges) == []


def test_the_graph_sees_imports():
    """The test can fail: the graph has the edges it must have, function-level imports included."""
    edges = _edges()
    assert "quantspec.onnx.plan" in edges["quantspec.onnx"]
    assert "quantspec.checkpoint.schemes" in edges["quantspec.onnxmodels._cli"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
