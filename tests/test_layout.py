"""The package's module graph has no import circles (type-only imports count: each marks a cut in
the wrong place), and the slot loop and the engine are assembled by composition, not mixins."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pyllama_yield

ROOT = Path(pyllama_yield.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    mods = {}
    for f in ROOT.rglob("*.py"):
        if "webui" in f.parts:
            continue
        name = ".".join(f.relative_to(ROOT.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = f
    return mods


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules it imports; a name taken from a package's ``__init__`` counts as an
    import of the module that defines it (the ``__init__`` only re-exports)."""
    reexports = {}
    for name, f in mods.items():
        if f.name == "__init__.py":
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                    for a in node.names:
                        reexports[(name, a.asname or a.name)] = f"{name}.{node.module}"
    edges: dict[str, set[str]] = defaultdict(set)
    for name, f in mods.items():
        if f.name == "__init__.py":
            continue
        package = name.rsplit(".", 1)[0].split(".")
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                found = reexports.get((target, a.name))
                if f"{target}.{a.name}" in mods:
                    found = f"{target}.{a.name}"
                elif found is None and target in mods and mods[target].name != "__init__.py":
                    found = target
                if found and found != name:
                    edges[name].add(found)
    return edges


def _circles(edges: dict[str, set[str]], nodes: list[str]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(frozenset(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in nodes:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    mods = _modules()
    circles = _circles(_edges(mods), sorted(mods))
    assert not circles, [sorted(c) for c in circles]


def test_no_class_of_the_engine_inherits_from_another_of_its_classes():
    """A class built on another class of ``server/`` is a mixin in disguise: each part names its
    collaborators in its constructor instead (exceptions, enums and the drafter's null object are
    types, not parts)."""
    allowed = {("DraftModel", "NoDraft")}
    ours = set()
    trees = {f: ast.parse(f.read_text()) for f in (ROOT / "server").glob("*.py")}
    for tree in trees.values():
        ours |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    classes = [n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    exceptions = {"Exception", "ValueError", "RuntimeError"}  # an error type may refine another
    while more := {c.name for c in classes if c.name not in exceptions and _base_names(c) & exceptions}:
        exceptions |= more
    found = []
    for f, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for name in _base_names(node):
                    if name in ours and name not in exceptions and (node.name, name) not in allowed:
                        found.append(f"{f.name}: {node.name}({name})")
    assert not found, found


def _base_names(node: ast.ClassDef) -> set[str]:
    return {b.id for b in node.bases if isinstance(b, ast.Name)}


def test_a_circle_is_found():
    edges = defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert _circles(edges, ["a", "b", "c", "d"]) == [frozenset("abc")]
