"""The fault matrix, continued for `query`'s allow-list: read-only runs only statements that read, --write adds
only those that change the store, and in neither mode can a statement write a file (a --read folder included),
whatever spelling DuckDB's parser accepts. And the held-out guard reads the store, not a temporary table.

Each case runs the real command line on a real store and checks the store's tables, the files it could have
written, and the message.
"""

from __future__ import annotations

import pytest

import shutil

from test_store_safety import CALC_TASKS, invoke, table_hashes

MODES = pytest.mark.parametrize("mode", [[], ["--write"]], ids=["read-only", "write"])

# every spelling refused in both modes: (SQL, words of the reason); {rd} is a folder given with --read
REFUSED_EVERYWHERE = [
    ("PREPARE p AS COPY (SELECT task_id FROM tasks) TO '{rd}/prep.csv'; EXECUTE p", "no prepared statement"),
    ("prepare p as select 1", "no prepared statement"),
    ("/* hidden */ PrEpArE p AS\n  SELECT 1", "no prepared statement"),
    ("execute p", "no prepared statement"),
    ("EXPLAIN COPY (SELECT 1) TO '{rd}/expl.csv'", "explains a statement that is refused"),
    ("explain (format json) copy (select 1) to '{rd}/expl.csv'", "explains a statement that is refused"),
    ("PRAGMA import_database('{rd}')", "runs no SQL from files"),
    ("pragma /* c */ IMPORT_DATABASE('{rd}')", "runs no SQL from files"),
    ("call import_database('{rd}')", "runs no SQL from files"),
    ("select * from import_database('{rd}')", "runs no SQL from files"),
    ("import database '{rd}'", "runs no SQL from files"),
    ("UPDATE EXTENSIONS", "no extension"),
    ("select 1; update /* all */ extensions (httpfs)", "no extension"),
    ("install httpfs", "no extension"),
    ("select * from checkpoint()", "one unit"),
    ('SELECT * FROM "CHECKPOINT" ( )', "one unit"),
    ("from main.checkpoint/* c */()", "one unit"),
    ("with c as (select * from force_checkpoint()) select * from c", "one unit"),
    ("select (select count(*) from checkpoint())", "one unit"),
    ("checkpoint", "one unit"),
    ("force checkpoint", "one unit"),
    ("call checkpoint()", "one unit"),
    ("select * from query('select 1')", "query() is not a function that only reads"),
    ("select * from json_execute_serialized_sql(json_serialize_sql('select 1'))",
     "json_execute_serialized_sql() is not a function that only reads"),
    ("SET search_path = 'main'", "settings cannot be changed"),
    ("set schema = 'main'", "settings cannot be changed"),
    ("use memory", "settings cannot be changed"),
    ("reset search_path", "settings cannot be changed"),
    ("set variable x = 1", "settings cannot be changed"),
    ("pragma threads = 1", "settings cannot be changed"),
    ("pragma enable_profiling", "is not one that only reads"),
    ("copy (select 1) to '{rd}/c.csv'", "writes no file"),
    ("export database '{rd}/dump'", "writes no file"),
    ("attach '{rd}/other.duckdb' as o", "one store"),
    ("copy from database memory to memory", "one store"),
]


def _refused(result, reason: str) -> None:
    assert result.exit_code == 1, result.output
    assert "is refused" in result.output and reason in result.output and "Nothing was run" in result.output, \
        result.output


@pytest.fixture(scope="module")
def calc_store_once(tmp_path_factory):
    """calc_store's store, built once for this module (every case below gets its own copy)."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.core.store import Store
    from coevolve_engine.rollouts.jobs import run_rollout_job

    path = tmp_path_factory.mktemp("allowlist") / "store.duckdb"
    calc = load_environment("calc")
    with Store(path) as store:
        store.add_records("tasks", list(calc.load_tasks(split="seed", n=CALC_TASKS)), label="calc tasks")
    run_rollout_job(path, calc, "calc", ReferenceAgent(), group_size=1, step=0, concurrency=1)
    return path


@pytest.fixture
def calc_store(calc_store_once, tmp_path):
    copy = tmp_path / "store.duckdb"
    shutil.copyfile(calc_store_once, copy)
    return copy


@pytest.fixture
def read_folder(tmp_path):
    """A folder given with --read, holding a user's input file and a schema.sql that would write if run."""
    folder = tmp_path / "rd"
    folder.mkdir()
    (folder / "input.csv").write_text("n\n1\n")
    (folder / "schema.sql").write_text(f"COPY (SELECT 1) TO '{folder}/planted.csv';\n"
                                       f"ATTACH '{folder}/second.duckdb' AS second;\n")
    (folder / "load.sql").write_text("")
    return folder


