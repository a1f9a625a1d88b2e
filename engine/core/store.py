"""The store: one DuckDB file that every part of the engine reads and writes.

Opening a store for writing applies pending migrations (each in its own transaction, recorded in
``schema_migrations``) and rebuilds every view and macro from ``sql/views`` unless the store's views already
carry this code's stamp (``sqlfiles.views_stamp``, kept as each view's DuckDB comment): then the open costs
milliseconds. Another version of the engine rebuilding its own views replaces them, and with them the comments,
so the next open by this version rebuilds again; a store is never read through definitions other than the
files of the code that reads it. Opening it read-only changes nothing in the file: when the stored views are
not this code's, they are created as temporary objects of that connection instead.

DuckDB lets one process hold a file for writing, and no other process may open it meanwhile, not even to
read. Writers therefore hold the store only for one unit of work at a time, and both readers and writers
wait (``wait`` seconds, retrying) for the lock instead of failing at once.
"""

from __future__ import annotations

import difflib
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import duckdb
import polars as pl

from coevolve_engine.core import sqlfiles
from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.sqlident import quote_ident
from coevolve_engine.core.errors import StoreDamagedError, StoreError, StoreLockedError
from coevolve_engine.core.ingest import IngestReport, ingest_file, ingest_opened, ingest_records, remove_ingested
from coevolve_engine.core.store_repair import already_applied, rebuild_bookkeeping

DEFAULT_DB = "coevolve.duckdb"


def default_db_path() -> Path:
    """The store path when none is given: $COEVOLVE_DB, else ./coevolve.duckdb."""
    return Path(os.environ.get("COEVOLVE_DB") or DEFAULT_DB)


def _is_lock_conflict(exc: Exception) -> bool:
    return "lock" in str(exc).lower()


_DAMAGE_SIGNS = ("could not read enough bytes", "checksum", "corrupt")


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error says the file itself is damaged (rather than a query being wrong)."""
    return isinstance(exc, duckdb.Error) and any(sign in str(exc).lower() for sign in _DAMAGE_SIGNS)


def check_intact(path: Path, *, wait: float = DEFAULT_WAIT_SECONDS) -> None:
    """Read every row of every table of the store at ``path`` (read-only) and refuse it as damaged when DuckDB
    cannot: a truncated copy, a disk that filled up mid-write, blocks that fail their checksum. It reads the
    whole file, so `init` runs it before migrating an existing store, not every open."""
    con = connect(path, read_only=True, wait=wait)
    try:
        tables = [name for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary"
        ).fetchall()]
        for table in tables:
            con.execute(f"SELECT count(*), sum(hash(COLUMNS(*))) FROM {quote_ident(table)}").fetchall()
    except duckdb.Error as exc:
        if is_damage(exc):
            raise StoreDamagedError(path, f"DuckDB could not read it ({exc})") from exc
        raise
    finally:
        con.close()


def missing_store(path: Path, create_hint: str = "") -> str:
    """Why there is no store at ``path``: the store files beside it with a close name first (a mistyped --db is
    not a new store to create), else how to create one."""
    try:
        beside = sorted(p.name for p in path.parent.iterdir() if p.suffix in (".duckdb", ".db") and p.is_file())
    except OSError:
        beside = []
    stems = {Path(name).stem: name for name in beside}  # by name, not by the suffix every store shares
    close = [stems[s] for s in difflib.get_close_matches(path.stem, list(stems), n=3, cutoff=0.7)]
    if close:
        names = " or ".join(str(path.parent / name) for name in close)
        return f"no store at {path}; did you mean {names}?"
    return f"no store at {path}; create one with `coevolve-engine init --db {path}`{create_hint}"


def connect(path: Path, *, read_only: bool, wait: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying with backoff while another process holds its lock; a damaged file is named so."""
    deadline = time.monotonic() + max(wait, 0.0)
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if is_damage(exc):
                raise StoreDamagedError(path, f"DuckDB could not read it ({exc})") from exc
            if not _is_lock_conflict(exc):
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"store {path} is held by another process (DuckDB allows one writing process and no "
                    f"readers meanwhile); gave up after {wait:g} s. Retry later or pass a longer --wait. "
                    f"DuckDB said: {exc}"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.1)  # a writer between two short units leaves short gaps: look often
            continue
        return con


def _create_file(path: Path) -> None:
    """Create an empty store at ``path`` as one atomic step: DuckDB writes a new file's headers before it locks
    it, so a second process opening the path meanwhile would read a half-written file. The database is made
    under a name of this process's own and linked into place; a process that loses the race opens the winner's."""
    if not path.parent.is_dir():
        raise StoreError(f"cannot create a store at {path}: the folder {path.parent} does not exist")
    draft = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        duckdb.connect(str(draft)).close()
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process created it first
        except OSError:  # a file system without hard links: not atomic, but never over an existing store
            if not path.exists():
                os.rename(draft, path)
    finally:
        draft.unlink(missing_ok=True)
        draft.with_name(draft.name + ".wal").unlink(missing_ok=True)


