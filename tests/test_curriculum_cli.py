"""coevolve-engine weights and sample, through click's runner."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli


@pytest.fixture
def run(db_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, [*args, "--db", str(db_path)], catch_exceptions=False)

    assert invoke("init", "--sample").exit_code == 0
    return invoke


def test_weights_then_sample(run):
    result = run("weights", "--strategy", "coevolve", "--top", "3")
    assert result.exit_code == 0, result.output
    assert "round 0: coevolve weights for 12 tasks (12 can be drawn), signals up to step 7" in result.output
    assert "reason: first weight set (coevolve): 12 tasks" in result.output
    assert "coevolve-engine sample --round 0" in result.output
    second = run("weights", "--strategy", "plr", "--set", "beta=0.5", "-s", "rho=0.2")
    assert second.exit_code == 0, second.output
    assert "round 1: plr weights" in second.output and "strategy coevolve -> plr" in second.output
    stored = run("query", "select round, strategy, params->'strategy'->>'beta' as beta from weight_sets "
                          "order by round", "--format", "json")
    assert json.loads(stored.output) == [{"round": 0, "strategy": "coevolve", "beta": None},
                                         {"round": 1, "strategy": "plr", "beta": "0.5"}]

    batch = run("sample", "--groups-per-step", "6", "-k", "4", "--seed", "3", "--format", "json")
    assert batch.exit_code == 0, batch.output
    rows = json.loads(batch.output)
    assert len(rows) == 24 and [row["group"] for row in rows] == [g for g in range(6) for _ in range(4)]
    for g in range(6):
        assert len({(row["task_id"], row["weight"]) for row in rows[4 * g: 4 * g + 4]}) == 1
    assert json.loads(run("sample", "-b", "6", "-k", "4", "--seed", "3", "--format", "json").output) == rows
    old = run("sample", "--tasks", "6", "-k", "4", "--seed", "3", "--format", "json")  # the old spelling, for now
    assert json.loads(old.stdout) == rows
    assert "deprecated: --tasks is now --groups-per-step" in old.stderr
    assert json.loads(run("sample", "-b", "6", "-k", "4", "--seed", "3", "--step", "1",
                          "--format", "json").output) != rows


def test_sample_to_a_csv_file_from_an_older_round(run, tmp_path):
    run("weights", "--strategy", "uniform")
    run("weights", "--strategy", "dapo-filter")
    out = tmp_path / "batch.csv"
    result = run("sample", "--round", "0", "--groups-per-step", "5", "-k", "2", "--format", "csv", "--output", str(out))
    assert result.exit_code == 0 and result.output == ""
    frame = pl.read_csv(out)
    assert frame.columns == ["group", "task_id", "weight", "probability"]
    assert frame.height == 10 and set(frame["weight"]) == {1.0} and set(frame["probability"]) == {1 / 12}


@pytest.mark.parametrize("args, message", [
    (("weights", "--round", "0", "--strategy", "uniform"), "round 0 already has weights (strategy coevolve)"),
    (("weights", "--strategy", "zipf"), "unknown curriculum strategy 'zipf'; known: coevolve, dapo-filter"),
    (("weights", "--set", "boundary"), "'boundary' is not NAME=VALUE"),
    (("weights", "--set", "bondary=2"), "has no setting 'bondary'"),
    (("sample", "--round", "4"), "round 4 has no weights (rounds with weights: 0)"),
])
def test_errors_are_messages(run, args, message):
    assert run("weights").exit_code == 0
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_sample_before_any_weights(run):
    result = run("sample")
    assert result.exit_code == 1 and "no weights yet; compute them with" in result.output


def test_help_teaches_the_settings():
    text = CliRunner().invoke(cli, ["weights", "--help"]).output
    for word in ("coevolve:", "plr:", "dapo-filter:", "uniform:", "staleness_horizon=10", "beta=0.1",
                 "min_rollouts=2", "select * from task_weights"):
        assert word in text, word
    text = CliRunner().invoke(cli, ["sample", "--help"]).output
    assert "repeated K times in a row" in text and "--format" in text
