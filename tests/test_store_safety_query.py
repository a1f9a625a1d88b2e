"""The fault matrix, continued for `query`: read-only for every file without --write, the store and nothing else
with --write, one transaction a statement cannot end, outputs that never replace a file of another kind, the
held-out guard, and results of every type in every format.

Each case runs the real command line on a real store and checks the store's tables (a hash of every row), every
other file it could have touched, and the message.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coevolve_engine.core.store import Store
from test_store_safety import calc_store, invoke, table_hashes  # noqa: F401 (calc_store is a fixture)

MODES = pytest.mark.parametrize("mode", [[], ["--write"]], ids=["read-only", "write"])


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def other_store(tmp_path):
    """Another store beside the one queried, with a row to lose."""
    other = tmp_path / "other.duckdb"
    with Store(other) as store:
        store.add_records("tasks", [{"task_id": "keep-me"}], label="tasks")
        store.add_records("trajectories", [{"task_id": "keep-me", "step": 0, "reward": 1}], label="rollouts")
    return other


def refused(result, statement: str) -> None:
    assert result.exit_code == 1, result.output
    assert f"statement {statement} is refused" in result.output and "Nothing was run" in result.output, result.output


# -- 1. without --write nothing but the store is read, and nothing at all is written --------------------------------

@MODES
def test_query_attaches_no_other_store(calc_store, other_store, mode):
    before, other_before = table_hashes(calc_store), table_hashes(other_store)
    result = invoke("query", *mode, f"attach '{other_store}' as o (READ_ONLY false); delete from o.trajectories; "
                    "select count(*) from o.trajectories", "--db", calc_store)
    refused(result, f"1 (attach '{other_store}' as o (READ_ONLY false))")
    assert "query opens one store, the one at --db" in result.output
    assert table_hashes(other_store) == other_before and table_hashes(calc_store) == before


@MODES
def test_query_copies_to_no_file(calc_store, other_store, tmp_path, mode):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    before, other_before, notes_before = table_hashes(calc_store), file_hash(other_store), file_hash(notes)
    for target in (other_store, notes, tmp_path / "new.csv"):
        result = invoke("query", *mode, f"copy (select 'x') to '{target}' (format csv)", "--db", calc_store)
        refused(result, f"1 (copy (select 'x') to '{target}' (format csv))")
        assert "query writes no file: a result goes to a file with -o FILE" in result.output
    assert file_hash(other_store) == other_before and file_hash(notes) == notes_before
    assert not (tmp_path / "new.csv").exists() and table_hashes(calc_store) == before


@MODES
def test_query_exports_and_imports_no_database(calc_store, tmp_path, mode):
    before = table_hashes(calc_store)
    folder = tmp_path / "dump"
    result = invoke("query", *mode, f"export database '{folder}'", "--db", calc_store)
    refused(result, f"1 (export database '{folder}')")
    assert not folder.exists()
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE planted (i INTEGER);\n")
    (folder / "load.sql").write_text("")
    result = invoke("query", *mode, f"import database '{folder}'", "--read", folder, "--db", calc_store)
    refused(result, f"1 (import database '{folder}')")
    assert table_hashes(calc_store) == before


@MODES
@pytest.mark.parametrize("sql, shown", [
    ("select * from read_csv('/etc/passwd')", "/etc/passwd"),
    ("select * from glob('/etc/*')", "/etc/*"),
    ("select * from read_text('{notes}')", "{notes}"),
])
def test_query_reads_no_file_it_was_not_given(calc_store, tmp_path, mode, sql, shown):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    before = table_hashes(calc_store)
    result = invoke("query", *mode, sql.format(notes=notes), "--db", calc_store)
    assert result.exit_code == 1
    assert f'Permission Error: Cannot access file "{shown.format(notes=notes)}"' in result.output, result.output
    assert "root:x:" not in result.output and "my notes" not in result.output
    assert table_hashes(calc_store) == before


def test_query_reads_the_files_and_folders_named_with_read_and_writes_none(calc_store, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    single = tmp_path / "b.csv"
    single.write_text("n\n5\n")
    beside = tmp_path / "c.csv"
    beside.write_text("n\n7\n")
    result = invoke("query", f"select sum(n) as total from read_json('{folder}/*.jsonl')", "--read", folder,
                    "--format", "csv", "--db", calc_store)
    assert result.exit_code == 0 and result.output == "total\n3\n", result.output
    result = invoke("query", f"select n from read_csv('{single}')", "--read", single, "--format", "csv",
                    "--db", calc_store)
    assert result.exit_code == 0 and result.output == "n\n5\n", result.output
    result = invoke("query", f"select n from read_csv('{beside}')", "--read", single, "--db", calc_store)
    assert result.exit_code == 1 and f'Cannot access file "{beside}"' in result.output
    # a folder that may be read is not one that may be written
    result = invoke("query", f"copy (select 1) to '{folder}/out.csv'", "--read", folder, "--db", calc_store)
    refused(result, f"1 (copy (select 1) to '{folder}/out.csv')")
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl"]
    missing = invoke("query", "select 1", "--read", tmp_path / "nope", "--db", calc_store)
    assert missing.exit_code == 2 and "does not exist" in missing.output


@MODES
def test_query_cannot_loosen_its_own_settings(calc_store, mode):
    before = table_hashes(calc_store)
    for sql in ("set enable_external_access = true", "reset lock_configuration",
                "set allowed_directories = ['/']", "set profiling_output = 'p.txt'"):
        result = invoke("query", *mode, f"{sql}; select * from read_csv('/etc/passwd')", "--db", calc_store)
        assert result.exit_code == 1 and "settings cannot be changed" in result.output, (sql, result.output)
        assert "root:x:" not in result.output
    assert table_hashes(calc_store) == before


def test_the_locked_configuration_holds_behind_the_allow_list():
    import duckdb

    from coevolve_engine.query.run import lock_down

    con = duckdb.connect()
    lock_down(con)
    for sql in ("set enable_external_access = true", "reset lock_configuration", "set allowed_directories = ['/']"):
        with pytest.raises(duckdb.Error, match="the configuration has been locked"):
            con.execute(sql)


@pytest.mark.parametrize("sql, statement", [
    ("install httpfs", "2 (install httpfs)"),
    ("load parquet", "2 (load parquet)"),
    ("detach memory", "2 (detach memory)"),
    ("select 1; /* now */ checkpoint", "3 (/* now */ checkpoint)"),
    ("call force_checkpoint()", "2 (call force_checkpoint())"),
])
def test_other_statements_query_refuses_before_running_any(calc_store, sql, statement):
    before = table_hashes(calc_store)
    refused(invoke("query", "--write", f"delete from trajectories; {sql}", "--db", calc_store), statement)
    assert table_hashes(calc_store) == before


# -- 2. --write is one transaction that no statement can end --------------------------------------------------------

@pytest.mark.parametrize("control", ["commit", "rollback", "abort", "end", "begin", "begin transaction",
                                     "commit transaction"])
def test_a_transaction_statement_inside_write_is_refused_and_nothing_is_kept(calc_store, control):
    before = table_hashes(calc_store)
    result = invoke("query", "--write", f"delete from trajectories where step=0; {control}; "
                    "select * from no_such_table", "--db", calc_store)
    refused(result, f"2 ({control})")
    assert "(with --write, one transaction: kept whole or not at all)" in result.output
    assert "no transaction is active" not in result.output
    assert table_hashes(calc_store) == before


def test_the_first_error_of_a_write_is_the_one_shown(calc_store):
    before = table_hashes(calc_store)
    result = invoke("query", "--write", "delete from trajectories where step=0; select * from no_such_table; "
                    "select * from another_missing_table", "--db", calc_store)
    assert result.exit_code == 1 and "no_such_table does not exist" in result.output, result.output
    assert "another_missing_table" not in result.output and "rollback" not in result.output.lower()
    assert table_hashes(calc_store) == before


def test_a_write_returning_a_list_is_printed_as_csv_and_kept(calc_store):
    result = invoke("query", "--write", "update tasks set prompt = 'changed' returning [1] as r", "--format", "csv",
                    "--db", calc_store)
    assert result.exit_code == 0 and result.output.splitlines() == ["r"] + ["[1]"] * 6, result.output
    with Store(calc_store, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM tasks WHERE prompt = 'changed'") == 6


LIMITED = """
import resource, sys
from coevolve_engine.cli import cli
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))  # the output cannot be written: a full disk
cli(sys.argv[1:], prog_name="coevolve-engine")
"""


def test_a_write_whose_result_cannot_be_written_keeps_nothing(calc_store, tmp_path):
    before, raw = table_hashes(calc_store), file_hash(calc_store)
    out = tmp_path / "big.csv"
    result = subprocess.run(
        [sys.executable, "-c", LIMITED, "query", "--write", "update tasks set prompt = 'changed' returning "
         "repeat('y', 100000) as big", "--format", "csv", "-o", str(out), "--db", str(calc_store)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and f"cannot write {out}: File too large" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not out.exists()
    assert file_hash(calc_store) == raw and table_hashes(calc_store) == before


# -- 3. -o never replaces a file of another kind without --force ---------------------------------------------------

@pytest.mark.parametrize("name, content, words", [
    ("mydata.jsonl", '{"task_id": "a", "step": 1, "reward": 1}\n{"task_id": "a", "step": 2, "reward": 0}\n',
     "a JSON-lines file"),
    ("myrun.toml", 'env = "calc"\nrounds = 3\n', "a TOML file"),
    ("mydata.txt", '{"a": 1}\n{"a": 2}\n', "a JSON-lines file"),
    ("config.txt", 'env = "calc"\n[trainer]\nmodel = "m"\n', "a TOML file"),
    ("result.json", '[{"a": 1}]', "a JSON file"),
    ("page.txt", "<!doctype html><p>mine</p>", "an HTML page"),
    ("script.py", "print('mine')\n", "a .py file"),
    ("data.parquet", "PAR1 not really", "a Parquet file"),
])
@pytest.mark.parametrize("format_", ["csv", "table"])
def test_an_output_never_replaces_a_file_of_another_kind_without_force(calc_store, tmp_path, name, content, words,
                                                                          format_):
    target = tmp_path / name
    target.write_text(content)
    for mode in ([], ["--write"]):
        result = invoke("query", *mode, "select 1 as a", "--format", format_, "-o", target, "--db", calc_store)
        assert result.exit_code == 1, result.output
        assert f"{target} exists and is not a" in result.output and f"it looks like {words}" in result.output
        assert target.read_text() == content
    assert invoke("query", "select 1 as a", "--format", format_, "-o", target, "--force",
                  "--db", calc_store).exit_code == 0
    assert target.read_text() != content


def test_an_output_replaces_a_file_of_its_own_kind(calc_store, tmp_path):
    for name, format_, content in (("out.csv", "csv", "a,b\n1,2\n"), ("out.txt", "csv", "a,b\n1,2\n"),
                                   ("out.json", "json", '[{"a": 2}]\n'), ("notes.txt", "table", "| a |\n| 2 |\n"),
                                   ("empty.toml", "csv", "")):
        target = tmp_path / name
        target.write_text(content)
        result = invoke("query", "select 1 as a", "--format", format_, "-o", target, "--db", calc_store)
        assert result.exit_code == 0, (name, result.output)
        assert "1" in target.read_text()


# -- 4. the held-out guard holds for --write ------------------------------------------------------------------------

def test_write_cannot_hold_out_a_task_with_trajectories(calc_store):
    before = table_hashes(calc_store)
    with Store(calc_store, read_only=True) as store:
        task, count = store.execute("SELECT task_id, count(*) FROM trajectories GROUP BY 1 ORDER BY 1").fetchone()
    result = invoke("query", "--write", "update tasks set split='eval'", "--db", calc_store)
    assert result.exit_code == 1
    assert (f"task {task!r} would be a held-out eval task (split 'eval') with {count} trajectories"
            in result.output), result.output
    assert table_hashes(calc_store) == before


def test_write_cannot_give_trajectories_to_a_held_out_task(calc_store, jsonl):
    assert invoke("ingest", "tasks", jsonl([{"task_id": "held", "split": "eval"}]), "--db", calc_store).exit_code == 0
    before = table_hashes(calc_store)
    for sql in ("update trajectories set task_id = 'held' where trajectory_id = (select min(trajectory_id) from "
                "trajectories)",
                "insert into trajectories (trajectory_id, task_id, step, group_id, reward, success) "
                "select 'x1', 'held', 1, 'held@1', 1.0, true"):
        result = invoke("query", "--write", sql, "--db", calc_store)
        assert result.exit_code == 1, result.output
        assert "task 'held' would be a held-out eval task (split 'eval') with 1 trajectories" in result.output
        assert table_hashes(calc_store) == before
    # a task without trajectories may be held out, and one whose trajectories go with it
    assert invoke("query", "--write", "update tasks set split = 'eval' where task_id not in "
                  "(select task_id from trajectories)", "--db", calc_store).exit_code == 0
    result = invoke("query", "--write", "delete from trajectories where task_id = (select min(task_id) from tasks); "
                    "update tasks set split = 'eval' where task_id = (select min(task_id) from tasks)",
                    "--db", calc_store)
    assert result.exit_code == 0, result.output


# -- 5. every result type in every format, and damage named by its path ---------------------------------------------

def test_nested_values_are_written_to_csv_as_json(calc_store):
    result = invoke("query", "select [1,2] as l, {'a': [1, null]} as s, null::int[] as n, 'ab'::blob as b, "
                    "interval 1 day as i", "--format", "csv", "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["l,s,n,b,i", '"[1, 2]","{""a"": [1, null]}",,6162,1 day']
    sql = ("insert into embeddings (text_hash, model, dim, vector, created_at) values ('h', 'm', 2, [0.5, 0.25], "
           "timestamp '2026-01-01'); insert into pattern_members (pattern_id, trajectory_id, signals, distance, "
           "text_hash) values ('0-1', 't', ['boundary', 'rare'], 0.5, 'h')")
    assert invoke("query", "--write", sql, "--db", calc_store).exit_code == 0
    for table, row in (("embeddings", 'h,m,2,"[0.5, 0.25]",2026-01-01T00:00:00.000000'),
                       ("pattern_members", '0-1,t,"[""boundary"", ""rare""]",0.5,h')):
        result = invoke("query", f"select * from {table}", "--format", "csv", "--db", calc_store)
        assert result.exit_code == 0 and result.output.splitlines()[1] == row, result.output
        parsed = json.loads(invoke("query", f"select * from {table}", "--format", "json", "--db", calc_store).output)
        assert len(parsed) == 1


def test_a_checksum_error_names_the_store_by_its_path(calc_store, tmp_path):
    data = calc_store.read_bytes()
    header, block = 3 * 4096, 262144  # DuckDB's file: three header blocks, then blocks that start with a checksum
    result = None
    for start in range(header + (len(data) - header) // block * block - block, header - 1, -block):
        damaged = tmp_path / f"damaged-{start}.duckdb"
        damaged.write_bytes(data[:start + 8] + b"\xff" * 16 + data[start + 24:])
        try:
            Store(damaged, read_only=True).close()
        except Exception:
            continue  # damage found on opening is named by the open; this case is damage found by the query
        result = invoke("query", "select * from trajectories", "--format", "csv", "--db", damaged)
        if result.exit_code != 0:
            break
    assert result is not None and result.exit_code == 1, "no block of the store was read by the query"
    assert f"the store at {damaged} is damaged" in result.output and "checksum" in result.output, result.output
    assert "--db is damaged" not in result.output
