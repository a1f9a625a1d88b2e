"""What a store's migrations made, and rebuilding what of it went missing (`coevolve-engine init` on an existing
store).

A migration's objects are read from its own SQL: the tables and sequences it creates and the columns it adds.
With them the store can tell

- a migration that is applied though ``schema_migrations`` does not say so (the table was dropped or emptied):
  every object it makes is there, so it is recorded, not run again (running it would fail on the first
  ``CREATE TABLE``); one whose objects are only partly there is named, with what is missing;
- a bookkeeping table (``BOOKKEEPING``: the ingest log, the run's phases, the lease, the lock log, the cache of
  embeddings, the LLM call log) that was dropped: it is created again, empty, with the columns later
  migrations added. A dropped table that held the user's data (tasks, trajectories, patterns, candidates,
  weights, evaluations, rounds) cannot be rebuilt from anything, and is named instead.

Views and macros are rebuilt from their files by the store itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import duckdb

from coevolve_engine.core import sqlfiles
from coevolve_engine.core.errors import StoreError

#: tables that hold what the engine keeps for itself, not the user's data: empty is a valid state for each
BOOKKEEPING = frozenset({"schema_migrations", "ingests", "run_phases", "store_lease", "lock_holds", "embeddings",
                         "llm_calls"})

_COMMENT = re.compile(r"--[^\n]*")
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CREATE_SEQUENCE = re.compile(r"^\s*CREATE\s+SEQUENCE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
                         re.IGNORECASE)


@dataclass
class MigrationObjects:
    """What one migration makes: {table: CREATE statement}, {sequence: CREATE statement}, [(table, column,
    ALTER statement)]."""

    tables: dict[str, str] = field(default_factory=dict)
    sequences: dict[str, str] = field(default_factory=dict)
    columns: list[tuple[str, str, str]] = field(default_factory=list)


def objects_of(sql: str) -> MigrationObjects:
    """The objects a migration's SQL makes, statement by statement."""
    made = MigrationObjects()
    for statement in duckdb.extract_statements(sql):
        text = _COMMENT.sub("", statement.query).strip()
        if match := _CREATE_TABLE.match(text):
            made.tables[match.group(1).lower()] = text
        elif match := _CREATE_SEQUENCE.match(text):
            made.sequences[match.group(1).lower()] = text
        elif match := _ADD_COLUMN.match(text):
            made.columns.append((match.group(1).lower(), match.group(2).lower(), text))
    return made


@dataclass(frozen=True)
class Present:
    """The store's own tables, their columns and its sequences (temporary objects left out)."""

    tables: frozenset[str]
    columns: frozenset[tuple[str, str]]
    sequences: frozenset[str]

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection) -> "Present":
        where = "database_name = current_database() AND schema_name = 'main'"  # temp objects are in 'temp'
        tables = {name.lower() for (name,) in con.execute(f"SELECT table_name FROM duckdb_tables() WHERE {where}")
                  .fetchall()}
        columns = {(t.lower(), c.lower()) for t, c in con.execute(
            f"SELECT table_name, column_name FROM duckdb_columns() WHERE {where}").fetchall()}
        sequences = {name.lower() for (name,) in con.execute(
            f"SELECT sequence_name FROM duckdb_sequences() WHERE {where}").fetchall()}
        return cls(frozenset(tables), frozenset(columns), frozenset(sequences))

    def missing(self, made: MigrationObjects) -> list[str]:
        """What of ``made`` the store lacks, in words."""
        return ([f"table {t}" for t in made.tables if t not in self.tables]
                + [f"sequence {s}" for s in made.sequences if s not in self.sequences]
                + [f"column {t}.{c}" for t, c, _ in made.columns if (t, c) not in self.columns])

    def holds_any(self, made: MigrationObjects) -> bool:
        return (any(t in self.tables for t in made.tables) or any(s in self.sequences for s in made.sequences)
                or any((t, c) in self.columns for t, c, _ in made.columns))


def already_applied(con: duckdb.DuckDBPyConnection, path: object, migration: sqlfiles.SqlFile) -> bool:
    """Whether ``migration``, which schema_migrations does not list, was applied all the same (every object it
    makes is in the store). A migration whose objects are partly there is refused, naming what is missing."""
    made = objects_of(migration.sql)
    present = Present.read(con)
    missing = present.missing(made)
    if not missing:
        return bool(made.tables or made.sequences or made.columns)
    if present.holds_any(made) and all(_bookkeeping(what, made) for what in missing):
        return True  # applied; the bookkeeping it made was dropped since, and init makes it again
    if present.holds_any(made):
        raise StoreError(f"store {path}: migration {migration.name} is not recorded and only partly applied "
                         f"({', '.join(missing)} missing); init cannot tell how to finish it. Restore the store "
                         "from a backup")
    return False


def _bookkeeping(what: str, made: MigrationObjects) -> bool:
    """Whether ``what`` (as ``Present.missing`` words it) is a bookkeeping table, a column of one, or a sequence
    only bookkeeping tables use."""
    kind, name = what.split(" ", 1)
    if kind == "sequence":
        users = [table for table, create in made.tables.items() if f"'{name}'" in create]
        return bool(users) and all(table in BOOKKEEPING for table in users)
    return name.split(".")[0] in BOOKKEEPING


def rebuild_bookkeeping(con: duckdb.DuckDBPyConnection, path: object, applied: list[str]) -> list[str]:
    """Create again, empty, every bookkeeping table (and its sequence) of an applied migration that is missing,
    with the columns later migrations added to it; the names of what was rebuilt. A missing table of the user's
    data is refused (StoreError naming it), before anything is created."""
    present = Present.read(con)
    made = [objects_of(m.sql) for m in sqlfiles.migrations() if m.name in applied]
    lost = sorted(t for m in made for t in m.tables if t not in present.tables and t not in BOOKKEEPING)
    if lost:
        raise StoreError(
            f"store {path} has lost the table(s) {', '.join(lost)}, which held data that init cannot rebuild "
            "(nothing was changed). Restore the store from a backup, or start a new store with `coevolve-engine "
            "init --db NEW`")
    rebuilt: list[str] = []
    for migration in made:
        for name, sql in migration.sequences.items():
            users = [t for m in made for t, create in m.tables.items() if f"'{name}'" in create]
            if name not in present.sequences:
                if any(t in present.tables for t in users):
                    raise StoreError(f"store {path} has lost the sequence {name}, which numbers rows of "
                                     f"{', '.join(users)}; init cannot tell where to restart it. Restore the store "
                                     "from a backup")
                con.execute(sql)
                rebuilt.append(f"sequence {name}")
        for name, sql in migration.tables.items():
            if name not in present.tables:
                con.execute(sql)
                for table, _, alter in (c for m in made for c in m.columns):
                    if table == name:
                        con.execute(alter)
                rebuilt.append(f"table {name}")
    return rebuilt