def _command() -> str:
    """This process as lock_holds names it: its program and first argument."""
    return " ".join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:2]])


def applied_migrations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the migrations recorded in a store's schema_migrations table (none for a new file)."""
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_migrations' AND schema_name = 'main'"
    ).fetchall()[0][0]
    if not exists:
        return []
    return [row[0] for row in con.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()]


class Store:
    """A coevolve-engine store. Use as a context manager, or call ``close``."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        read_only: bool = False,
        create: bool = True,
        wait: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.read_only = read_only
        if not self.path.exists() and (read_only or not create):
            raise StoreError(missing_store(self.path))
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a store file")
        if not self.path.exists():
            _create_file(self.path)
        requested = time.monotonic()
        self.con = connect(self.path, read_only=read_only, wait=wait)
        self._locked_at = time.monotonic()
        self._waited = self._locked_at - requested
        #: whether close records this open's hold in lock_holds (sql/migrations/010_lock_holds.sql)
        self._record_hold = not read_only and os.environ.get("COEVOLVE_LOCK_HOLDS", "") not in ("", "0")
        self._transaction_depth = 0
        #: whether this open (re)built the views: persistent ones (writable) or temporary ones (read-only)
        self.views_built = False
        try:
            if read_only:
                self._check_schema()
                if not self._views_current():
                    self._create_views(temporary=True)
            else:
                migrated = self._migrate()
                if migrated:  # a migration found applied but for its dropped bookkeeping: make that again first
                    with self.transaction():
                        rebuild_bookkeeping(self.con, self.path, self._applied_migrations())
                if migrated or not self._views_current():
                    self._create_views(temporary=False)
        except duckdb.Error as exc:
            self.con.close()
            if is_damage(exc):
                raise StoreDamagedError(self.path, f"DuckDB could not read it ({exc})") from exc
            raise
        except BaseException:
            self.con.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._record_hold:
            self._record_hold = False
            try:
                self.con.execute(
                    "INSERT INTO lock_holds (command, pid, waited, seconds) VALUES ($command, $pid, $waited, $seconds)",
                    {"command": _command(), "pid": os.getpid(), "waited": self._waited,
                     "seconds": time.monotonic() - self._locked_at})
            except duckdb.Error:
                pass  # a store this open could not migrate, or a failed transaction: nothing to record into
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------------------

    def _applied_migrations(self) -> list[str]:
        return applied_migrations(self.con)

    def migration_status(self) -> list[tuple[str, bool]]:
        """(name, applied) for every migration this code knows."""
        applied = set(self._applied_migrations())
        return [(m.name, m.name in applied) for m in sqlfiles.migrations()]

    def _check_known(self, applied: list[str]) -> None:
        known = {m.name for m in sqlfiles.migrations()}
        unknown = [name for name in applied if name not in known]
        if unknown:
            raise StoreError(
                f"store {self.path} has migrations this version of coevolve-engine does not know "
                f"({', '.join(unknown)}); upgrade coevolve-engine"
            )

    def _check_schema(self) -> None:
        applied = self._applied_migrations()
        self._check_known(applied)
        pending = [m.name for m in sqlfiles.migrations() if m.name not in applied]
        if pending:
            raise StoreError(
                f"store {self.path} needs migrations {', '.join(pending)}; open it once for writing "
                f"(`coevolve-engine init --db {self.path}`) to apply them"
            )

    def _migrate(self) -> int:
        """Apply pending migrations; how many it applied."""
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
        )
        applied = self._applied_migrations()
        self._check_known(applied)
        count = 0
        pending = [m for m in sqlfiles.migrations() if m.name not in applied]
        # a store with tables but not every record may have lost records (a new store has nothing to look at)
        lost_records = bool(pending) and self.con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
            " AND table_name <> 'schema_migrations'").fetchall()[0][0] > 0
        for migration in pending:
            with self.transaction():
                if not (lost_records and already_applied(self.con, self.path, migration)):  # else: only its record
                    self.con.execute(migration.sql)
                self.con.execute("INSERT INTO schema_migrations (name) VALUES ($name)", {"name": migration.name})
            count += 1
        return count

    def repair(self) -> list[str]:
        """Rebuild what of this store's schema went missing (``store_repair``): its bookkeeping tables, every view
        and macro; what was rebuilt, in words. A lost table of data is refused, naming it, with nothing changed."""
        with self.transaction():
            rebuilt = rebuild_bookkeeping(self.con, self.path, self._applied_migrations())
        self._create_views(temporary=False)
        return rebuilt

    def _views_current(self) -> bool:
        """Whether every view of this code's files is stored with this code's stamp as its comment.

        Only views are checked (listing macros costs DuckDB 10-20 ms, listing views well under one): every
        version of the engine rebuilds views and macros together, and ``CREATE OR REPLACE`` drops a comment,
        so a rebuild by any other version, or a view replaced by hand, shows on the views."""
        names = [view.name for view in sqlfiles.views() if view.kind == "view"]
        stamped = self.con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main'"
            " AND NOT temporary AND comment = $stamp AND list_contains($names, view_name)",
            {"stamp": sqlfiles.views_stamp(), "names": names},
        ).fetchall()[0][0]
        return stamped == len(names)

    def _create_views(self, *, temporary: bool) -> None:
        """Build every view and macro from its file; persistent ones in one transaction, stamped last."""
        def build() -> None:
            for view in sqlfiles.views():
                sql = sqlfiles.as_temporary(view.sql) if temporary else view.sql
                try:
                    self.con.execute(sql)
                except duckdb.Error as exc:
                    raise StoreError(f"view {view.name}.sql failed to build: {exc}") from exc

        self.views_built = True
        if temporary:
            build()
            return
        stamp = "'" + sqlfiles.views_stamp().replace("'", "''") + "'"  # COMMENT takes no bound parameters
        with self.transaction():
            build()
            for view in sqlfiles.views():
                if view.kind == "view":
                    self.con.execute(f"COMMENT ON VIEW {quote_ident(view.name)} IS {stamp}")

    # -- SQL ---------------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A transaction that commits on success and rolls back on any exception.

        DuckDB has no nested transactions, so a ``transaction()`` opened inside another joins it: its work
        commits or rolls back with the outermost one (e.g. a candidate's verdict and the task it becomes).
        """
        if self._transaction_depth:
            self._transaction_depth += 1
            try:
                yield self.con
            finally:
                self._transaction_depth -= 1
            return
        self.con.execute("BEGIN TRANSACTION")
        self._transaction_depth = 1
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")
        finally:
            self._transaction_depth = 0

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
        """Run one statement with named parameters bound as ``$name``; returns the cursor."""
        return self.con.execute(sql, dict(params) if params else None)

    def sql(self, sql: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run a query and return its result as a polars DataFrame (empty when it returns no rows)."""
        relation = self.con.sql(sql, params=dict(params) if params else None)
        if relation is None:
            return pl.DataFrame()
        return relation.pl()

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row, or None."""
        relation = self.con.sql(sql, params=dict(params) if params else None)
        rows = relation.limit(1).fetchall() if relation is not None else []
        return rows[0][0] if rows else None

    # -- ingest ------------------------------------------------------------------------------------

    def ingest_trajectories(self, path: str | os.PathLike[str], *, format: str | None = None,
                            create_tasks: bool = False) -> IngestReport:
        """Ingest one file of trajectory records as one unit; see ``coevolve_engine.core.ingest``."""
        return ingest_file(self, Path(path), kind="trajectories", format=format, create_tasks=create_tasks)

    def add_records(self, kind: str, records, *, label: str = "records", create_tasks: bool = False) -> IngestReport:
        """Ingest in-memory records ('trajectories' or 'tasks') as one unit, with the same checks as files."""
        return ingest_records(self, records, kind=kind, label=label, create_tasks=create_tasks)

    def ingest_tasks(self, path: str | os.PathLike[str], *, format: str | None = None) -> IngestReport:
        """Ingest one file of task records as one unit; see ``coevolve_engine.core.ingest``."""
        return ingest_file(self, Path(path), kind="tasks", format=format)

    def remove_ingested(self, label: str, *, kind: str = "trajectories") -> int:
        """Undo the in-memory ingests of ``kind`` whose label starts with ``label``, in the open transaction if
        any; see ``coevolve_engine.core.ingest.remove_ingested``. Returns the rows removed."""
        return remove_ingested(self, label, kind=kind)


def ingest_path(db: str | os.PathLike[str], path: str | os.PathLike[str], *, kind: str, format: str | None = None,
                create_tasks: bool = False, wait: float = DEFAULT_WAIT_SECONDS) -> IngestReport:
    """``Store.ingest_trajectories`` (or ``ingest_tasks``) on the store at ``db`` (which must exist, migrated),
    holding its lock only to insert: the file is read and checked first, the stored rows the checks need are read
    in a short read-only open, and the write open rechecks whatever another writer added meanwhile."""
    def opened(read_only: bool) -> Store:  # a Store is its own context manager: opened here, closed by the with
        return Store(db, read_only=read_only, create=False, wait=wait)

    return ingest_opened(opened, Path(path), kind=kind, format=format, create_tasks=create_tasks)
