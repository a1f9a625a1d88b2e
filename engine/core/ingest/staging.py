"""Steps 1-3 of an ingest, on its private connection: the source's columns checked against the record format and
staged with the store's column types (``STAGED``), then every value check in one scan, and unique ids within the
file. The first failing record is named by file, line (row) and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from duckdb import sqltypes

from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.ids import ID_FIELDS, MAX_ID_LENGTH
from coevolve_engine.core.ingest.sources import SOURCE
from coevolve_engine.core.json_input import MAX_JSON_DEPTH, json_depth, read_json
from coevolve_engine.core.records import KIND_NAMES, Field
from coevolve_engine.core.sqlident import quote_ident

#: the staged records: the source's in the store's column types, with ``_line``
STAGED = "ingest_staged"

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


def stage(con: duckdb.DuckDBPyConnection, path: Path, fields: tuple[Field, ...]) -> None:
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
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED} AS SELECT {', '.join(select)} FROM {SOURCE}")


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
# An object that names a key twice, at any depth, found in SQL: DuckDB's reader keeps both keys (json_keys lists
# each, unescaped as Python reads them) and '$..*' reaches every value under the root. With a pattern search for
# NaN and Infinity, it flags every text _ambiguous_json refuses (and text that is not JSON, which an earlier
# check of the field names), so the Python parse runs on those only, not on every text that holds an object.
# '$..*' writes out every value under the root, at most (length x opening brackets) characters: a text above
# _SEARCHED of that goes to the Python parse instead, so a deep or long text cannot blow up the search's memory.
_DUPLICATE_KEY = ("coalesce(list_bool_or(list_transform(list_prepend(json({c}), json_extract({c}, '$..*')), "
                  "lambda e: json_type(e) = 'OBJECT' AND len(json_keys(e)) > len(list_distinct(json_keys(e))))), "
                  "false)")
_SEARCHED = 65_536
_MAYBE_AMBIGUOUS = ("{c} IS NOT NULL AND (regexp_matches({c}, 'NaN|Infinity') OR (contains({c}, '{{') AND "
                    "CASE WHEN length({c}) * (length({c}) - length(replace(replace({c}, '[', ''), '{{', ''))) "
                    f"<= {_SEARCHED} AND json_valid({{c}}) THEN " + _DUPLICATE_KEY + " ELSE true END))")


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
                checks.append((field.name, (_MAYBE_AMBIGUOUS.format(c=c), f"{_STRICT_JSON}({c})"),
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


def location(fmt: str, line: int) -> str:
    unit = {"jsonl": "line", "json": "record", "records": "record"}.get(fmt, "row")
    return f"{unit} {line}"


def check_values(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, fields: tuple[Field, ...]) -> None:
    """Every value check in one scan of the staged records: the first check (in ``_value_checks`` order) that
    any record fails is reported at the first line that fails it, as if the checks ran one after another. A
    check with a cheap and an exact predicate runs the exact one only on the records the cheap one flagged."""
    checks = _value_checks(fields, parsed=fmt in ("jsonl", "json", "records"))
    cheap = [predicate[0] if isinstance(predicate, tuple) else predicate for _, predicate, _ in checks]
    firsts = ", ".join(f"min(_line) FILTER (WHERE {predicate})" for predicate in cheap)
    found = con.execute(f"SELECT {firsts} FROM {STAGED}").fetchall()[0]
    for (name, predicate, message), line in zip(checks, found):
        if line is not None and isinstance(predicate, tuple):
            _register_json_depth(con)
            _register_strict_json(con)
            line = con.execute(f"SELECT min(_line) FROM (SELECT _line, {predicate[1]} AS bad FROM {STAGED} "
                               f"WHERE {predicate[0]}) WHERE bad").fetchall()[0][0]
        if line is not None:
            value = con.execute(f"SELECT CAST({quote_ident(name)} AS VARCHAR) FROM {STAGED} WHERE _line = $line",
                                {"line": line}).fetchall()[0][0]
            shown = value if value is None or len(value) <= 60 else value[:57] + "..."
            raise IngestError(str(path), message.format(value=shown, length=len(value or "")),
                              location=location(fmt, line), field=name)


def check_unique(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, column: str) -> None:
    rows = con.execute(
        f"SELECT {column}, list(_line ORDER BY _line) FROM {STAGED} WHERE {column} IS NOT NULL "
        f"GROUP BY {column} HAVING count(*) > 1 ORDER BY min(_line) LIMIT 1"
    ).fetchall()
    if rows:
        value, lines = rows[0]
        kind = {"jsonl": "lines", "json": "records"}.get(fmt, "rows")
        raise IngestError(
            str(path),
            f"{value!r} appears more than once ({kind} {', '.join(map(str, lines[:5]))})",
            location=location(fmt, lines[1]),
            field=column,
        )
