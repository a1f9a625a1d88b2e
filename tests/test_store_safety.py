"""The fault matrix: what a hostile but fair user can type, and what it must never do to a store.

Every case runs the real command line on a real store and checks either that the store's tables are exactly as
they were (a hash of every row of every table) or that the outcome is the documented one, with a message naming
what and where, never a traceback.

The matrix is this file and the files beside it named ``test_store_safety_*.py`` (resumes and the check before a
round, ``query``, inputs); after a run, tests/conftest.py prints how many cases it holds and how they ended.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.core.store import Store

CALC_TASKS = 6


def table_hashes(db: Path) -> dict[str, str]:
    """A hash of every row of every table (read-only open; nothing changes)."""
    with Store(db, read_only=True) as store:
        tables = [name for (name,) in store.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY 1").fetchall()]
        return {table: hashlib.sha256(repr(store.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall())
                                      .encode()).hexdigest() for table in tables}


def invoke(*args: str):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.fixture
def calc_store(db_path, jsonl):
    """A store with a few calc training tasks and their reference rollouts at step 0."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.rollouts.jobs import run_rollout_job

    calc = load_environment("calc")
    with Store(db_path) as store:
        store.add_records("tasks", list(calc.load_tasks(split="seed", n=CALC_TASKS)), label="calc tasks")
    run_rollout_job(db_path, calc, "calc", ReferenceAgent(), group_size=1, step=0, concurrency=1)
    return db_path


# -- 1. no output path may be a store --------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["query", "select 1 AS x", "-o"],
    ["query", "select 1 AS x", "--format", "parquet", "-o"],
    ["query", "select 1 AS x", "--write", "-o"],
    ["candidates", "-o"],
    ["report", "-o"],
    ["report", "--out"],  # the old spelling, kept for one release
])
def test_an_output_path_that_is_the_store_is_refused(calc_store, command):
    before = table_hashes(calc_store)
    result = invoke(*command, calc_store, "--db", calc_store)
    assert result.exit_code == 1 and f"{calc_store} is the store" in result.output
    assert table_hashes(calc_store) == before


def test_no_output_replaces_any_duckdb_file_even_with_force(calc_store, tmp_path):
    other = tmp_path / "other.duckdb"
    with Store(other) as store:
        store.add_records("tasks", [{"task_id": "keep-me"}], label="tasks")
    before = table_hashes(other)
    for command in (["query", "select 1 AS x", "-o", other, "--force"], ["report", "-o", other, "--force"],
                    ["query", "select 1 AS x", "-o", other, "--format", "csv"]):
        result = invoke(*command, "--db", calc_store)
        assert result.exit_code == 1 and "is a DuckDB database" in result.output
    assert table_hashes(other) == before


def test_an_existing_file_of_another_kind_needs_force(calc_store, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"\x00\x01binary notes")
    refused = invoke("query", "select 1 AS x", "-o", notes, "--db", calc_store)
    assert refused.exit_code == 1 and "is not a text table; pass --force" in refused.output
    assert notes.read_bytes() == b"\x00\x01binary notes"
    assert invoke("query", "select 1 AS x", "-o", notes, "--force", "--db", calc_store).exit_code == 0
    assert "| x |" in notes.read_text()
    same_kind = tmp_path / "out.csv"
    same_kind.write_text("a,b\n1,2\n")
    assert invoke("query", "select 1 AS x", "-o", same_kind, "--format", "csv", "--db", calc_store).exit_code == 0
    assert same_kind.read_text() == "x\n1\n"
    page = tmp_path / "page.html"
    page.write_text("not a page")
    assert "is not an HTML page" in invoke("report", "-o", page, "--db", calc_store).output


def test_an_output_into_a_missing_folder_is_named(calc_store, tmp_path):
    result = invoke("query", "select 1 AS x", "-o", tmp_path / "nope" / "x.csv", "--db", calc_store)
    assert result.exit_code == 1 and f"the folder {tmp_path / 'nope'} does not exist" in result.output


def test_export_never_writes_over_a_store(calc_store, tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "train.parquet").write_bytes(calc_store.read_bytes())  # a store copied to the wrong name
    result = invoke("export", "--round", "0", "--layout", "verl", "-o", out, "--uniform", "--db", calc_store)
    assert result.exit_code == 1 and "is a DuckDB database" in result.output


# -- 2. one long job per store ------------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys
    from coevolve_engine.core.lease import hold_lease
    with hold_lease(sys.argv[1], "run", wait=30):
        print("held", flush=True)
        sys.stdin.readline()
