"""Reading the formats the store ingests into one shape: a relation named ``ingest_source`` holding the
record fields plus ``_line`` (the line of a JSON-lines file, the 1-based row of a Parquet file or dataset).

JSON lines are parsed and type-checked here. DuckDB reads the whole file first (``_read_jsonl_sql``): one JSON
parse per line, the type of every field checked from its JSON text, and lists and objects written back as
Python's ``json.dumps`` writes them (``", "`` and ``": "``, keys in their order), since content hashes and stored
JSON are built from that text. A line DuckDB cannot vouch for goes to Python instead:

- a line that may be bad (not JSON as Python reads it, not an object, an unknown field, a wrong type, a step out
  of range): the whole file is read again record by record in Python (``_read_jsonl``), so the error names the
  first bad line and field exactly as it always did;
- a good line whose text Python may write differently (duplicate keys, where Python keeps the last; a trailing
  comma, NaN or Infinity, which DuckDB accepts; \\u escapes; numbers in exponent form or of 16 digits and more):
  that line alone is parsed by Python.

Parquet and datasets carry their own column types, which ``coevolve_engine.ingest`` checks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from coevolve_engine.errors import IngestError
from coevolve_engine.records import KIND_NAMES, Field, json_kind, matches
from coevolve_engine.sqlident import quote_ident

FORMATS = ("jsonl", "parquet", "dataset")
SOURCE = "ingest_source"


def detect_format(path: Path, format: str | None = None) -> str:
    if format is not None:
        if format not in FORMATS:
            raise IngestError(str(path), f"unknown format {format!r}; known: {', '.join(FORMATS)}")
        return format
    if path.is_dir():
        return "dataset"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise IngestError(
        str(path),
        f"unknown file format {suffix or '(no extension)'!r}; use .jsonl/.ndjson (JSON lines), .parquet, "
        "a directory written by datasets' save_to_disk, or pass --format",
    )


_ARROW_TYPES = {
    "str": pa.string(),
    "int": pa.int64(),
    "number": pa.float64(),
    "bool": pa.bool_(),
    "list": pa.string(),  # JSON text
    "object": pa.string(),  # JSON text
}


def table_from_records(
    records: Iterable[tuple[int, Any]], fields: tuple[Field, ...], label: str, unit: str = "line"
) -> pa.Table:
    """Type-check parsed records, numbered by ``unit`` ('line' or 'record'), into a source table."""
    by_name = {f.name: f for f in fields}
    columns: dict[str, list[Any]] = {f.name: [] for f in fields}
    lines: list[int] = []
    for number, record in records:
        where = f"{unit} {number}"
        if not isinstance(record, dict):
            raise IngestError(label, f"expected a JSON object, got {json_kind(record)}", location=where)
        unknown = sorted(set(record) - set(by_name))
        if unknown:
            raise IngestError(
                label,
                f"unknown field; known fields: {', '.join(by_name)} (put anything else under 'meta')",
                location=where,
                field=unknown[0],
            )
        for name, field in by_name.items():
            value = record.get(name)
            if value is None:
                if field.required:
                    raise IngestError(label, "required field is missing", location=where, field=name)
            elif not matches(field.kind, value):
                raise IngestError(
                    label,
                    f"expected {KIND_NAMES[field.kind]}, got {json_kind(value)} {_preview(value)}",
                    location=where,
                    field=name,
                )
            elif field.range is not None and not field.range[0] <= value <= field.range[1]:
                raise IngestError(label, f"{value} is outside [{field.range[0]}, {field.range[1]}]", location=where,
                                  field=name)
            elif field.kind in ("list", "object"):
                try:  # key order is kept: an environment may read meaning into it
                    value = json.dumps(value, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise IngestError(label, f"not representable as JSON ({exc})", location=where, field=name) from None
            columns[name].append(value)
        lines.append(number)
    arrays = {name: pa.array(values, type=_ARROW_TYPES[by_name[name].kind]) for name, values in columns.items()}
    arrays["_line"] = pa.array(lines, type=pa.int64())
    return pa.table(arrays)


def _read_jsonl(path: Path, fields: tuple[Field, ...]) -> tuple[pa.Table, str]:
    """Parse and type-check a JSON-lines file; returns the source table and the file's sha256."""
    digest = hashlib.sha256()

    def parsed() -> Iterator[tuple[int, Any]]:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                digest.update(raw)
                text = raw.strip()
                if not text:
                    continue
                try:
                    yield number, json.loads(text)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise IngestError(str(path), f"not valid JSON ({exc})", location=f"line {number}") from None

    table = table_from_records(parsed(), fields, str(path))
    return table, digest.hexdigest()


