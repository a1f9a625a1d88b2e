"""Opening a store for drift analysis and reports: read-only, and never changing the file.

A store at the current schema is opened read-only (the views are temporary objects of the connection), so a
copied file or a store another process is writing can be analysed as it is. A store made by an older
coevolve-engine has migrations pending, and a read-only connection cannot apply them; rather than asking the
user to migrate a file that may be a cluster run's archive, or another process's live store, it is copied
(while a read-only connection holds DuckDB's lock, so no writer changes it mid-copy) into a temporary
directory, the copy is migrated, and the analysis reads the copy. The original is never written; the copy is
removed on close. A store made by a newer coevolve-engine is refused with Store's message.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from coevolve_engine.core import sqlfiles
from coevolve_engine.core.errors import StoreError
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store, applied_migrations, connect, missing_store


@dataclass(frozen=True)
class OpenedStore:
    """A store opened for reading; ``note`` says how when it was not simply opened read-only."""

    store: Store
    path: Path
    migrated_copy: bool
    note: str | None


def pending_migrations(path: Path, *, wait: float = DEFAULT_WAIT_SECONDS) -> list[str]:
    """Migrations this code knows that the store at ``path`` has not applied (read-only check)."""
    con = connect(path, read_only=True, wait=wait)
    try:
        applied = set(applied_migrations(con))
    finally:
        con.close()
    return [m.name for m in sqlfiles.migrations() if m.name not in applied]


def _copy_locked(path: Path, target: Path, wait: float) -> None:
    """Copy the store file (and its write-ahead log, if any) while a read-only connection holds its lock."""
    con = connect(path, read_only=True, wait=wait)
    try:
        shutil.copyfile(path, target)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, target.with_name(target.name + ".wal"))
    finally:
        con.close()


@contextmanager
def open_for_reading(path: str | Path, *, wait: float = DEFAULT_WAIT_SECONDS) -> Iterator[OpenedStore]:
    """The store at ``path`` for reading, without ever writing to it (see the module's docstring)."""
    path = Path(path)
    if not path.exists():
        raise StoreError(missing_store(path))
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a store file")
    pending = pending_migrations(path, wait=wait)
    if not pending:
        with Store(path, read_only=True, wait=wait) as store:
            yield OpenedStore(store, path, False, None)
        return
    with tempfile.TemporaryDirectory(prefix="coevolve-drift-") as folder:
        copy = Path(folder) / path.name
        _copy_locked(path, copy, wait)
        with Store(copy) as store:
            note = (f"{path} was made by an older coevolve-engine (migrations {', '.join(pending)} pending); "
                    "it was left unchanged and a migrated temporary copy was analysed")
            yield OpenedStore(store, path, True, note)