""")


def test_a_second_long_job_refuses_while_the_first_lives_and_takes_over_a_dead_one(calc_store, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(calc_store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = table_hashes(calc_store)
        for command in (["run", "--set", "env=calc", "--set", f"trainer.model={tmp_path}"],
                        ["patterns"], ["synthesize", "--synthesizer", "offline:calc"], ["validate"],
                        ["rollout", "--env", "calc", "--model", "reference", "--step", "1", "-k", "1"]):
            result = invoke(*command, "--db", calc_store)
            assert result.exit_code == 1, (command, result.output)
            assert f"is in use by `run` (pid {holder.pid} on" in result.output, (command, result.output)
        assert table_hashes(calc_store) == before
        # query, signals and the other readers go on
        assert invoke("query", "select count(*) AS n from store_lease", "--db", calc_store).exit_code == 0
    finally:
        holder.kill()  # killed: its lease stays behind
        holder.wait()
    with Store(calc_store, read_only=True) as store:
        assert store.scalar("SELECT pid FROM store_lease") == holder.pid
    result = invoke("rollout", "--env", "calc", "--model", "reference", "--step", "1", "-k", "1", "--no-progress",
                    "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert f"took over the lease of `run` (pid {holder.pid}" in result.output
    with Store(calc_store, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM store_lease") == 0  # released when the rollout ended
        assert store.scalar("SELECT count(*) FROM trajectories WHERE step = 1") == CALC_TASKS


def test_the_lease_is_reentrant_within_a_process_and_refuses_a_reused_pid(calc_store):
    from coevolve_engine.core.lease import StoreBusyError, hold_lease, process_start

    with hold_lease(calc_store, "demo", wait=5):
        with hold_lease(calc_store, "run", wait=5):  # the run a demo starts
            pass
        with Store(calc_store, read_only=True) as store:
            assert store.execute("SELECT command, pid FROM store_lease").fetchall() == [("demo", os.getpid())]
    with Store(calc_store) as store:
        assert store.scalar("SELECT count(*) FROM store_lease") == 0
        # a lease whose pid now belongs to a process that started later (pid reuse): its holder is dead
        store.execute("INSERT INTO store_lease (command, pid, host, process_start) VALUES ('run', $pid, $host, 1)",
                      {"pid": os.getppid(), "host": __import__("socket").gethostname()})
    if process_start(os.getppid()) not in (None, 1):
        with hold_lease(calc_store, "bootstrap", wait=5):
            pass
    with Store(calc_store) as store:  # a live holder on another host cannot be checked: refused
        store.execute("DELETE FROM store_lease")
        store.execute("INSERT INTO store_lease (command, pid, host) VALUES ('run', 1, 'elsewhere')")
    with pytest.raises(StoreBusyError, match="on elsewhere.*delete from store_lease"):
        with hold_lease(calc_store, "run", wait=5):
            pass


CREATOR = textwrap.dedent("""
    import sys, time
    from coevolve_engine.core.store import Store
    while time.time() < float(sys.argv[2]):
        pass
    with Store(sys.argv[1], wait=60) as store:
        store.add_records("tasks", [{"task_id": "t"}], label="tasks")
    print("ok", flush=True)
