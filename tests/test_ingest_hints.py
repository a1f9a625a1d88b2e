"""What a new user mistypes gets an answer that says what to do: a JSON array file ingests (its records named
'record N'), a tasks file given as trajectories (and the other way round) is named as such, an unknown file kind
points to --layout, and a mistyped --db names the store beside it rather than offering to create the typo."""

from __future__ import annotations

import json

from test_store_safety import invoke


def test_a_json_array_file_ingests_and_names_its_records(tmp_path):
    db = tmp_path / "store.duckdb"
    records = [{"task_id": "a", "step": s, "reward": 1.0} for s in range(3)]
    (tmp_path / "rollouts.json").write_text(json.dumps(records))
    result = invoke("ingest", "trajectories", tmp_path / "rollouts.json", "--create-tasks", "--create", "--db", db)
    assert result.exit_code == 0 and "3 added" in result.output, result.output
    records[1]["reward"] = 2
    (tmp_path / "bad.json").write_text(json.dumps(records))
    bad = invoke("ingest", "trajectories", tmp_path / "bad.json", "--db", db)
    assert bad.exit_code == 1 and "bad.json, record 2, field 'reward'" in bad.output, bad.output
    (tmp_path / "one.json").write_text(json.dumps(records[0]))
    one = invoke("ingest", "trajectories", tmp_path / "one.json", "--db", db)
    assert one.exit_code == 1 and "expected a JSON array of records" in one.output and ".jsonl" in one.output


def test_a_file_of_the_other_kind_is_named(tmp_path):
    db = tmp_path / "store.duckdb"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "a", "env": "shop", "prompt": "buy a mug"}) + "\n")
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"task_id": "a", "step": 0, "reward": 1.0}) + "\n")
    result = invoke("ingest", "trajectories", tasks, "--create", "--db", db)
    assert result.exit_code == 1 and "this looks like a tasks file" in result.output, result.output
    assert f"coevolve-engine ingest tasks {tasks}" in result.output and "unknown field" not in result.output
    result = invoke("ingest", "tasks", rollouts, "--db", db)
    assert result.exit_code == 1 and "this looks like a trajectories file" in result.output, result.output


def test_an_unknown_file_kind_points_to_layout(tmp_path):
    (tmp_path / "rollouts.txt").write_text("{}\n")
    result = invoke("ingest", "trajectories", tmp_path / "rollouts.txt", "--create", "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 1 and "pass --layout" in result.output and "--format" not in result.output


def test_a_mistyped_db_names_the_store_beside_it(tmp_path):
    assert invoke("init", "--db", tmp_path / "coevolve.duckdb").exit_code == 0
    for command in (["signals"], ["drift"], ["ingest", "tasks", tmp_path / "t.jsonl"]):
        result = invoke(*command, "--db", tmp_path / "coevolv.duckdb")
        assert result.exit_code == 1 and f"did you mean {tmp_path / 'coevolve.duckdb'}?" in result.output, result.output
        assert "init --db" not in result.output and not (tmp_path / "coevolv.duckdb").exists()
    far = invoke("signals", "--db", tmp_path / "other.duckdb")
    assert far.exit_code == 1 and f"init --db {tmp_path / 'other.duckdb'}" in far.output
