"""Ingest task and trajectory records into the store, one file as one unit of work.

Formats: JSON lines (``.jsonl``/``.ndjson``), Parquet (``.parquet``), and a ``datasets`` dataset saved with
``save_to_disk`` (a directory). Every format is first turned into a *source* relation with the record
fields plus ``_line`` (the line of a JSON-lines file, the 1-based row of the others), then

1. the source's columns are checked against the record format (unknown fields, wrong types),
2. the source is staged with the store's column types,
3. value checks run in SQL and the first failing record is reported by file, line/row and field,
4. ids and content hashes are resolved and checked against the stored rows they can meet,
5. new records are inserted, inside one transaction with the ``ingests`` row that records the file.

Steps 1-4 run on a private in-memory DuckDB, against a copy of the stored rows the checks need
(``coevolve_engine.core.ingest_store``); only step 5 needs the store's lock, and it first rechecks whatever another
writer ingested since that copy was read. ``ingest_file`` and ``ingest_records`` work in a store the caller holds
open; ``ingest_opened`` opens it through the caller's opener, for the read and again for step 5 alone (the store's
``ingest_path`` opens it by path so, holding its lock only to insert). Any failure leaves the store exactly as it
was. The ingest needs only an open store's connection, transaction and mode (``OpenStore``): the store module
builds on it, not the other way round.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Protocol

import duckdb
import pyarrow as pa
from duckdb import sqltypes

from coevolve_engine.core import sqlfiles
from coevolve_engine.core.ids import ID_FIELDS, MAX_ID_LENGTH
from coevolve_engine.core.json_input import MAX_JSON_DEPTH, json_depth, read_json
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.ingest_sources import (
    FORMATS,
    SOURCE,
    detect_format,
    drop_source,
    open_source,
    table_from_records,
)
from coevolve_engine.core.ingest_store import catch_up, read_mirror
from coevolve_engine.core.records import FIELDS, KIND_NAMES, Field
from coevolve_engine.core.sqlident import quote_ident

__all__ = ["FORMATS", "IngestReport", "OpenStore", "detect_format", "ingest_file", "ingest_opened", "ingest_records"]

_STAGED = "ingest_staged"


@dataclass(frozen=True)
class IngestReport:
    """What one ingested file added."""

    path: str
    kind: str
    format: str
    records: int
    added: int
    ingest_id: int

    @property
    def skipped(self) -> int:
        return self.records - self.added

# -- column checks and staging ------------------------------------------------------------------

_INTEGER_TYPES = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
}
# Integers are staged wider than the store keeps them, so that a value beyond BIGINT reaches the range check
# (and its message) instead of failing the cast.
_STORE_TYPES = {"str": "VARCHAR", "int": "HUGEINT", "number": "DOUBLE", "bool": "BOOLEAN"}


def _type_fits(kind: str, duck_type: str) -> bool:
    if duck_type == '"NULL"' or duck_type == "NULL":
        return True
    if kind == "str":
        return duck_type == "VARCHAR"
    if kind == "int":
        return duck_type in _INTEGER_TYPES
    if kind == "number":
        return duck_type in _INTEGER_TYPES or duck_type in ("FLOAT", "DOUBLE") or duck_type.startswith("DECIMAL")
    if kind == "bool":
        return duck_type == "BOOLEAN"
    if kind == "list":
        return duck_type in ("VARCHAR", "JSON") or duck_type.endswith("]")
    return duck_type in ("VARCHAR", "JSON") or duck_type.startswith(("STRUCT", "MAP"))


def _stage(con: duckdb.DuckDBPyConnection, path: Path, fields: tuple[Field, ...]) -> None:
    """Check the source's columns and stage it with the store's column types as ``ingest_staged``."""
    described = {row[0]: row[1] for row in con.execute(f"DESCRIBE {SOURCE}").fetchall()}
    known = {f.name for f in fields} | {"_line"}
    unknown = [name for name in described if name not in known]
    if unknown:
        raise IngestError(
            str(path),
            f"unknown column; known columns: {', '.join(f.name for f in fields)} (put anything else under 'meta')",
            field=unknown[0],
        )
    select = [quote_ident("_line")]
    for field in fields:
        column = quote_ident(field.name)
        duck_type = described.get(field.name)
        if duck_type is None:
            if field.required:
                raise IngestError(str(path), "required column is missing", field=field.name)
            expression = f"CAST(NULL AS {_STORE_TYPES.get(field.kind, 'VARCHAR')})"
        elif not _type_fits(field.kind, duck_type):
            raise IngestError(
                str(path), f"column has type {duck_type}; expected {KIND_NAMES[field.kind]}", field=field.name
            )
        elif field.kind in ("list", "object"):
            expression = column if duck_type in ("VARCHAR", "JSON") else f"to_json({column})"
            expression = f"CAST({expression} AS VARCHAR)"
        else:
            expression = f"CAST({column} AS {_STORE_TYPES[field.kind]})"
        if field.name in ID_FIELDS:  # one spelling per id (coevolve_engine.core.ids)
            expression = f"nfc_normalize({expression})"
        select.append(f"{expression} AS {column}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_STAGED} AS SELECT {', '.join(select)} FROM {SOURCE}")


# -- value checks --------------------------------------------------------------------------------

# A list (object) check parses the value once: try() turns text that is not JSON into NULL, which fails it.
_IS_LIST = "coalesce(try(json_type({c})) <> 'ARRAY', true)"
_IS_OBJECT = "coalesce(try(json_type({c})) <> 'OBJECT', true)"
# The actions check, exactly: an element that is not an object, or whose first "name" is not a string, or whose
# first "arguments" is present and neither an object nor null. It parses every element again, so it runs only on
# the records that _SUSPECT_ACTION flags.
_BAD_ACTION = (
    "CASE WHEN json_valid(actions) AND json_type(CAST(actions AS JSON)) = 'ARRAY' THEN coalesce(list_bool_or("
    "list_transform(json_extract(CAST(actions AS JSON), '$[*]'), lambda a: "
    "json_type(a) <> 'OBJECT' OR json_type(a, '$.name') IS DISTINCT FROM 'VARCHAR' "
    "OR coalesce(json_type(a, '$.arguments'), 'NULL') NOT IN ('OBJECT', 'NULL'))), false) ELSE false END"
)
# The same check in one parse of the list: from_json reads each element's "name" and "arguments" as JSON text
# (the first of duplicate keys, as json_type does; NULL for a JSON null, a missing key, or an element that is not
# an object). It flags every record _BAD_ACTION flags (and a list from_json could not read at all), so the exact
# check only ever confirms what this one found.
_SUSPECT_ACTION = (
    "coalesce(list_bool_or(list_transform(try(from_json(actions, '[{\"name\": \"JSON\", \"arguments\": \"JSON\"}]')), "
    "lambda e: e IS NULL OR e.name IS NULL OR left(e.name, 1) <> '\"' "
    "OR (e.arguments IS NOT NULL AND left(e.arguments, 1) <> '{'))), "
    "try(from_json(actions, '[{\"name\": \"JSON\", \"arguments\": \"JSON\"}]')) IS NULL AND left(ltrim(actions), 1) = '[')"
)


# A JSON text nested deeper than the limit holds more opening brackets than the limit: the cheap count flags at
# least every such record, and the exact depth (counted in Python, without recursion) runs on those only.
_MAYBE_DEEP = (f"{{c}} IS NOT NULL AND length({{c}}) > {2 * MAX_JSON_DEPTH} "
               f"AND length({{c}}) - length(replace(replace({{c}}, '[', ''), '{{{{', '')) > {MAX_JSON_DEPTH}")
_JSON_DEPTH = "coevolve_json_depth"


def _register_json_depth(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``coevolve_json_depth(text)`` callable on ``con`` (once per connection)."""
    if not con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = $name",
                       {"name": _JSON_DEPTH}).fetchall()[0][0]:
        con.create_function(_JSON_DEPTH, lambda text: json_depth(text)[0], [sqltypes.VARCHAR], sqltypes.BIGINT)