""")


def test_processes_creating_one_store_at_once_all_open_it(tmp_path):
    import time

    db = tmp_path / "new.duckdb"
    start = str(time.time() + 3)  # every process past its imports, then all at once
    processes = [subprocess.Popen([sys.executable, "-c", CREATOR, str(db), start], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0] * 8, outputs
    with Store(db, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM tasks") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.duckdb"]  # no draft left behind


# -- 3. the whole config is checked before a round writes anything -----------------------------------------------

@pytest.mark.parametrize("override, words", [
    ("synthesis.synthesizer=offline:nope", "synthesis.synthesizer: unknown synthesizer 'offline:nope'"),
    ("curriculum.strategy=coevolv", "curriculum.strategy: unknown curriculum strategy 'coevolv'"),
    ("trainer.name=trl-grop", "trainer.name: unknown trainer 'trl-grop'"),
    ("trainer.options.learnig_rate=1e-3", "trainer.options: trainer trl-grpo: unknown option(s) learnig_rate"),
    ("trainer.options.learning_rate=abc", "option learning_rate must be a number, got 'abc'"),
    ("warmup.options.batch_size=two", "warmup.options: warm-up trainer sft: option batch_size must be an integer"),
    ("curriculum.settings.forgeting=2", "curriculum.settings: strategy 'coevolve' has no setting 'forgeting'"),
    ("synthesis.options.atempts=3", "synthesis.options: "),
    ("env=nope", "env: unknown environment 'nope'"),
    ("trainer.model=/no/such/model", "trainer.model: /no/such/model does not exist"),
    ("trainer.optimization=epoch", "trainer.optimization must be one of run, round, got 'epoch'"),
    ("trainer.name=sft", "trainer sft cannot carry its optimizer and schedule from round to round; set "
                         "trainer.optimization = \"round\""),
])
def test_a_config_typo_is_refused_before_the_round_and_leaves_no_trace(calc_store, tmp_path, override, words):
    before = table_hashes(calc_store)
    result = invoke("run", "--set", "env=calc", "--set", f"trainer.model={tmp_path}", "--set", "warmup.steps=1",
                    "--set", "synthesis.synthesizer=offline:calc", "--set", override, "--db", calc_store)
    assert result.exit_code == 1 and words in result.output, result.output
    assert table_hashes(calc_store) == before


# -- 4. the held-out guard holds in both orders ---------------------------------------------------------------------

def test_trajectories_of_unknown_tasks_are_refused_unless_placeholders_are_asked_for(db_path, jsonl):
    invoke("init", "--db", db_path)
    before = table_hashes(db_path)
    rollouts = jsonl([{"task_id": "t9", "step": 1, "reward": 1}, {"task_id": "t8", "step": 1, "reward": 0}])
    result = invoke("ingest", "trajectories", rollouts, "--db", db_path)
    assert result.exit_code == 1
    assert "line 1, field 'task_id': task 't9' is not in the store (nor are 1 other task ids" in result.output
    assert table_hashes(db_path) == before
    assert invoke("ingest", "trajectories", rollouts, "--create-tasks", "--db", db_path).exit_code == 0
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT task_id, source, split FROM tasks ORDER BY 1").fetchall() == [
            ("t8", "placeholder", "train"), ("t9", "placeholder", "train")]
    # the real task fills its placeholder in; held out, it would be refused: its rollouts are in the store
    before = table_hashes(db_path)
    result = invoke("ingest", "tasks", jsonl([{"task_id": "t9", "prompt": "p", "split": "eval"}], name="held.jsonl"),
                    "--db", db_path)
    assert result.exit_code == 1
    assert "held.jsonl, line 1, field 'split': task 't9' cannot be held out" in result.output
    assert table_hashes(db_path) == before
    assert invoke("ingest", "tasks", jsonl([{"task_id": "t9", "prompt": "p"}]), "--db", db_path).exit_code == 0
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT prompt, source, split FROM tasks WHERE task_id = 't9'").fetchall() == [
            ("p", None, "train")]


def test_trajectories_of_an_eval_task_are_refused(db_path, jsonl):
    invoke("ingest", "tasks", jsonl([{"task_id": "e1", "split": "eval"}]), "--create", "--db", db_path)
    before = table_hashes(db_path)
    result = invoke("ingest", "trajectories", jsonl([{"task_id": "e1", "step": 1, "reward": 1}]), "--db", db_path)
    assert result.exit_code == 1 and "task 'e1' is a held-out eval task" in result.output
    assert table_hashes(db_path) == before


# -- 5. conflicting content is an error ----------------------------------------------------------------------------

def test_a_reused_trajectory_id_with_other_content_is_refused_naming_both_records(db_path, jsonl):
    invoke("ingest", "tasks", jsonl([{"task_id": "a"}]), "--create", "--db", db_path)
    first = jsonl([{"task_id": "a", "step": 1, "reward": 0, "trajectory_id": "x0"},
                   {"task_id": "a", "step": 1, "reward": 1, "trajectory_id": "x1"}], name="first.jsonl")
    assert invoke("ingest", "trajectories", first, "--db", db_path).exit_code == 0
    before = table_hashes(db_path)
    second = jsonl([{"task_id": "a", "step": 2, "reward": 1, "trajectory_id": "y"},
                    {"task_id": "a", "step": 1, "reward": 0, "trajectory_id": "x1"}], name="second.jsonl")
    result = invoke("ingest", "trajectories", second, "--db", db_path)
    assert result.exit_code == 1
    assert (f"{second}, line 2, field 'trajectory_id': trajectory 'x1' is already in the store with different "
            f"content (from {first}, line 2)") in result.output
    assert table_hashes(db_path) == before
    assert "0 added, 2 already present" in invoke("ingest", "trajectories", first, "--db", db_path).output


# -- 6. a damaged store is named as such ---------------------------------------------------------------------------

def test_a_truncated_store_is_refused_by_init_and_named_by_readers(calc_store, tmp_path):
    data = calc_store.read_bytes()
    for cut in (len(data) - 4096, len(data) // 2, 4096):
        damaged = tmp_path / f"damaged-{cut}.duckdb"
        damaged.write_bytes(data[:cut])
        result = invoke("init", "--db", damaged)
        assert result.exit_code == 1 and f"the store at {damaged} is damaged" in result.output, result.output
        assert damaged.read_bytes() == data[:cut]  # not rewritten
        read = invoke("query", "select * from trajectories", "--db", damaged)
        assert read.exit_code == 1 and "is damaged" in read.output and "Restore it from a backup" in read.output


# -- 7. no tracebacks for user input -------------------------------------------------------------------------------

def test_steps_out_of_range_are_refused_at_ingest_and_import(calc_store, jsonl, tmp_path):
    from coevolve_engine.core.records import MAX_STEP

    with Store(calc_store, read_only=True) as store:
        task = store.scalar("SELECT min(task_id) FROM tasks")
    before = table_hashes(calc_store)
    for step in (2**63, 2**63 - 1, MAX_STEP + 1, -1):
        result = invoke("ingest", "trajectories", jsonl([{"task_id": task, "step": step, "reward": 1}]),
                        "--db", calc_store)
        assert result.exit_code == 1 and f"field 'step': {step} is outside [0, {MAX_STEP}]" in result.output
        dump = tmp_path / f"dump-{step}"
        dump.mkdir()
        (dump / "1.jsonl").write_text(json.dumps({"input": "u", "output": "a", "gts": task, "score": 1,
                                                  "step": step}) + "\n")
        result = invoke("import-rollouts", dump, "--db", calc_store)
        assert result.exit_code == 1 and "outside [0," in result.output, result.output
    offset = tmp_path / "offset"
    offset.mkdir()
    (offset / "1.jsonl").write_text(json.dumps({"input": "u", "output": "a", "gts": task, "score": 1, "step": 5}) + "\n")
    result = invoke("import-rollouts", offset, "--step-offset", str(MAX_STEP), "--db", calc_store)
    assert result.exit_code == 1 and f"{MAX_STEP + 5} is outside" in result.output, result.output
    assert table_hashes(calc_store) == before


def test_a_config_file_that_is_not_utf8_is_named(calc_store, tmp_path):
    config = tmp_path / "run.toml"
    config.write_bytes(b'env = "calc"\nrounds = 2\n# caf\xe9\n')
    result = invoke("run", "--config", config, "--db", calc_store)
    assert result.exit_code == 1 and f"{config}, line 3: not UTF-8 text" in result.output


def test_set_errors_are_blamed_on_the_set(calc_store, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('env = "calc"\n[trainer]\nmodel = "m"\n')
    result = invoke("run", "--config", config, "--set", "rounds=zero", "--db", calc_store)
    assert result.exit_code == 1 and "--set rounds=zero: rounds must be an integer" in result.output
    result = invoke("run", "--config", config, "--set", "rounds=0", "--db", calc_store)
    assert result.exit_code == 1 and "--set rounds=0: rounds must be at least 1" in result.output
    assert str(config) not in result.output


# -- 8. smaller ones -----------------------------------------------------------------------------------------------

def test_writers_refuse_a_missing_store_unless_asked_to_create_it(tmp_path, jsonl):
    typo = tmp_path / "coevolv.duckdb"
    tasks = jsonl([{"task_id": "a"}])
    for command in (["ingest", "tasks", tasks], ["tasks", "import", "calc", "--limit", "1"],
                    ["rollout", "--env", "calc", "--model", "reference", "--step", "0"],
                    ["import-rollouts", tmp_path], ["patterns"], ["validate"]):
        result = invoke(*command, "--db", typo)
        assert result.exit_code == 1 and f"no store at {typo}" in result.output, (command, result.output)
        assert not typo.exists()
    assert invoke("ingest", "tasks", tasks, "--create", "--db", typo).exit_code == 0 and typo.exists()


def test_a_failing_multi_statement_write_keeps_nothing(calc_store):
    before = table_hashes(calc_store)
    result = invoke("query", "--write", "delete from trajectories; delete from tasks; select * from nope",
                    "--db", calc_store)
    assert result.exit_code == 1
    assert table_hashes(calc_store) == before
