"""Reading the formats the store ingests into one shape: a relation named ``ingest_source`` holding the
record fields plus ``_line`` (the line of a JSON-lines file, the 1-based row of a Parquet file or dataset).

JSON lines (and a JSON file holding one array of records) are parsed and type-checked here, record by record, so
a bad line (record) is named exactly; Parquet and datasets carry their own column types, which
``staging`` checks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from coevolve_engine.core.json_input import MAX_JSON_DEPTH, DuplicateKeyError, read_json
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.records import KIND_NAMES, Field, json_kind, matches

FORMATS = ("jsonl", "json", "parquet", "dataset")
#: fields only a task record has, and only a trajectory record has: a file of the other kind is named as such
_TASK_ONLY = {"env", "prompt", "spec", "source", "split"}
_TRAJECTORY_ONLY = {"step", "reward", "group_id", "actions", "messages", "trajectory_id", "success", "policy"}
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
    if suffix == ".json":
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise IngestError(
        str(path),
        f"unknown file format {suffix or '(no extension)'!r}; use .jsonl/.ndjson (JSON lines), .json (one array "
        "of records), .parquet, a directory written by datasets' save_to_disk, or pass --layout",
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
            other = _other_kind(set(unknown), set(by_name))
            if other is not None:
                raise IngestError(label, f"this looks like a {other} file (fields {', '.join(unknown)}): ingest it "
                                         f"with `coevolve-engine ingest {other} {label}`", location=where)
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
                except RecursionError:
                    raise IngestError(label, f"nested more than {MAX_JSON_DEPTH} levels deep", location=where,
                                      field=name) from None
            columns[name].append(value)
        lines.append(number)
    arrays = {name: pa.array(values, type=_ARROW_TYPES[by_name[name].kind]) for name, values in columns.items()}
    arrays["_line"] = pa.array(lines, type=pa.int64())
    return pa.table(arrays)


def _other_kind(unknown: set[str], known: set[str]) -> str | None:
    """'tasks' or 'trajectories' when the unknown fields are those of the other kind of record."""
    if "reward" in known and unknown <= _TASK_ONLY | {"meta"}:
        return "tasks"
    if "reward" not in known and unknown <= _TRAJECTORY_ONLY | {"meta"}:
        return "trajectories"
    return None


def _read_json_array(path: Path, fields: tuple[Field, ...]) -> tuple[pa.Table, str]:
    """Parse and type-check a JSON file holding one array of records (numbered 'record 1', 'record 2', ...)."""
    raw = path.read_bytes()
    try:
        value = read_json(raw, unique_keys=True)
    except DuplicateKeyError as exc:
        raise IngestError(str(path), str(exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(str(path), f"not valid JSON ({exc}); a JSON-lines file is named .jsonl") from None
    if not isinstance(value, list):
        raise IngestError(str(path), f"expected a JSON array of records, got {json_kind(value)} (a file of one "
                                     "record per line is JSON lines: name it .jsonl)")
    table = table_from_records(enumerate(value, start=1), fields, str(path), unit="record")
    return table, hashlib.sha256(raw).hexdigest()


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
                    yield number, read_json(text, unique_keys=True)
                except DuplicateKeyError as exc:
                    raise IngestError(str(path), str(exc), location=f"line {number}") from None
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


def open_source(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, fields: tuple[Field, ...]) -> str:
    """Register the file as the relation ``ingest_source``; returns the file's sha256."""
    if not path.exists():
        raise IngestError(str(path), "no such file or directory")
    if fmt in ("jsonl", "json"):
        table, sha = (_read_jsonl if fmt == "jsonl" else _read_json_array)(path, fields)
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