def _preview(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_dataset(path: Path) -> tuple[pa.Table, str]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise IngestError(str(path), f"not a dataset saved with save_to_disk ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        splits = ", ".join(loaded)
        raise IngestError(str(path), f"holds several splits ({splits}); pass one split's directory, e.g. {path}/train")
    table = loaded.flatten_indices().data.table
    table = table.append_column("_line", pa.array(range(1, table.num_rows + 1), type=pa.int64()))
    digest = hashlib.sha256()
    for arrow_file in sorted(path.glob("*.arrow")):
        digest.update(_file_sha256(arrow_file).encode())
    return table, digest.hexdigest()


_LINES = "ingest_lines"
_DOUBT_LINES = "ingest_doubt_lines"
# Written-back JSON whose json.dumps form may differ: \\u escapes (DuckDB writes upper-case hex), and number
# tokens (after '[' or a separator's space) in exponent form, of 16 digits or more or 0.0000x (Python writes
# 1e+16, 1e-05), NaN and Infinity (Python refuses them). A string that looks so only costs a Python parse.
_DOUBTFUL_TEXT = (r"""\\u|[\[ ]-?([0-9]+(\.[0-9]+)?[eE]|[0-9]{16}|0\.0000)"""
                  r"""|[\[ ]-?(?i:nan|inf|infinity)([,\]}]|$)""")
_INT_TEXT = "-?(0|[1-9][0-9]*)"
_NUMBER_TEXT = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"


def _as_python_json(text: str) -> str:
    """SQL: the JSON text ``text`` (as DuckDB writes it) with json.dumps's separators, from DuckDB's indented form
    (there ": " already, and every newline is between tokens: a newline inside a string is written \\n), so a
    comma before a newline gets its space and each newline goes with its indentation."""
    return (f"regexp_replace(replace(json_pretty({text}), ',' || chr(10), ', ' || chr(10)), chr(10) || ' *', '', "
            "'g')")


def _duplicate_keys(text: str) -> str:
    """SQL: whether any object in the JSON text ``text`` has a key twice (Python keeps the last, DuckDB both):
    the keys of the value itself and of every value inside it ('$..*'), one list per object."""
    return (f"coalesce(list_bool_or(list_transform(list_prepend(json_keys({text}), json_keys({text}, '$..*')), "
            "lambda k: len(k) <> len(list_distinct(k)))), false)")


def _read_jsonl_sql(path: Path, fields: tuple[Field, ...]) -> pa.Table | None:
    """Read a JSON-lines file through DuckDB into the source table (see the module docstring); None when a line
    may be bad and the exact reader must name it. It runs on a connection of its own, so that nothing it does
    can fail the store's transaction."""
    con = duckdb.connect()
    try:
        return _lines_table(con, path, fields)
    finally:
        con.close()


def _lines_table(con: duckdb.DuckDBPyConnection, path: Path, fields: tuple[Field, ...]) -> pa.Table | None:
    if any(ch in str(path) for ch in "*?[]{}~"):  # read_text would take the name as a pattern: read it in Python
        return None
    structure = json.dumps({f.name: "JSON" for f in fields})
    try:
        files = con.execute("SELECT count(*), min(filename) FROM read_text($path)", {"path": str(path)}).fetchall()[0]
        if files != (1, str(path)):
            return None
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {_LINES} AS
            SELECT _line, text, try(json_transform(text, $structure)) AS r, try(json_keys(text)) AS keys
            FROM (SELECT unnest(lines) AS text, generate_subscripts(lines, 1) AS _line
                  FROM (SELECT string_split(content, chr(10)) AS lines FROM read_text($path)))
            WHERE trim(text, ' ' || chr(9) || chr(13) || chr(11) || chr(12)) <> ''
        """, {"structure": structure, "path": str(path)})
    except duckdb.Error:  # not UTF-8, unreadable: the exact reader says what
        return None
    known = [f.name for f in fields]
    bad = ["r IS NULL", "keys IS NULL", "left(ltrim(text, ' ' || chr(9) || chr(13)), 1) <> '{'",
           "NOT list_has_all($known, keys)"]
    doubt = ["len(keys) <> len(list_distinct(keys))", r"regexp_matches(text, ',[ \t\r]*[\]}]')"]
    columns = []
    for field in fields:
        t = f"r.{quote_ident(field.name)}"
        name = quote_ident(field.name)
        if field.required:
            bad.append(f"{t} IS NULL")
        fits = {"str": f"left({t}, 1) = '\"'", "int": f"regexp_full_match({t}, '{_INT_TEXT}')",
                "number": f"regexp_full_match({t}, '{_NUMBER_TEXT}')", "bool": f"{t} IN ('true', 'false')",
                "list": f"left({t}, 1) = '['", "object": f"left({t}, 1) = '{{'"}[field.kind]
        bad.append(f"({t} IS NOT NULL AND NOT ({fits}))")
        if field.kind == "str":
            value = f"json_extract_string({t}, '$')"
        elif field.kind == "int":
            value = f"TRY_CAST({t} AS HUGEINT)"
            if field.range is not None:
                bad.append(f"({t} IS NOT NULL AND NOT coalesce({value} BETWEEN {field.range[0]} AND {field.range[1]}, "
                           "false))")
            value = f"CAST({value} AS BIGINT)"
        elif field.kind == "number":
            doubt.append(f"regexp_matches(coalesce({t}, ''), '[eE]|[0-9]{{16}}')")
            value = f"TRY_CAST({t} AS DOUBLE)"
        elif field.kind == "bool":
            value = f"({t} = 'true')"
        else:
            doubt.append(f"({t} IS NOT NULL AND (regexp_matches({name}, '{_DOUBTFUL_TEXT}') OR {_duplicate_keys(t)}))")
            value = f"CASE WHEN {t} IS NOT NULL THEN {_as_python_json(t)} END"
        columns.append(f"CAST({value} AS {_SQL_TYPES[field.kind]}) AS {name}")
    try:
        flagged = con.execute(
            f"SELECT bool_or({' OR '.join(bad)}) FROM {_LINES}", {"known": known}).fetchall()[0][0]
        if flagged:
            return None
        names = ", ".join(quote_ident(f.name) for f in fields)
        # the values first (each written-back list once), then which lines Python must read instead
        con.execute(f"CREATE OR REPLACE TEMP TABLE {_DOUBT_LINES} AS "
                    f"SELECT _line, text, r, keys, {', '.join(columns)} FROM {_LINES}")
        con.execute(f"ALTER TABLE {_DOUBT_LINES} ADD COLUMN doubtful BOOLEAN")
        con.execute(f"UPDATE {_DOUBT_LINES} SET doubtful = {' OR '.join(doubt)}")
        doubtful = con.execute(f"SELECT _line, text FROM {_DOUBT_LINES} WHERE doubtful ORDER BY _line").fetchall()
        select = f"SELECT {names}, _line FROM {_DOUBT_LINES} WHERE NOT doubtful"
    except duckdb.Error:
        return None
    if doubtful:
        try:
            exact = table_from_records(((line, json.loads(text)) for line, text in doubtful), fields, str(path))
        except (IngestError, ValueError, TypeError, UnicodeError):
            return None
        con.register("ingest_exact_lines", exact)
        select += f" UNION ALL SELECT {names}, _line FROM ingest_exact_lines"
    return con.sql(f"{select} ORDER BY _line").to_arrow_table()


_SQL_TYPES = {"str": "VARCHAR", "int": "BIGINT", "number": "DOUBLE", "bool": "BOOLEAN", "list": "VARCHAR",
              "object": "VARCHAR"}


def open_source(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, fields: tuple[Field, ...]) -> str:
    """Register the file as the relation ``ingest_source``; returns the file's sha256."""
    if not path.exists():
        raise IngestError(str(path), "no such file or directory")
    if fmt == "jsonl":
        table = _read_jsonl_sql(path, fields) if path.is_file() else None
        if table is not None:
            con.register(SOURCE, table)
            return _file_sha256(path)
        table, sha = _read_jsonl(path, fields)
        con.register(SOURCE, table)
        return sha
    if fmt == "dataset":
        table, sha = _read_dataset(path)
        con.register(SOURCE, table)
        return sha
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {SOURCE} AS "
            f"SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS _line "
            f"FROM read_parquet({_sql_string(str(path))}, file_row_number = true)"
        )
    except duckdb.Error as exc:
        raise IngestError(str(path), f"cannot read as Parquet ({exc})") from None
    return _file_sha256(path)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def drop_source(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the source relation. In a failed transaction the DROP fails quietly and the rollback that
    follows removes the view instead."""
    try:
        con.execute(f"DROP VIEW IF EXISTS {SOURCE}")
    except duckdb.Error:
        pass
    try:
        con.unregister(SOURCE)
    except duckdb.Error:
        pass
