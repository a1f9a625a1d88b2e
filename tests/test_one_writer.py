"""Each store table has one module that writes it, and undoing an ingest is the ingest's writes module's.

Every SQL text in the three source folders (string literals, f-strings with their values as ``{}``) is read with
``ast`` for the statements that change a table's rows or shape (INSERT, UPDATE, DELETE, TRUNCATE, CREATE / ALTER /
DROP TABLE). Those naming a table of a fresh store are its writes; a module that writes a table not its own, or a
second writer, fails ``test_each_store_table_has_one_writer``. Writes through ``Store.add_records`` and the ingest
commands are the ingest module's. A statement whose table is a formatted value is allowed in the ingest modules
alone, which write the tables of a record kind by name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.store import Store

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "adapters", "trainers")
INGEST = "engine/core/ingest/writes.py"  # the ingest package's writes, step 5 and its undoing

#: the one module that writes each table of the store
WRITERS = {
    "tasks": INGEST,
    "trajectories": INGEST,
    "ingests": INGEST,
    "candidates": "engine/synthesis/candidates.py",
    "failure_patterns": "engine/patterns/write.py",
    "pattern_members": "engine/patterns/write.py",
    "task_weights": "engine/curriculum/weights.py",
    "weight_sets": "engine/curriculum/weights.py",
    "evaluations": "engine/eval/heldout.py",
    "eval_results": "engine/eval/heldout.py",
    "embeddings": "engine/models/embeddings.py",
    "llm_calls": "engine/models/llm.py",
    "rounds": "engine/loop/ledger.py",
    "run_phases": "engine/loop/ledger.py",
    "store_lease": "engine/core/lease.py",
    "lock_holds": "engine/core/store.py",
    "schema_migrations": "engine/core/store.py",
}
#: texts that name a store table in a write but do not write the store, and why
NOT_THE_STORE = {
    ("engine/core/ingest/mirror.py", "tasks"): "the ingest's in-memory mirror, on its own connection",
    ("trainers/trl_grpo/trainer.py", "trajectories"): "a command an error message offers the user",
    ("trainers/trl_grpo/trainer.py", "tasks"): "a command an error message offers the user",
}
#: modules whose writes may name their table by a formatted value
BY_NAME = {INGEST, "engine/core/ingest/mirror.py", "engine/core/ingest/unit.py"}  # unit: its staged temp table

WRITE = re.compile(
    r"\b(INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?|ALTER\s+TABLE"
    r"|DROP\s+TABLE(?:\s+IF\s+EXISTS)?|CREATE\s+(?:OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+)?TABLE"
    r"(?:\s+IF\s+NOT\s+EXISTS)?)\s+((?:\w+\.)?(?:\w+|\{\}))", re.IGNORECASE)


def sql_texts(path: Path):
    """(line, text) of every string in ``path``, an f-string's values written ``{}``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
            yield node.lineno, node.value


def writes() -> list[tuple[str, int, str]]:
    """(module, line, table) of every write the sources spell, temporary tables left out."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            for line, text in sql_texts(path):
                for match in WRITE.finditer(text):
                    table = match.group(3).lower()
                    if match.group(2) or table.startswith("temp."):
                        continue
                    found.append((module, line, table.removeprefix("main.")))
    return found


def store_tables(tmp_path: Path) -> set[str]:
    with Store(tmp_path / "fresh.duckdb") as store:
        return {name for (name,) in store.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE'").fetchall()}


def test_the_scan_finds_the_writes_it_judges(tmp_path):
    # so the test below cannot pass by reading nothing: known writes of each kind are found
    found = {(module, table) for module, _, table in writes()}
    assert ("engine/loop/ledger.py", "rounds") in found  # an UPDATE
    assert ("engine/curriculum/weights.py", "task_weights") in found  # an INSERT ... SELECT
    assert ("engine/patterns/write.py", "pattern_members") in found  # a DELETE
    assert (INGEST, "{}") in found  # by name: the undoing of an ingest
    assert ("engine/drift/metrics.py", "embeddings") not in found  # its CREATE TEMP TABLE is no store write


def test_each_store_table_has_one_writer(tmp_path):
    tables = store_tables(tmp_path)
    assert set(WRITERS) == tables, "every table of a fresh store is listed here with its writer"
    wrong = []
    for module, line, table in writes():
        if table == "{}":
            if module not in BY_NAME:
                wrong.append(f"{module}:{line} writes a table named by a value")
        elif table in tables and module != WRITERS[table] and (module, table) not in NOT_THE_STORE:
            wrong.append(f"{module}:{line} writes {table}, whose writer is {WRITERS[table]}")
    assert not wrong, "\n".join(wrong)


def rollouts(prefix: str, step: int) -> list[dict]:
    return [{"trajectory_id": f"{prefix}-{i}", "task_id": "t1", "step": step, "group_id": f"{prefix}-g",
             "reward": float(i), "success": bool(i)} for i in range(2)]


def test_the_store_undoes_the_ingests_a_label_names_and_nothing_else(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        store.add_records("tasks", [{"task_id": "t1", "env": "calc", "prompt": "p", "spec": {}}])
        store.add_records("trajectories", rollouts("a", 1), label="run round 0 train steps 1-1")
        store.add_records("trajectories", rollouts("b", 1), label="run round 0 train steps 2-2")
        store.add_records("trajectories", rollouts("c", 1), label="mine, at the same step")
        store.add_records("trajectories", rollouts("d", 1), label="run round 00 train steps 1-1")
        with store.transaction():  # joins the caller's transaction, as a resumed round's start uses it
            assert store.remove_ingested("run round 0 train ") == 4
        left = store.execute("SELECT trajectory_id FROM trajectories ORDER BY ALL").fetchall()
        assert [t for (t,) in left] == ["c-0", "c-1", "d-0", "d-1"]
        assert [p for (p,) in store.execute("SELECT path FROM ingests WHERE kind = 'trajectories' ORDER BY ALL"
                                            ).fetchall()] == ["mine, at the same step", "run round 00 train steps 1-1"]
        assert store.remove_ingested("run round 0 train ") == 0  # nothing left to undo
        with pytest.raises(ZeroDivisionError), store.transaction():
            store.remove_ingested("mine")
            1 / 0
        assert store.scalar("SELECT count(*) FROM trajectories") == 4  # rolled back with the caller's transaction
        with pytest.raises(IngestError, match="unknown record kind"):
            store.remove_ingested("mine", kind="runs")
    with Store(tmp_path / "s.duckdb", read_only=True) as store, pytest.raises(IngestError, match="read-only"):
        store.remove_ingested("mine")
