"""A user's SQL against the store (`coevolve-engine query`): it writes nothing but the store, and only with
--write; it reads nothing but the store and the files and folders the user names with --read.

- The SQL is split by DuckDB's own parser and every statement is checked against an allow-list before any of
  them runs (``coevolve_engine.query.statements``): read-only, only statements that read; with --write, those and the ones that
  change the store. A refusal names the statement and why. No statement can write a file: COPY, EXPORT, ATTACH,
  PREPARE/EXECUTE, EXPLAIN ANALYZE of a refused statement and the table functions that are not readers are
  refused in both modes, so a --read folder is read and never written.
- Once the store is open (a read-only open builds its temporary views first), its connection is locked down:
  ``enable_external_access = false``, with only the --read files in ``allowed_paths`` and folders in
  ``allowed_directories``, then ``lock_configuration = true``, so that no statement can loosen it again.
- With --write the statements run in one transaction; the result is delivered (printed, or written to -o) and
  the held-out guard checked before it commits, so any failure, in SQL, in rendering or in the guard, keeps
  nothing, and the error shown is the first one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping, Sequence

import duckdb
import polars as pl

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.sqlident import quote_ident
from coevolve_engine.core.store import Store
from coevolve_engine.query.statements import statement_refusal

#: DuckDB types polars cannot take from Arrow (some crash it, BIGNUM comes as opaque bytes): fetched as text
_UNCONVERTIBLE = ("INTERVAL", "UNION(", "BIGNUM")


class QueryError(CoevolveError):
    """A statement query refuses, or a --write whose result would break a rule of the store; nothing was kept."""


def parse(sql: str, params: Mapping[str, object], *, write: bool = False) -> list[duckdb.Statement]:
    """The statements of ``sql``, each checked against query's allow-list (``coevolve_engine.query.statements``), read-only or
    with ``write``; every parameter must be used by one of them."""
    statements = duckdb.extract_statements(sql)
    if not statements:
        raise QueryError("no SQL statement to run")
    for number, statement in enumerate(statements, 1):
        reason = statement_refusal(statement, write=write)
        if reason:
            shown = " ".join(statement.query.split()).rstrip(";")
            shown = shown if len(shown) <= 200 else shown[:199] + "…"
            raise QueryError(f"statement {number} ({shown}) is refused: {reason}. Nothing was run")
    used = set().union(*(statement.named_parameters for statement in statements))
    unused = sorted(set(params) - used)
    if unused:
        raise QueryError(f"-p {unused[0]}: no statement uses ${unused[0]}")
    return statements


def lock_down(con: duckdb.DuckDBPyConnection, readable: Sequence[Path] = ()) -> None:
    """From now on ``con`` reads no file but its store and ``readable`` (files and folders), writes no file but its
    store, and its configuration cannot change."""
    files = [str(Path(path).resolve()) for path in readable if not Path(path).is_dir()]
    folders = [str(Path(path).resolve()).rstrip(os.sep) + os.sep for path in readable if Path(path).is_dir()]
    con.execute("SET allowed_paths = $files", {"files": files})
    con.execute("SET allowed_directories = $folders", {"folders": folders})
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _frame(relation: duckdb.DuckDBPyRelation | None) -> pl.DataFrame:
    """A result as a polars frame; columns of types polars cannot take (intervals, unions) come as text."""
    if relation is None:
        return pl.DataFrame()
    if any(marker in str(kind).upper() for kind in relation.types for marker in _UNCONVERTIBLE):
        relation = relation.project(", ".join(
            f"CAST({quote_ident(name)} AS VARCHAR) AS {quote_ident(name)}"
            if any(marker in str(kind).upper() for marker in _UNCONVERTIBLE) else quote_ident(name)
            for name, kind in zip(relation.columns, relation.types)))
    return relation.pl()


def _execute(con: duckdb.DuckDBPyConnection, statements: list[duckdb.Statement],
             params: Mapping[str, object]) -> pl.DataFrame:
    """Run the statements in order; the result of the last one."""
    *before, last = statements
    for statement in before:
        cursor = con.execute(statement, {name: params[name] for name in statement.named_parameters} or None)
        if hasattr(cursor, "complete"):  # DuckDB 2 runs a result to its end only when asked, before the next
            cursor.complete()
    return _frame(con.sql(last, params={name: params[name] for name in last.named_parameters} or None))


_HELD_OUT_WITH_TRAJECTORIES = """
    SELECT t.task_id, count(*) AS trajectories, min(tr.trajectory_id) AS first
    FROM {store}.trajectories AS tr JOIN {store}.tasks AS t USING (task_id)
    WHERE t.split = 'eval' GROUP BY t.task_id ORDER BY t.task_id
"""


def _held_out_with_trajectories(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, str]]:
    """(task, trajectories, first trajectory) of every eval task with trajectories, read from the store's own
    tables by their whole name (``<store>.main.tasks``): a temporary table of the user's named ``tasks`` or
    ``trajectories`` lives in DuckDB's ``temp.main``, which a bare or ``main.``-qualified name would find first."""
    (catalog,) = con.execute("SELECT current_database()").fetchall()[0]
    store = f"{quote_ident(catalog)}.main"
    return con.execute(_HELD_OUT_WITH_TRAJECTORIES.format(store=store)).fetchall()


def _check_held_out(con: duckdb.DuckDBPyConnection, before: set[str]) -> None:
    """The held-out guard of ingest, for --write: no statement may leave trajectories of an eval task (a task
    made eval while it has trajectories, or trajectories added to or moved onto an eval task)."""
    for task_id, count, first in _held_out_with_trajectories(con):
        if task_id not in before:
            raise QueryError(
                f"task {task_id!r} would be a held-out eval task (split 'eval') with {count} trajectories in the "
                f"store ({first!r}, ...), which signals, patterns and synthesis would keep seeing; nothing was "
                "kept. Hold out a task without trajectories, or keep this one's split 'train'")


def run_query(store: Store, sql: str, params: Mapping[str, object], *, write: bool,
              deliver: Callable[[pl.DataFrame], None], readable: Sequence[Path] = ()) -> None:
    """Run ``sql`` on ``store`` (opened read-only unless ``write``) and hand the last statement's result to
    ``deliver``; with ``write``, in one transaction that commits only after ``deliver`` returned."""
    statements = parse(sql, params, write=write)
    lock_down(store.con, readable)
    if not write:
        deliver(_execute(store.con, statements, params))
        return
    with store.transaction() as con:
        held_out = {task_id for task_id, _, _ in _held_out_with_trajectories(con)}
        frame = _execute(con, statements, params)
        _check_held_out(con, held_out)
        deliver(frame)