_STRICT_JSON = "coevolve_json_ambiguous"


def _ambiguous_json(text: str) -> bool:
    """Whether a JSON text names a key twice in one object or holds NaN or an infinity: what a JSON-lines record
    is refused for, since readers disagree on what it means (Python keeps the last key, DuckDB the first)."""
    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        read_json(text, unique_keys=True, parse_constant=refuse)
    except ValueError:  # DuplicateKeyError, a constant, or text the other checks name
        return True
    return False


def _register_strict_json(con: duckdb.DuckDBPyConnection) -> None:
    if not con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = $name",
                       {"name": _STRICT_JSON}).fetchall()[0][0]:
        con.create_function(_STRICT_JSON, _ambiguous_json, [sqltypes.VARCHAR], sqltypes.BOOLEAN)


def _value_checks(fields: tuple[Field, ...], *, parsed: bool = True) -> list[tuple[str, str, str]]:
    """(field, SQL predicate that is true for a bad record, message) in the order they are checked. A predicate
    may be a pair (a cheap one that flags at least every bad record, the exact one run on those only).
    ``parsed``: the JSON texts were written by Python from parsed records (JSON lines), so they hold no duplicate
    key and no NaN; else (Parquet, datasets) those are checked too."""
    checks: list[tuple[str, Any, str]] = []
    for field in fields:
        c = quote_ident(field.name)
        if field.required:
            checks.append((field.name, f"{c} IS NULL", "required field is missing"))
        if field.name in ID_FIELDS:  # the rule for ids, in coevolve_engine.core.ids
            checks.append((field.name, f"{c} = ''", "must not be empty"))
            checks.append((field.name, f"regexp_matches({c}, '^\\p{{Z}}|\\p{{Z}}$|[\\p{{Cc}}\\p{{Zl}}\\p{{Zp}}]')",
                           "must not be blank, start or end with whitespace, or hold a control character or line "
                           "break, got {value!r}"))
            checks.append((field.name, f"length({c}) > {MAX_ID_LENGTH}",
                           f"is {{length}} characters long; an id has at most {MAX_ID_LENGTH}: {{value!r}}"))
        if field.kind == "list":
            checks.append((field.name, f"{c} IS NOT NULL AND {_IS_LIST.format(c=c)}", "must be a JSON list"))
        if field.kind == "object":
            checks.append((field.name, f"{c} IS NOT NULL AND {_IS_OBJECT.format(c=c)}", "must be a JSON object"))
        if field.kind in ("list", "object"):
            checks.append((field.name, (_MAYBE_DEEP.format(c=c), f"{_JSON_DEPTH}({c}) > {MAX_JSON_DEPTH}"),
                           f"nested more than {MAX_JSON_DEPTH} levels deep"))
            if not parsed:
                checks.append((field.name, (f"{c} IS NOT NULL AND (contains({c}, '{{') OR regexp_matches({c}, "
                                            "'NaN|Infinity'))", f"{_STRICT_JSON}({c})"),
                               "names a key twice in one object, or holds NaN or Infinity, which JSON readers read "
                               "differently: {value}"))
        if field.name == "split":
            checks.append(("split", "split NOT IN ('train', 'eval')", "split must be 'train' or 'eval', got {value!r}"))
        if field.range is not None:
            low, high = field.range
            checks.append((field.name, f"{c} < {low} OR {c} > {high}", f"{{value}} is outside [{low}, {high}]"))
        if field.name == "reward":
            checks.append(("reward", "isnan(reward) OR reward < 0 OR reward > 1", "reward {value} is outside [0, 1]"))
        if field.name == "actions":
            checks.append((
                "actions",
                (f"actions IS NOT NULL AND {_SUSPECT_ACTION}", f"actions IS NOT NULL AND {_BAD_ACTION}"),
                'each action must be an object {{"name": string, "arguments": object}}',
            ))
    return checks


