"""One unit of work: a file (or in-memory records) read, staged, checked and written as one transaction, or
nothing. The steps run in the order of the package's modules (its docstring); this module runs them."""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import duckdb

from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.ingest.checks import check_against_store, resolve_trajectories
from coevolve_engine.core.ingest.mirror import catch_up, read_mirror
from coevolve_engine.core.ingest.sources import SOURCE, detect_format, drop_source, open_source, table_from_records
from coevolve_engine.core.ingest.staging import STAGED, check_unique, check_values, stage
from coevolve_engine.core.ingest.writes import Opener, OpenStore, prepare, write
from coevolve_engine.core.records import FIELDS


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
        stage(work, path, fields)
        drop_source(work)
        records = work.execute(f"SELECT count(*) FROM {STAGED}").fetchall()[0][0]
        check_values(work, path, fmt, fields)
        check_unique(work, path, fmt, "trajectory_id" if kind == "trajectories" else "task_id")
        if kind == "trajectories":
            resolve_trajectories(work)
            work.execute(f"DROP TABLE {STAGED}")  # ingest_resolved holds all of it: one copy in memory, not two
        with open_store(True) as store:
            keys, watermark = read_mirror(store.con, work, kind)
        check_against_store(work, path, fmt, kind, create_tasks)
        prepared = prepare(work, kind)
        with open_store(False) as store, store.transaction() as con:
            if catch_up(con, work, kind, keys, watermark):  # another writer ingested since the read
                check_against_store(work, path, fmt, kind, create_tasks)
                prepared = prepare(work, kind)
            ingest_id, added = write(con, prepared, kind=kind, label=label, fmt=fmt, sha=sha, records=records,
                                     create_tasks=create_tasks)
    except duckdb.Error as exc:
        raise IngestError(label, f"could not be ingested: {exc}") from exc
    finally:
        work.close()
    return IngestReport(label, kind, fmt, records, added, ingest_id)
