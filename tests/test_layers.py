"""Imports point one way (docs/architecture.md, "Layers"): core <- adapters <- trainers <- engine <- cli.

Every ``import`` in the three source folders, at module top, inside functions and under TYPE_CHECKING alike,
is read with ``ast`` and classified by the layer of the module it names. A layer may import its own layer and
the layers before it, never one after it; so nothing outside ``engine/cli`` imports the CLI, and the core
types (``coevolve_engine.core``, the store and its helpers) need nothing above them.
"""

from __future__ import annotations

import ast
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


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every coevolve_engine module ``path`` imports, relative imports resolved."""
    name, package = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "coevolve_engine":  # `from coevolve_engine.core import sqlfiles`
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