def _location(fmt: str, line: int) -> str:
    unit = {"jsonl": "line", "json": "record", "records": "record"}.get(fmt, "row")
    return f"{unit} {line}"


def _check_values(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, fields: tuple[Field, ...]) -> None:
    """Every value check in one scan of the staged records: the first check (in ``_value_checks`` order) that
    any record fails is reported at the first line that fails it, as if the checks ran one after another. A
    check with a cheap and an exact predicate runs the exact one only on the records the cheap one flagged."""
    checks = _value_checks(fields, parsed=fmt in ("jsonl", "json", "records"))
    cheap = [predicate[0] if isinstance(predicate, tuple) else predicate for _, predicate, _ in checks]
    firsts = ", ".join(f"min(_line) FILTER (WHERE {predicate})" for predicate in cheap)
    found = con.execute(f"SELECT {firsts} FROM {_STAGED}").fetchall()[0]
    for (name, predicate, message), line in zip(checks, found):
        if line is not None and isinstance(predicate, tuple):
            _register_json_depth(con)
            _register_strict_json(con)
            line = con.execute(f"SELECT min(_line) FROM (SELECT _line, {predicate[1]} AS bad FROM {_STAGED} "
                               f"WHERE {predicate[0]}) WHERE bad").fetchall()[0][0]
        if line is not None:
            value = con.execute(f"SELECT CAST({quote_ident(name)} AS VARCHAR) FROM {_STAGED} WHERE _line = $line",
                                {"line": line}).fetchall()[0][0]
            shown = value if value is None or len(value) <= 60 else value[:57] + "..."
            raise IngestError(str(path), message.format(value=shown, length=len(value or "")),
                              location=_location(fmt, line), field=name)


