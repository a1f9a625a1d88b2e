"""What an ingest reads from the store before it checks a file, and what it writes under the store's lock.

An ingest parses, stages, checks, hashes and deduplicates a file in a private in-memory DuckDB (the *work*
connection), so that the store's lock is not held for any of it. The checks that compare the file with the
store (groups, immutable ids, held-out tasks, known tasks, task conflicts) run there too, against a *mirror*:
tables named like the store's (``trajectories``, ``tasks``, ``ingests``) holding the stored rows those checks
can touch: the rows sharing an id, group or task with the file. ``read_mirror`` copies them in one short read.

Every write to ``tasks`` and ``trajectories`` is an ingest, and every ingest's rows carry its ``ingest_id``
(a sequence, so a later ingest has a larger one). ``watermark`` is the largest ``ingest_id`` the mirror has
seen; under the lock, ``catch_up`` copies whatever was ingested since (another writer's rows) into the mirror,
so the checks can be rerun against the store as it is now. A row deleted meanwhile (a resumed run removing an
interrupted round's rollouts) is not looked for: the ingest then counts a record it saw as already stored, as
if it had run before the deletion. Data cross between connections as Arrow tables, which DuckDB scans in place.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

#: the stored trajectory columns the checks compare, in the store's order
TRAJECTORY_COLUMNS = ("trajectory_id", "task_id", "step", "group_id", "reward", "success", "actions", "messages",
                      "policy", "meta", "ingest_id", "error", "ingest_line")
TASK_COLUMNS = ("task_id", "env", "prompt", "spec", "source", "meta", "split", "ingest_id")
#: the in-memory tables an ingest registers on the store's connection
KEYS = ("ingest_keys_group", "ingest_keys_id", "ingest_keys_task")


def _arrow(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pa.Table:
    return con.sql(sql, params=params).to_arrow_table()


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _keys(work: duckdb.DuckDBPyConnection, kind: str) -> dict[str, pa.Table]:
    """The file's ids, groups and tasks, as the store's side of a semi join reads them."""
    if kind == "trajectories":
        return {
            "ingest_keys_group": _arrow(work, "SELECT DISTINCT group_id AS key FROM ingest_resolved"),
            "ingest_keys_id": _arrow(work, "SELECT resolved_id AS key FROM ingest_resolved"),
            "ingest_keys_task": _arrow(work, "SELECT DISTINCT task_id AS key FROM ingest_resolved"),
        }
    return {
        "ingest_keys_group": pa.table({"key": pa.array([], pa.string())}),
        # the trajectories of a task the file holds out
        "ingest_keys_id": _arrow(work, "SELECT DISTINCT task_id AS key FROM ingest_staged "
                                       "WHERE coalesce(split, 'train') = 'eval'"),
        "ingest_keys_task": _arrow(work, "SELECT DISTINCT task_id AS key FROM ingest_staged"),
    }


def _stored(con: duckdb.DuckDBPyConnection, kind: str, since: int | None) -> dict[str, pa.Table]:
    """The stored rows the checks can touch (only those ingested after ``since``, when given)."""
    newer = "" if since is None else " AND ingest_id > $since"
    params = None if since is None else {"since": since}
    if kind == "trajectories":
        trajectories = _arrow(con, f"""
            SELECT {_columns(TRAJECTORY_COLUMNS)} FROM trajectories
            WHERE (group_id IN (SELECT key FROM ingest_keys_group) OR trajectory_id IN (SELECT key FROM ingest_keys_id))
            {newer}""", params)
    else:
        trajectories = _arrow(con, f"""
            SELECT {_columns(TRAJECTORY_COLUMNS)} FROM trajectories
            WHERE task_id IN (SELECT key FROM ingest_keys_id){newer}""", params)
    tasks = _arrow(con, f"SELECT {_columns(TASK_COLUMNS)} FROM tasks "
                        f"WHERE task_id IN (SELECT key FROM ingest_keys_task){newer}", params)
    ingests = _arrow(con, f"SELECT ingest_id, path, format FROM ingests WHERE true{newer}", params)
    return {"trajectories": trajectories, "tasks": tasks, "ingests": ingests}


def register_keys(con: duckdb.DuckDBPyConnection, keys: dict[str, pa.Table]) -> None:
    for name, table in keys.items():
        con.register(name, table)


def unregister(con: duckdb.DuckDBPyConnection, names: tuple[str, ...] | list[str]) -> None:
    for name in names:
        try:
            con.unregister(name)
        except duckdb.Error:
            pass


def read_mirror(store_con: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection,
                kind: str) -> tuple[dict[str, pa.Table], int]:
    """Copy the stored rows the checks of ``kind`` can touch into ``work``; returns the file's keys (for
    ``catch_up``) and the watermark (the largest ``ingest_id`` the copy has seen)."""
    keys = _keys(work, kind)
    register_keys(store_con, keys)
    try:
        watermark = store_con.execute("SELECT coalesce(max(ingest_id), 0) FROM ingests").fetchall()[0][0]
        stored = _stored(store_con, kind, None)
    finally:
        unregister(store_con, KEYS)
    for name, table in stored.items():
        work.register("ingest_copy", table)
        work.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM ingest_copy")
        work.unregister("ingest_copy")
    return keys, watermark


def catch_up(store_con: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, kind: str,
             keys: dict[str, pa.Table], watermark: int) -> bool:
    """Under the lock: copy into the mirror what was ingested after ``watermark`` (a task row replaces its older
    version, a placeholder filled in); True when anything was, and the checks must run again."""
    latest = store_con.execute("SELECT coalesce(max(ingest_id), 0) FROM ingests").fetchall()[0][0]
    if latest <= watermark:
        return False
    register_keys(store_con, keys)
    try:
        stored = _stored(store_con, kind, watermark)
    finally:
        unregister(store_con, KEYS)
    for name, table in stored.items():
        work.register("ingest_copy", table)
        if name == "tasks":
            work.execute("DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM ingest_copy)")
        work.execute(f"INSERT INTO {name} BY NAME SELECT * FROM ingest_copy")
        work.unregister("ingest_copy")
    return True
