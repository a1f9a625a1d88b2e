"""The command line, through click's runner and once through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli


@pytest.fixture
def run(db_path):
    runner = CliRunner()

    def invoke(*args, input=None, db=True):
        extra = ["--db", str(db_path)] if db else []
        return runner.invoke(cli, [*args, *extra], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def sample_store(run):
    result = run("init", "--sample")
    assert result.exit_code == 0, result.output
    return result


def test_init_sample_and_signals(sample_store, run):
    assert "sample trajectories: 384 added" in sample_store.output
    result = run("signals")
    assert result.exit_code == 0
    assert "12 tasks, 384 trajectories" in result.output
    for word in ("forgetting", "boundary", "rare", "Tasks forgetting most"):
        assert word in result.output


def test_signals_figures_match_sql(sample_store, run):
    summary = json.loads(run("signals", "--format", "json", "--window", "2").output)
    flags = {row["signal"]: row["flags"] for row in summary["by_signal"]}
    counted = json.loads(run("query", "select signal, count(*) n from flagged_trajectories_with(w := 2) "
                                      "group by signal", "--format", "json").output)
    assert flags == {row["signal"]: row["n"] for row in counted}
    assert summary["params"]["w"] == 2


def test_signals_per_trajectory_forgetting_matches_sql(sample_store, run):
    group = json.loads(run("signals", "--format", "json").output)
    trajectory = json.loads(run("signals", "--format", "json", "--forgetting-form", "trajectory").output)
    assert (group["params"]["forgetting_form"], trajectory["params"]["forgetting_form"]) == ("group", "trajectory")
    flags = {row["signal"]: row["flags"] for row in trajectory["by_signal"]}
    counted = json.loads(run("query", "select count(*) n from forgetting_trajectories", "--format", "json").output)
    assert flags["forgetting"] == counted[0]["n"] == trajectory["detail"]["forgetting_trajectories"] > 0
    # boundary and rare do not depend on the form
    assert {r["signal"]: r["flags"] for r in group["by_signal"] if r["signal"] != "forgetting"} == {
        signal: n for signal, n in flags.items() if signal != "forgetting"}
    text = run("signals", "--forgetting-form", "trajectory").output
    assert "forgetting per trajectory" in text and "failed rollouts" in text


def test_query_formats_and_params(sample_store, run, tmp_path):
    sql = "select task_id, step, score from task_steps where task_id = $t and step < $s::INT order by step"
    table = run("query", sql, "-p", "t", "files-001", "-p", "s", "2")
    assert table.exit_code == 0 and "files-001" in table.output and "|" in table.output
    rows = json.loads(run("query", sql, "-p", "t", "files-001", "-p", "s", "2", "--format", "json").output)
    assert [(r["task_id"], r["step"]) for r in rows] == [("files-001", 0), ("files-001", 1)]
    csv = run("query", sql, "-p", "t", "files-001", "-p", "s", "2", "--format", "csv").output
    assert csv.splitlines()[0] == "task_id,step,score" and len(csv.splitlines()) == 3
    out = tmp_path / "out.parquet"
    assert run("query", sql, "-p", "t", "files-001", "-p", "s", "2", "--format", "parquet", "-o", str(out)).exit_code == 0
    assert pl.read_parquet(out).height == 2
    stdin = run("query", "-", "--format", "json", input="select count(*) as n from trajectories")
    assert json.loads(stdin.output) == [{"n": 384}]


def test_query_is_read_only_unless_write(sample_store, run):
    denied = run("query", "delete from trajectories")
    assert denied.exit_code != 0 and "read-only" in denied.output.lower()
    assert json.loads(run("query", "select count(*) n from trajectories", "--format", "json").output) == [{"n": 384}]
    assert run("query", "delete from trajectories where step = 0", "--write").exit_code == 0
    assert json.loads(run("query", "select count(*) n from trajectories", "--format", "json").output) == [{"n": 336}]


def test_errors_are_messages_not_tracebacks(sample_store, run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "a", "step": 1, "reward": 3}\n')
    result = run("ingest", "trajectories", str(bad))
    assert result.exit_code == 1
    assert f"Error: {bad}, line 1, field 'reward': reward 3.0 is outside [0, 1]" in result.output
    assert "Traceback" not in result.output
    sql_error = run("query", "select * from no_such_table")
    assert sql_error.exit_code == 1 and "SQL error" in sql_error.output and "no_such_table" in sql_error.output
    missing = CliRunner().invoke(cli, ["query", "select 1", "--db", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 1 and "no store at" in missing.output


def test_ingest_stops_at_the_first_bad_file(run, jsonl, tmp_path):
    good = jsonl([{"task_id": "a", "step": 1, "reward": 1}])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    later = jsonl([{"task_id": "b", "step": 1, "reward": 1}])
    assert run("ingest", "tasks", str(jsonl([{"task_id": "a"}, {"task_id": "b"}])), "--create").exit_code == 0
    result = run("ingest", "trajectories", str(good), str(bad), str(later))
    assert result.exit_code == 1
    assert f"{good}: 1 records, 1 added" in result.output and "line 1" in result.output
    assert json.loads(run("query", "select task_id from trajectories", "--format", "json").output) == [{"task_id": "a"}]


def test_db_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COEVOLVE_DB", str(tmp_path / "env.duckdb"))
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0 and str(tmp_path / "env.duckdb") in result.output


def test_migrations_lists_without_writing(run, db_path):
    assert "pending  001_core" in run("migrations").output
    assert not db_path.exists()
    run("init")
    assert "applied  001_core" in run("migrations").output


def test_every_command_has_help():
    for name, command in cli.commands.items():
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and len(command.help or "") > 20, name


def test_console_script(tmp_path):
    db = tmp_path / "script.duckdb"
    exe = [sys.executable, "-m", "coevolve_engine.cli"]
    subprocess.run([*exe, "init", "--sample", "--db", str(db)], check=True, capture_output=True)
    out = subprocess.run([*exe, "query", "select count(*) as n from tasks", "--format", "csv", "--db", str(db)],
                         check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == ["n", "12"]