def _check_unique(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, column: str) -> None:
    rows = con.execute(
        f"SELECT {column}, list(_line ORDER BY _line) FROM {_STAGED} WHERE {column} IS NOT NULL "
        f"GROUP BY {column} HAVING count(*) > 1 ORDER BY min(_line) LIMIT 1"
    ).fetchall()
    if rows:
        value, lines = rows[0]
        kind = {"jsonl": "lines", "json": "records"}.get(fmt, "rows")
        raise IngestError(
            str(path),
            f"{value!r} appears more than once ({kind} {', '.join(map(str, lines[:5]))})",
            location=_location(fmt, lines[1]),
            field=column,
        )


# -- kinds: checks against the store, run on the private connection's mirror of it ------------------------------

def _resolve_trajectories(con: duckdb.DuckDBPyConnection) -> None:
    """Fill default group ids and content-hash ids, and the tool names the action pattern is made of."""
    # A content hash names a record; the k-th identical copy in one file gets the suffix ':k', so identical
    # rollouts of one group stay distinct while re-ingesting the same file adds nothing.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE ingest_resolved AS
        SELECT *,
               coalesce(trajectory_id,
                        't-' || content_hash || CASE WHEN copy > 1 THEN ':' || copy ELSE '' END) AS resolved_id,
               json_extract_string(CAST(actions AS JSON), '$[*].name') AS action_names
        FROM (
            SELECT *, row_number() OVER (PARTITION BY content_hash ORDER BY _line) AS copy
            FROM (
                SELECT * EXCLUDE (group_id),
                       coalesce(group_id, task_id || '@' || CAST(step AS VARCHAR)) AS group_id,
                       md5(to_json(struct_pack(task_id, step, group_id, reward, success, actions, messages,
                                               policy, error, meta))) AS content_hash
                FROM {_STAGED}
            )
        )
    """)


def _check_trajectories(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, create_tasks: bool) -> None:
    """Check the resolved trajectories against the store (``con`` holds its mirror): groups, immutable ids,
    held-out tasks, and (without ``create_tasks``) that every task is stored."""
    # min <> max finds a group of two tasks or steps without counting distinct values; the first one found
    # (by its first line in the file) is then described
    combined = """
        WITH incoming AS (SELECT group_id, task_id, step, _line FROM ingest_resolved),
        stored AS (
            SELECT t.group_id, t.task_id, t.step, NULL::BIGINT AS _line
            FROM trajectories AS t SEMI JOIN incoming USING (group_id)
        ),
        combined AS (SELECT * FROM incoming UNION ALL SELECT * FROM stored)
    """
    rows = con.execute(combined + """
        SELECT group_id FROM combined GROUP BY group_id
        HAVING min(task_id) <> max(task_id) OR min(step) <> max(step)
        ORDER BY min(_line) LIMIT 1
    """).fetchall()
    if rows:
        group_id, task_ids, steps, line = con.execute(combined + """
            SELECT group_id, list(DISTINCT task_id), list(DISTINCT step), min(_line) FROM combined
            WHERE group_id = $group GROUP BY group_id
        """, {"group": rows[0][0]}).fetchall()[0]
        raise IngestError(
            str(path),
            f"group {group_id!r} would hold rollouts of tasks {sorted(task_ids)} at steps {sorted(steps)}; "
            "a group is the rollouts of one task at one step",
            location=_location(fmt, line) if line is not None else None,
            field="group_id",
        )
    _check_trajectory_conflicts(con, path, fmt)
    rows = con.execute("""
        SELECT r._line, r.task_id FROM ingest_resolved AS r JOIN tasks AS t USING (task_id)
        WHERE t.split = 'eval' ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is a held-out eval task (split 'eval'); its results belong in eval_results "
            "(coevolve-engine eval), never in trajectories, where signals, patterns and synthesis would see it",
            location=_location(fmt, line),
            field="task_id",
        )
    if not create_tasks:
        _check_known_tasks(con, path, fmt)


