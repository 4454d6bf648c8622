"""The shape of the code that docs/package.md draws: which folder may import
which. Every import is read from the source (module level and inside
functions alike), so a new upward import or import cycle fails here."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The library's parts, lowest first: a part imports only parts of a lower
# rank (and itself). `tasks` and `training` stand side by side.
LIBRARY_RANKS = {"checks": 0, "ops": 1, "layers": 2, "decoding": 3, "data": 4,
                 "metrics": 5, "tasks": 6, "training": 6}
# The top-level packages, lowest first.
PACKAGE_RANKS = {"keras_structattn": 0, "models": 1, "recipes": 2}


def _module_name(path):
    relative = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return relative[: -len(".__init__")] if relative.endswith(".__init__") else relative


def _imports(path, name):
    """The first-party modules `path` (module `name`) imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # `from package import module` is an import of the module; of
            # anything else, one of `package`.
            found.update(f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base
                         for alias in node.names)
    # A module needs its ancestor packages anyway: no edge to them.
    return {m for m in found if m.split(".")[0] in PACKAGE_RANKS and not
            name.startswith(m + ".")}


def _is_module(name):
    path = os.path.join(ROOT, *name.split("."))
    return os.path.exists(path + ".py") or os.path.exists(os.path.join(path, "__init__.py"))


def _graph():
    graph = {}
    for top in PACKAGE_RANKS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for file in files:
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    name = _module_name(path)
                    graph[name] = _imports(path, name)
    # Keep only edges to modules or packages that exist.
    return {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}


GRAPH = _graph()


def _part(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_the_library_imports_downwards_only():
    upward = []
    for module, targets in GRAPH.items():
        if not module.startswith("keras_structattn.") or _part(module) not in LIBRARY_RANKS:
            continue
        for target in targets:
            if target.split(".")[0] != "keras_structattn" or _part(target) is None:
                if target.split(".")[0] != "keras_structattn":
                    upward.append(f"{module} -> {target}")
                continue
            source, goal = LIBRARY_RANKS[_part(module)], LIBRARY_RANKS[_part(target)]
            if goal > source or (goal == source and _part(target) != _part(module)):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports against docs/package.md's order:\n" + "\n".join(upward)


@pytest.mark.parametrize("package", ["keras_structattn", "models"])
def test_no_package_imports_a_higher_one(package):
    rank = PACKAGE_RANKS[package]
    wrong = [f"{m} -> {t}" for m, targets in GRAPH.items() if m.split(".")[0] == package
             for t in targets if PACKAGE_RANKS[t.split(".")[0]] > rank]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    """Tarjan's strongly connected components of the module graph."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in GRAPH[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_the_graph_reads_the_code():
    # The check would pass vacuously on an empty or unparsed tree.
    assert len(GRAPH) > 100
    assert "keras_structattn.ops.areas" in GRAPH["keras_structattn.layers.area_attention"]
    assert "recipes._engine" in GRAPH["recipes._vl"]