@MODES
@pytest.mark.parametrize("sql, reason", REFUSED_EVERYWHERE, ids=[sql[:40] for sql, _ in REFUSED_EVERYWHERE])
def test_a_statement_that_could_write_a_file_or_change_a_setting_is_refused_in_every_spelling(
        calc_store, read_folder, mode, sql, reason):
    before = table_hashes(calc_store)
    listing = sorted(p.name for p in read_folder.iterdir())
    result = invoke("query", *mode, "select 1 as first; " + sql.format(rd=read_folder), "--read", read_folder,
                    "--db", calc_store)
    _refused(result, reason)
    assert "first" not in result.output  # refused before the first statement ran
    assert sorted(p.name for p in read_folder.iterdir()) == listing and table_hashes(calc_store) == before
    assert (read_folder / "input.csv").read_text() == "n\n1\n"


READ_ONLY_REFUSED = [
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{rd}/expl.csv'", "EXPLAIN ANALYZE runs the statement it explains"),
    ("explain analyze select 1", "EXPLAIN ANALYZE runs the statement it explains"),
    ("EXPLAIN (ANALYZE) select 1", "EXPLAIN ANALYZE runs the statement it explains"),
    ("explain (format json, analyze) select 1", "EXPLAIN ANALYZE runs the statement it explains"),
    ("delete from trajectories", "without --write"),
    ("with a as (select 1) insert into tasks (task_id) select 'x' from a", "without --write"),
    ("create temp table t as select 1", "without --write"),
    ("create macro m() as 1", "without --write"),
    ("vacuum", "without --write"),
]


@pytest.mark.parametrize("sql, reason", READ_ONLY_REFUSED, ids=[sql[:40] for sql, _ in READ_ONLY_REFUSED])
def test_read_only_runs_only_statements_that_read(calc_store, read_folder, sql, reason):
    before = table_hashes(calc_store)
    _refused(invoke("query", sql.format(rd=read_folder), "--read", read_folder, "--db", calc_store), reason)
    assert sorted(p.name for p in read_folder.iterdir()) == ["input.csv", "load.sql", "schema.sql"]
    assert table_hashes(calc_store) == before


def test_explain_analyze_of_a_copy_with_write_is_refused_and_of_a_change_to_the_store_runs(calc_store, read_folder):
    _refused(invoke("query", "--write", f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{read_folder}/x.csv'", "--read",
                    read_folder, "--db", calc_store), "explains a statement that is refused")
    assert not (read_folder / "x.csv").exists()
    result = invoke("query", "--write", "explain analyze update tasks set prompt = 'changed'", "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert invoke("query", "select count(*) as n from tasks where prompt = 'changed'", "--format", "csv",
                  "--db", calc_store).output == "n\n6\n"


ALLOWED = [
    ("SeLeCt 1 AS a", "a"),
    ("/* a comment */ -- and another\n select 1 as a", "a"),
    ("with c as (select 1 as a) select * from c", "a"),
    ("from (select 1 as a)", "a"),
    ("values (1)", "col0"),
    ("(select 1 as a) union all (select 2)", "a"),
    ("describe tasks", "column_name"),
    ("show tables", "name"),
    ("summarize select 1 as a", "column_name"),
    ("explain select 1", "explain_key"),
    ("explain (format json) select 1", "explain_key"),
    ("PRAGMA table_info('tasks')", "cid"),
    ("pragma version", "library_version"),
    ("call pragma_version()", "library_version"),
    ("select table_name from duckdb_tables() limit 1", "table_name"),
    ("select * from range(2) as r(a)", "a"),
    ("pivot (select split from tasks) on split using count(*)", "train"),
    ("select count(*) as n from forgetting_with(w := 5)", "n"),
    ("select count(*) as n from read_csv('{rd}/input.csv')", "n"),
    ("select 1 as checkpoint", "checkpoint"),
]


@MODES
@pytest.mark.parametrize("sql, column", ALLOWED, ids=[sql[:40] for sql, _ in ALLOWED])
def test_every_statement_that_only_reads_runs(calc_store, read_folder, mode, sql, column):
    before = table_hashes(calc_store)
    result = invoke("query", *mode, sql.format(rd=read_folder), "--read", read_folder, "--format", "csv",
                    "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split(",")[0] == column, result.output
    assert table_hashes(calc_store) == before


def test_the_held_out_guard_reads_the_store_not_a_temporary_table(calc_store):
    from coevolve_engine.core.store import Store

    with Store(calc_store, read_only=True) as store:
        task = store.scalar("SELECT min(task_id) FROM trajectories")
    before = table_hashes(calc_store)
    for shadow in ("create temp table trajectories as select * from main.trajectories where false",
                   "create temp table tasks as select * from main.tasks where false",
                   "create temp view trajectories as select * from main.trajectories where false"):
        result = invoke("query", "--write", f"{shadow}; update store.main.tasks set split = 'eval' where task_id = "
                        f"'{task}'", "--db", calc_store)
        assert result.exit_code == 1, (shadow, result.output)
        assert "would be a held-out eval task (split 'eval') with 1 trajectories" in result.output, result.output
        assert table_hashes(calc_store) == before