def _check_trajectory_conflicts(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    """A trajectory id already stored with other content is refused, naming both records (ids are immutable:
    re-ingesting the same record adds nothing, a changed one must not vanish)."""
    rows = con.execute("""
        SELECT r._line, r.resolved_id, i.path, i.format, t.ingest_line
        FROM ingest_resolved AS r JOIN trajectories AS t ON t.trajectory_id = r.resolved_id
        LEFT JOIN ingests AS i ON i.ingest_id = t.ingest_id
        WHERE r.task_id IS DISTINCT FROM t.task_id OR r.step IS DISTINCT FROM t.step
           OR r.group_id IS DISTINCT FROM t.group_id OR r.reward IS DISTINCT FROM t.reward
           OR r.success IS DISTINCT FROM t.success OR r.policy IS DISTINCT FROM t.policy
           OR r.error IS DISTINCT FROM t.error OR json(r.actions) IS DISTINCT FROM json(t.actions)
           OR json(r.messages) IS DISTINCT FROM json(t.messages) OR json(r.meta) IS DISTINCT FROM json(t.meta)
        ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, trajectory_id, stored_path, stored_format, stored_line = rows[0]
        where = f"from {stored_path}" if stored_path else "written by the engine"
        if stored_path and stored_line is not None:
            where += f", {_location(stored_format, stored_line)}"
        raise IngestError(
            str(path),
            f"trajectory {trajectory_id!r} is already in the store with different content ({where}); "
            "trajectory ids are immutable: give the new record another trajectory_id, or leave it out to use "
            "the record's content hash",
            location=_location(fmt, line),
            field="trajectory_id",
        )


def _check_known_tasks(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    """Every trajectory names a stored task."""
    rows = con.execute("""
        SELECT r._line, r.task_id, count(DISTINCT r.task_id) OVER ()
        FROM ingest_resolved AS r ANTI JOIN tasks USING (task_id)
        ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id, missing = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is not in the store" + (f" (nor are {missing - 1} other task ids of this file)"
                                                       if missing > 1 else "")
            + "; ingest its tasks first (`coevolve-engine ingest tasks FILE`), or pass --create-tasks to store a "
              "placeholder for each",
            location=_location(fmt, line),
            field="task_id",
        )


def _prepare_trajectories(work: duckdb.DuckDBPyConnection) -> dict[str, pa.Table]:
    """The rows to insert, before the lock: the placeholder tasks the store lacks (used with ``create_tasks``),
    and the trajectories it lacks in the store's column types (JSON parsed, action patterns built). They are
    handed over as Arrow tables, whole: DuckDB appends a materialized table faster than it pulls a stream (2.0 s
    against 3.0 s for 1M rows on 2 busy cores), and the lock is held meanwhile."""
    work.execute("""
        CREATE OR REPLACE TEMP TABLE ingest_new_tasks AS
        SELECT task_id, min(_line) AS line FROM ingest_resolved ANTI JOIN tasks USING (task_id)
        GROUP BY task_id ORDER BY min(_line)
    """)
    work.execute(next(view.sql for view in sqlfiles.views() if view.name == "action_pattern_from_names"))
    work.execute("""
        CREATE OR REPLACE TEMP TABLE ingest_new AS
        SELECT r.resolved_id AS trajectory_id, r.task_id, CAST(r.step AS BIGINT) AS step, r.group_id, r.reward,
               r.success, action_pattern_from_names(r.action_names) AS action_pattern,
               CAST(r.actions AS JSON) AS actions, CAST(r.messages AS JSON) AS messages, r.policy,
               CAST(r.meta AS JSON) AS meta, r.error, r._line AS ingest_line
        FROM ingest_resolved AS r
        ANTI JOIN trajectories AS t ON t.trajectory_id = r.resolved_id
        ORDER BY r._line
    """)
    prepared = {name: work.sql(f"SELECT * FROM {name}").to_arrow_table() for name in ("ingest_new_tasks", "ingest_new")}
    work.execute("DROP TABLE ingest_new")  # the Arrow table holds it now
    return prepared


