"""The loop stays readable top to bottom: small modules, short functions, no phase found by name at run time,
no plugin built by sniffing its signature (issue 20)."""

from __future__ import annotations

import ast
from pathlib import Path

LOOP = Path(__file__).resolve().parent.parent / "engine" / "loop"
MAX_LINES, MAX_FUNCTION_LINES = 300, 60


def test_the_scan_reads_the_loop():
    assert {"run.py", "phases.py", "ledger.py", "config.py"} <= {p.name for p in LOOP.glob("*.py")}


def test_every_loop_module_is_at_most_300_lines():
    long = {p.name: n for p in LOOP.glob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules of engine/loop over {MAX_LINES} lines: {long}"


def test_every_loop_function_is_at_most_60_lines():
    long = []
    for path in sorted(LOOP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "\n".join(long)


def test_no_signature_sniffing_and_no_phase_found_by_name():
    for path in sorted(LOOP.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr != "signature", f"{path.name}:{node.lineno} reads a signature"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                target, name = node.args[0], node.args[1]
                assert not (isinstance(target, ast.Name) and target.id == "self" and isinstance(name, ast.JoinedStr)), \
                    f"{path.name}:{node.lineno} finds a method by a built name"


def test_the_run_migration_lists_the_phases_in_the_tables_order():
    # migrations are recorded by name, not by checksum, so this comment may follow the table
    import re

    from coevolve_engine.loop.phases import PHASES

    text = (LOOP.parent.parent / "sql" / "migrations" / "005_run.sql").read_text(encoding="utf-8")
    comment = text[text.index("--   phase "):text.index("--   status ")]
    assert tuple(re.findall(r"'([a-z]+)'", comment)) == PHASES
