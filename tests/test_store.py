"""The store: migrations run once and are recorded, views rebuild from files, read-only opens write nothing."""

from __future__ import annotations

import hashlib

import duckdb
import pytest

from coevolve_engine.core import sqlfiles
from coevolve_engine.core.errors import StoreError, StoreLockedError
from coevolve_engine.core.store import Store, default_db_path


def file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_migrations_run_once_and_are_recorded(db_path):
    with Store(db_path) as store:
        first = store.execute("SELECT name, applied_at FROM schema_migrations").fetchall()
        assert [name for name, _ in first] == [m.name for m in sqlfiles.migrations()]
    with Store(db_path) as store:
        assert store.execute("SELECT name, applied_at FROM schema_migrations").fetchall() == first
        assert store.migration_status() == [(m.name, True) for m in sqlfiles.migrations()]


def test_every_view_file_is_built(store):
    names = {row[0] for row in store.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    macros = {row[0] for row in store.execute("SELECT function_name FROM duckdb_functions() WHERE function_type IN ('table_macro', 'macro')").fetchall()}
    for view in sqlfiles.views():
        assert view.name in names | macros, view.name


def test_view_files_say_what_a_row_is_and_declare_dependencies():
    for view in sqlfiles.views():
        first = view.sql.splitlines()[0]
        assert first.startswith(f"-- {view.name}"), view.name
        assert "-- requires:" in view.sql, view.name
        for dependency in view.requires:
            assert dependency in view.sql.split("requires:", 1)[1], view.name


def test_views_are_rebuilt_from_files_on_open(db_path):
    with Store(db_path) as store:
        store.execute("CREATE OR REPLACE VIEW boundary AS SELECT 'stale' AS x")
    with Store(db_path) as store:
        assert store.sql("SELECT * FROM boundary").columns[0] == "task_id"


def test_an_up_to_date_store_opens_without_rebuilding_its_views(db_path):
    with Store(db_path) as store:
        assert store.views_built
        stamps = store.execute("SELECT DISTINCT comment FROM duckdb_views() WHERE NOT internal").fetchall()
        assert stamps == [(sqlfiles.views_stamp(),)]
    with Store(db_path) as store:
        assert not store.views_built
        assert store.sql("SELECT * FROM boundary").columns[0] == "task_id"
    with Store(db_path, read_only=True) as store:  # the stored views are this code's: no temporary copies
        assert not store.views_built
        assert store.scalar("SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal") == 0
        assert store.sql("SELECT * FROM run_rounds").columns[0] == "round"


def test_a_rebuild_by_another_version_is_rebuilt_again(db_path):
    """Two versions opening one store alternately each see their own definitions: an older version rebuilds
    its views without this code's stamp, a newer one with another stamp; either way the next open rebuilds."""
    with Store(db_path) as store:
        store.execute("CREATE OR REPLACE VIEW boundary AS SELECT 'older' AS x")  # an older version: no comment
    with Store(db_path, read_only=True) as store:
        assert store.views_built and store.sql("SELECT * FROM boundary").columns[0] == "task_id"
    with Store(db_path) as store:
        assert store.views_built and store.sql("SELECT * FROM boundary").columns[0] == "task_id"
        store.execute("CREATE OR REPLACE VIEW boundary AS SELECT 'newer' AS x")
        store.execute("COMMENT ON VIEW boundary IS 'coevolve-engine views sha256:0000'")  # a newer version
    with Store(db_path) as store:
        assert store.views_built and store.sql("SELECT * FROM boundary").columns[0] == "task_id"


def test_a_migration_rebuilds_the_views(db_path):
    """Views are rebuilt after every migration, even when they carry this code's stamp (forged here by undoing
    the last migration under stamped views)."""
    import duckdb as raw

    assert sqlfiles.migrations()[-1].name == "010_lock_holds"
    Store(db_path).close()
    con = raw.connect(str(db_path))
    con.execute("DELETE FROM schema_migrations WHERE name = '010_lock_holds'")
    con.execute("DROP TABLE lock_holds")
    con.execute("DROP SEQUENCE hold_id_seq")
    con.close()
    with Store(db_path) as store:
        assert store.views_built
        assert store.migration_status()[-1] == ("010_lock_holds", True)


def test_read_only_open_changes_nothing_and_sees_current_views(db_path):
    with Store(db_path) as store:
        store.execute("CREATE OR REPLACE VIEW boundary AS SELECT 'stale' AS x")
        store.execute("CHECKPOINT")
    before = file_digest(db_path)
    with Store(db_path, read_only=True) as store:
        assert store.sql("SELECT * FROM boundary").columns[0] == "task_id"
        with pytest.raises(duckdb.Error):
            store.execute("INSERT INTO rounds (round) VALUES (1)")
    assert file_digest(db_path) == before


def test_read_only_open_of_an_unmigrated_or_missing_store(tmp_path):
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "missing.duckdb", read_only=True)
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "missing.duckdb", create=False)
    raw = tmp_path / "raw.duckdb"
    duckdb.connect(str(raw)).close()
    with pytest.raises(StoreError, match="needs migrations 001_core"):
        Store(raw, read_only=True)