def _insert_trajectories(prepared: dict[str, pa.Table], con: duckdb.DuckDBPyConnection, ingest_id: int,
                         create_tasks: bool) -> int:
    """Under the lock, on the store's ``con``: a placeholder task for each task id the store lacks (with
    ``create_tasks``; a later ingest of the real task fills it in), then the trajectories it lacks, as
    ``_prepare_trajectories`` left them."""
    if create_tasks:
        con.register("ingest_new", prepared["ingest_new_tasks"])
        try:
            con.execute("""
                INSERT INTO tasks (task_id, source, meta, split, ingest_id, ingest_line)
                SELECT task_id, 'placeholder', '{"placeholder": true}', 'train', $ingest_id, line
                FROM ingest_new ANTI JOIN tasks USING (task_id) ORDER BY line
            """, {"ingest_id": ingest_id})
        finally:
            con.unregister("ingest_new")
    con.register("ingest_new", prepared["ingest_new"])
    try:
        return con.execute(
            """
            INSERT INTO trajectories (trajectory_id, task_id, step, group_id, reward, success, action_pattern,
                                      actions, messages, policy, meta, ingest_id, error, ingest_line)
            SELECT trajectory_id, task_id, step, group_id, reward, success, action_pattern, actions, messages,
                   policy, meta, $ingest_id, error, ingest_line
            FROM ingest_new
            """,
            {"ingest_id": ingest_id},
        ).fetchall()[0][0]
    finally:
        con.unregister("ingest_new")


_PLACEHOLDER = "coalesce(json_extract(t.meta, '$.placeholder') = 'true'::JSON, false)"