def test_unknown_migration_is_refused(db_path):
    with Store(db_path) as store:
        store.execute("INSERT INTO schema_migrations (name) VALUES ('999_from_the_future')")
    with pytest.raises(StoreError, match="999_from_the_future"):
        Store(db_path)


def test_transaction_rolls_back(store):
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.execute("INSERT INTO rounds (round) VALUES (1)")
            raise RuntimeError("boom")
    assert store.scalar("SELECT count(*) FROM rounds") == 0


def test_lock_wait_gives_up_with_a_clear_error(db_path):
    import subprocess
    import sys
    import time

    Store(db_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db_path)!r}); print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(StoreLockedError, match="held by another process"):
            Store(db_path, read_only=True, wait=0.5)
        assert time.monotonic() - start >= 0.5
    finally:
        holder.kill()
        holder.wait()


def test_default_path(monkeypatch, tmp_path):
    monkeypatch.delenv("COEVOLVE_DB", raising=False)
    assert str(default_db_path()) == "coevolve.duckdb"
    monkeypatch.setenv("COEVOLVE_DB", str(tmp_path / "x.duckdb"))
    assert default_db_path() == tmp_path / "x.duckdb"


def test_sql_returns_polars(store):
    frame = store.sql("SELECT 1 AS one, $name AS name", {"name": "x"})
    assert frame.to_dicts() == [{"one": 1, "name": "x"}]
    assert store.sql("CREATE TEMP TABLE t (x INT)").is_empty()


def test_view_dependencies_are_complete():
    import re

    names = {view.name for view in sqlfiles.views()}
    for view in sqlfiles.views():
        body = "\n".join(line for line in view.sql.splitlines() if not line.startswith("--"))
        used = {name for name in names - {view.name}
                if re.search(rf"\b{name}\s*\(|\b(FROM|JOIN)\s+{name}\b", body)}
        assert used <= set(view.requires), f"{view.name} uses {sorted(used - set(view.requires))} undeclared"


def test_a_file_that_is_not_a_store(tmp_path):
    junk = tmp_path / "notes.duckdb"
    junk.write_text("these are notes, not a database\n")
    with pytest.raises(StoreError, match="cannot open store"):
        Store(junk)
    assert junk.read_text() == "these are notes, not a database\n"


def test_a_transaction_opened_inside_another_joins_it(store):
    with store.transaction():
        store.execute("INSERT INTO rounds (round) VALUES (1)")
        with store.transaction():
            store.execute("INSERT INTO rounds (round) VALUES (2)")
    assert store.scalar("SELECT count(*) FROM rounds") == 2
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.execute("INSERT INTO rounds (round) VALUES (3)")
            with store.transaction():
                store.execute("INSERT INTO rounds (round) VALUES (4)")
            raise RuntimeError("the outer transaction fails after the inner one finished")
    assert store.scalar("SELECT count(*) FROM rounds") == 2  # the inner work rolled back with the outer
    with store.transaction():  # and the store is usable again
        store.execute("INSERT INTO rounds (round) VALUES (5)")
    assert store.scalar("SELECT count(*) FROM rounds") == 3