def _check_task_conflicts(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    rows = con.execute(f"""
        SELECT s._line, s.task_id, count(tr.trajectory_id), min(tr.trajectory_id)
        FROM {_STAGED} AS s LEFT JOIN trajectories AS tr USING (task_id)
        WHERE coalesce(s.split, 'train') = 'eval'
        GROUP BY ALL HAVING count(tr.trajectory_id) > 0
        ORDER BY s._line LIMIT 1
    """).fetchall()
    if rows:  # the held-out guard, in this order too: trajectories first, then the task as eval
        line, task_id, count, first = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} cannot be held out (split 'eval'): the store already has {count} trajectories of "
            f"it ({first!r}, ...), which signals, patterns and synthesis would keep seeing; hold out another "
            "task, or use a store without them",
            location=_location(fmt, line),
            field="split",
        )
    rows = con.execute(f"""
        SELECT s._line, s.task_id FROM {_STAGED} AS s JOIN tasks AS t USING (task_id)
        WHERE NOT {_PLACEHOLDER} AND (s.env IS DISTINCT FROM t.env OR s.prompt IS DISTINCT FROM t.prompt
           OR s.source IS DISTINCT FROM t.source OR coalesce(s.split, 'train') IS DISTINCT FROM t.split
           OR json(s.spec) IS DISTINCT FROM json(t.spec) OR json(s.meta) IS DISTINCT FROM json(t.meta))
        ORDER BY s._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is already in the store with different content; tasks are immutable, "
            "give the new version a new task_id",
            location=_location(fmt, line),
            field="task_id",
        )


def _prepare_tasks(work: duckdb.DuckDBPyConnection) -> dict[str, pa.Table]:
    """The rows to insert, before the lock: new tasks, and those that fill in a stored placeholder."""
    work.execute(f"""
        CREATE OR REPLACE TEMP TABLE ingest_new AS
        SELECT s.task_id, s.env, s.prompt, CAST(s.spec AS JSON) AS spec, s.source, CAST(s.meta AS JSON) AS meta,
               coalesce(s.split, 'train') AS split, s._line AS ingest_line,
               t.task_id IS NOT NULL AS fills
        FROM {_STAGED} AS s LEFT JOIN tasks AS t USING (task_id)
        WHERE t.task_id IS NULL OR {_PLACEHOLDER}
        ORDER BY s._line
    """)
    return {"ingest_new": work.sql("SELECT * FROM ingest_new").to_arrow_table()}


def _insert_tasks(prepared: dict[str, pa.Table], con: duckdb.DuckDBPyConnection, ingest_id: int) -> int:
    """Under the lock, on the store's ``con``: fill in the placeholders the file names and insert the new tasks,
    as ``_prepare_tasks`` left them; returns how many were added or filled."""
    con.register("ingest_new", prepared["ingest_new"])
    try:
        filled = con.execute(f"""
            UPDATE tasks AS t SET env = s.env, prompt = s.prompt, spec = s.spec, source = s.source, meta = s.meta,
                   split = s.split, ingest_id = $ingest_id, ingest_line = s.ingest_line
            FROM ingest_new AS s WHERE s.fills AND s.task_id = t.task_id AND {_PLACEHOLDER}
        """, {"ingest_id": ingest_id}).fetchall()[0][0]
        added = con.execute(
            """
            INSERT INTO tasks (task_id, env, prompt, spec, source, meta, ingest_id, split, ingest_line)
            SELECT task_id, env, prompt, spec, source, meta, $ingest_id, split, ingest_line
            FROM ingest_new WHERE NOT fills ORDER BY ingest_line
            """,
            {"ingest_id": ingest_id},
        ).fetchall()[0][0]
    finally:
        con.unregister("ingest_new")
    return added + filled


# -- one unit of work --------------------------------------------------------------------------------

class OpenStore(Protocol):
    """What an ingest needs of an open store (``coevolve_engine.core.store.Store`` is one)."""

    con: duckdb.DuckDBPyConnection
    read_only: bool

    def transaction(self) -> ContextManager[duckdb.DuckDBPyConnection]: ...


#: opens the store for reading (True) or for writing (False); the context manager closes it, or leaves it open
Opener = Callable[[bool], ContextManager[OpenStore]]


def ingest_file(store: OpenStore, path: Path, *, kind: str, format: str | None = None,
                create_tasks: bool = False) -> IngestReport:
    """Validate and ingest one file of ``kind`` ('trajectories' or 'tasks') as one transaction of the open
    ``store``. Trajectories must name stored tasks, unless ``create_tasks`` stores a placeholder task for each id
    the store lacks. The file is read and checked on a private connection."""
    return ingest_opened(_held(store, str(path)), path, kind=kind, format=format, create_tasks=create_tasks)


def ingest_opened(open_store: Opener, path: Path, *, kind: str, format: str | None = None,
                  create_tasks: bool = False) -> IngestReport:
    """``ingest_file`` with the store opened through ``open_store``: once read-only for the stored rows the checks
    need, once for writing to insert, after the file is read and checked (so an opener that opens the store
    afresh each time holds its lock only to insert)."""
    fmt = detect_format(path, format)
    return _ingest(open_store, str(path), fmt, kind, lambda con: open_source(con, path, fmt, FIELDS[kind]),
                   create_tasks=create_tasks)


def ingest_records(
    store: OpenStore, records: Iterable[dict[str, Any]], *, kind: str, label: str = "records",
    create_tasks: bool = False,
) -> IngestReport:
    """Validate and ingest in-memory records (dicts in the record format) as one transaction; errors name
    ``label`` and the record's 1-based position."""
    records = list(records)

    def register(con: duckdb.DuckDBPyConnection) -> str:
        con.register(SOURCE, table_from_records(enumerate(records, start=1), FIELDS[kind], label, unit="record"))
        canonical = json.dumps(records, sort_keys=True, default=str).encode()
        return hashlib.sha256(canonical).hexdigest()

    return _ingest(_held(store, label), label, "records", kind, register, create_tasks=create_tasks)


def _held(store: OpenStore, label: str) -> Opener:
    """The opener of a store the caller holds open: the same store for reading and for writing."""
    if store.read_only:
        raise IngestError(label, "the store is open read-only")
    return lambda read_only: nullcontext(store)


def _ingest(
    open_store: Opener, label: str, fmt: str, kind: str, register: Callable[[duckdb.DuckDBPyConnection], str], *,
    create_tasks: bool = False,
) -> IngestReport:
    """Read, stage and check the records on a private connection, read the stored rows the checks need
    (``open_store(True)``), then insert in one transaction of ``open_store(False)``, after rechecking against
    what was ingested since the read."""
    fields = FIELDS[kind]
    path = Path(label)
    work = duckdb.connect(":memory:")
    work.execute("SET arrow_lossless_conversion = true")  # JSON crosses to the store as JSON, parsed once
    try:
        sha = register(work)
        _stage(work, path, fields)
        drop_source(work)
        records = work.execute(f"SELECT count(*) FROM {_STAGED}").fetchall()[0][0]
        _check_values(work, path, fmt, fields)
        _check_unique(work, path, fmt, "trajectory_id" if kind == "trajectories" else "task_id")
        if kind == "trajectories":
            _resolve_trajectories(work)
            work.execute(f"DROP TABLE {_STAGED}")  # ingest_resolved holds all of it: one copy in memory, not two
        with open_store(True) as store:
            keys, watermark = read_mirror(store.con, work, kind)
        _check_against_store(work, path, fmt, kind, create_tasks)
        prepared = _prepare(work, kind)
        with open_store(False) as store, store.transaction() as con:
            if catch_up(con, work, kind, keys, watermark):  # another writer ingested since the read
                _check_against_store(work, path, fmt, kind, create_tasks)
                prepared = _prepare(work, kind)
            ingest_id = con.execute(
                "INSERT INTO ingests (kind, path, format, sha256, records, added) "
                "VALUES ($kind, $path, $format, $sha, $records, 0) RETURNING ingest_id",
                {"kind": kind, "path": label, "format": fmt, "sha": sha, "records": records},
            ).fetchall()[0][0]
            added = _insert_trajectories(prepared, con, ingest_id, create_tasks) if kind == "trajectories" \
                else _insert_tasks(prepared, con, ingest_id)
            con.execute("UPDATE ingests SET added = $added WHERE ingest_id = $id", {"added": added, "id": ingest_id})
    except duckdb.Error as exc:
        raise IngestError(label, f"could not be ingested: {exc}") from exc
    finally:
        work.close()
    return IngestReport(label, kind, fmt, records, added, ingest_id)


def remove_ingested(store: OpenStore, label: str, *, kind: str = "trajectories") -> int:
    """Undo the in-memory ingests of ``kind`` whose label starts with ``label`` (e.g. an interrupted round's
    rollouts, each write named ``run round R train ...``): their rows and their ``ingests`` rows go, in the caller's
    transaction if one is open (it joins it), else in one of its own. Rows any other ingest wrote stay, also at the
    same steps or tasks. Returns the rows removed."""
    if kind not in FIELDS:
        raise IngestError(label, f"unknown record kind {kind!r}; known: {', '.join(FIELDS)}")
    if store.read_only:
        raise IngestError(label, "the store is open read-only")
    table = quote_ident(kind)
    with store.transaction() as con:
        written = [i for (i,) in con.execute(
            "SELECT ingest_id FROM ingests WHERE kind = $kind AND format = 'records' AND starts_with(path, $label)",
            {"kind": kind, "label": label}).fetchall()]
        removed = con.execute(f"SELECT count(*) FROM {table} WHERE list_contains($written, ingest_id)",
                              {"written": written}).fetchall()[0][0]
        con.execute(f"DELETE FROM {table} WHERE list_contains($written, ingest_id)", {"written": written})
        con.execute("DELETE FROM ingests WHERE list_contains($written, ingest_id)", {"written": written})
    return int(removed)


def _prepare(work: duckdb.DuckDBPyConnection, kind: str) -> dict[str, pa.Table]:
    return _prepare_trajectories(work) if kind == "trajectories" else _prepare_tasks(work)


def _check_against_store(work: duckdb.DuckDBPyConnection, path: Path, fmt: str, kind: str,
                         create_tasks: bool) -> None:
    if kind == "trajectories":
        _check_trajectories(work, path, fmt, create_tasks)
    else:
        _check_task_conflicts(work, path, fmt)
