"""The fault matrix, inputs: JSON nested without end, a key named twice, ids that cannot be told apart, sizes and
rounds no store or memory can hold. Each case runs the real command line on a real store and checks the store is
exactly as it was and the error names what and where, with exit code 1 (a refused input) or 2 (a refused option),
never a traceback.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_store_safety import invoke, table_hashes

from coevolve_engine.core.ids import MAX_ID_LENGTH
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.core.json_input import MAX_JSON_DEPTH
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.store import Store

DEEP = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def store_with_tasks(db_path, jsonl):
    """A store holding two tasks and one trajectory of each."""
    invoke("ingest", "tasks", jsonl([{"task_id": "a"}, {"task_id": "b"}]), "--create", "--db", db_path)
    invoke("ingest", "trajectories", jsonl([{"task_id": "a", "step": 0, "reward": 1},
                                            {"task_id": "b", "step": 0, "reward": 0}]), "--db", db_path)
    return db_path


def verl_dump(folder: Path, *lines: str) -> Path:
    folder.mkdir()
    (folder / "1.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


# -- JSON nested 100,000 deep ---------------------------------------------------------------------------------------

def test_json_lines_nested_100000_deep_are_refused_naming_the_line(store_with_tasks, tmp_path):
    before = table_hashes(store_with_tasks)
    tasks = tmp_path / "deep-tasks.jsonl"
    tasks.write_text('{"task_id": "ok"}\n{"task_id": "c", "meta": {"x": ' + nested(DEEP) + "}}\n")
    rollouts = tmp_path / "deep-rollouts.jsonl"
    rollouts.write_text('{"task_id": "a", "step": 1, "reward": 1, "actions": ' + nested(DEEP) + "}\n")
    for kind, path in (("tasks", tasks), ("trajectories", rollouts)):
        result = invoke("ingest", kind, path, "--db", store_with_tasks)
        assert result.exit_code == 1, result.output
        line = 2 if kind == "tasks" else 1
        assert f"{path}, line {line}: not valid JSON (nested more than {MAX_JSON_DEPTH} levels deep" in result.output
    assert table_hashes(store_with_tasks) == before


def test_parquet_and_python_records_nested_too_deep_are_refused_naming_the_field(store_with_tasks, tmp_path):
    before = table_hashes(store_with_tasks)
    parquet = tmp_path / "deep.parquet"
    pq.write_table(pa.table({"task_id": ["ok", "c"], "meta": ['{"x": 1}', '{"x": ' + nested(DEEP) + "}"]}), parquet)
    result = invoke("ingest", "tasks", parquet, "--db", store_with_tasks)
    assert result.exit_code == 1
    assert f"{parquet}, row 2, field 'meta': nested more than {MAX_JSON_DEPTH} levels deep" in result.output
    value: list = []
    for _ in range(DEEP):  # a Python value as deep, built without recursion
        value = [value]
    with Store(store_with_tasks) as store:
        for depth, deep in ((MAX_JSON_DEPTH + 1, json.loads(nested(MAX_JSON_DEPTH + 1))), (DEEP, value)):
            with pytest.raises(IngestError, match=f"record 1, field 'meta': nested more than {MAX_JSON_DEPTH}"):
                store.add_records("tasks", [{"task_id": "c", "meta": {"x": deep}}], label="tasks")
        # as deep as allowed is kept: the object and MAX_JSON_DEPTH - 1 lists in it
        store.add_records("tasks", [{"task_id": "c", "meta": {"x": json.loads(nested(MAX_JSON_DEPTH - 1))}}],
                          label="tasks")
        assert store.scalar("SELECT count(*) FROM tasks WHERE task_id = 'c'") == 1


def test_a_verl_dump_and_a_manifest_nested_100000_deep_are_refused(store_with_tasks, tmp_path):
    before = table_hashes(store_with_tasks)
    line = json.dumps({"input": "u", "output": "o", "gts": "a", "score": 1, "step": 1})
    dump = verl_dump(tmp_path / "dump", line[:-1] + ', "extra": ' + nested(DEEP) + "}")
    result = invoke("import-rollouts", dump, "--db", store_with_tasks)
    assert result.exit_code == 1
    assert f"1.jsonl, line 1: not valid JSON (nested more than {MAX_JSON_DEPTH} levels deep" in result.output
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"rows": ' + nested(DEEP) + "}")
    result = invoke("import-rollouts", dump, "--manifest", manifest, "--db", store_with_tasks)
    assert result.exit_code == 1 and f"{manifest}: not a manifest written by coevolve-engine export" in result.output
    assert "nested more than" in result.output
    # a model's output nested that deep is a tool call that does not parse (kept as any malformed call is), not a
    # failed import
    calls = verl_dump(tmp_path / "calls", json.dumps({"input": "u", "output": "<tool_call>" + nested(DEEP)
                                                      + "</tool_call>", "gts": "a", "score": 1, "step": 1}))
    assert invoke("import-rollouts", calls, "--db", store_with_tasks).exit_code == 0
    with Store(store_with_tasks, read_only=True) as store:
        assert store.execute("SELECT CAST(actions AS VARCHAR) FROM trajectories WHERE step = 1").fetchall() == [
            ('[{"name": "", "arguments": null}]',)]
    assert table_hashes(store_with_tasks) != before


def test_a_config_or_option_nested_100000_deep_is_refused(store_with_tasks, tmp_path):
    before = table_hashes(store_with_tasks)
    config = tmp_path / "run.toml"
    config.write_text('env = "calc"\nrounds = ' + nested(DEEP) + "\n")
    result = invoke("run", "--config", config, "--db", store_with_tasks)
    assert result.exit_code == 1 and f"{config}: not valid TOML: arrays or tables nest too deeply" in result.output
    result = invoke("run", "--set", "rounds=" + nested(DEEP), "--db", store_with_tasks)
    assert result.exit_code == 1 and "--set value '[[[[" in result.output and "nest too deeply" in result.output
    result = invoke("rollout", "--env", "calc", "--model", "reference", "--step", "1",
                    "--chat-template-kwargs", nested(DEEP), "--db", store_with_tasks)
    assert result.exit_code == 2 and f"not JSON (nested more than {MAX_JSON_DEPTH} levels deep)" in result.output
    assert table_hashes(store_with_tasks) == before


# -- a key named twice ------------------------------------------------------------------------------------------

def test_a_record_that_names_a_key_twice_is_refused_naming_file_line_and_key(store_with_tasks, tmp_path):
    before = table_hashes(store_with_tasks)
    rollouts = tmp_path / "twice.jsonl"
    rollouts.write_text('{"task_id": "a", "step": 1, "reward": 1}\n{"task_id": "a", "step": 1, "reward": 0, '
                        '"reward": 1}\n')
    tasks = tmp_path / "twice-tasks.jsonl"
    tasks.write_text('{"task_id": "c", "meta": {"k": 1, "k": 2}}\n')
    for kind, path, line, key in (("trajectories", rollouts, 2, "reward"), ("tasks", tasks, 1, "k")):
        result = invoke("ingest", kind, path, "--db", store_with_tasks)
        assert result.exit_code == 1
        assert f"{path}, line {line}: key {key!r} appears twice in one object" in result.output
    dump = verl_dump(tmp_path / "dump", '{"input": "u", "output": "o", "gts": "a", "score": 0, "score": 1, "step": 1}')
    result = invoke("import-rollouts", dump, "--db", store_with_tasks)
    assert result.exit_code == 1 and "1.jsonl, line 1: key 'score' appears twice in one object" in result.output
    assert table_hashes(store_with_tasks) == before


# -- ids ---------------------------------------------------------------------------------------------------------

ID_RULE = "must not be blank, start or end with whitespace, or hold a control character or line break, got "
BAD_IDS = [
    (" ", ID_RULE + "' '"),
    ("a\x00b", ID_RULE + r"'a\x00b'"),
    ("a\nb", ID_RULE + r"'a\nb'"),
    ("x" * 10_000, f"is 10000 characters long; an id has at most {MAX_ID_LENGTH}"),
]


@pytest.mark.parametrize("task_id, message", BAD_IDS, ids=["space", "nul", "newline", "10000-chars"])
def test_a_task_id_that_cannot_be_told_apart_is_refused_at_every_way_in(store_with_tasks, jsonl, tmp_path, task_id,
                                                                        message):
    before = table_hashes(store_with_tasks)
    tasks = jsonl([{"task_id": "ok"}, {"task_id": task_id}], name="tasks.jsonl")
    result = invoke("ingest", "tasks", tasks, "--db", store_with_tasks)
    assert result.exit_code == 1 and f"{tasks}, line 2, field 'task_id': {message}" in result.output, result.output
    rollouts = jsonl([{"task_id": task_id, "step": 1, "reward": 1}], name="rollouts.jsonl")
    result = invoke("ingest", "trajectories", rollouts, "--create-tasks", "--db", store_with_tasks)
    assert result.exit_code == 1 and f"line 1, field 'task_id': {message}" in result.output
    for field in ("trajectory_id", "group_id"):  # the other ids follow the same rule
        rollouts = jsonl([{"task_id": "a", "step": 1, "reward": 1, field: task_id}])
        result = invoke("ingest", "trajectories", rollouts, "--db", store_with_tasks)
        assert result.exit_code == 1 and f"line 1, field '{field}': {message}" in result.output
    parquet = tmp_path / "tasks.parquet"
    pq.write_table(pa.table({"task_id": [task_id]}), parquet)
    result = invoke("ingest", "tasks", parquet, "--db", store_with_tasks)
    assert result.exit_code == 1 and f"row 1, field 'task_id': {message}" in result.output
    with Store(store_with_tasks) as store:  # from Python: bootstrap, synthesized and imported tasks come this way
        with pytest.raises(IngestError, match="record 1, field 'task_id'"):
            store.add_records("tasks", [{"task_id": task_id}], label="candidate 7")
    assert table_hashes(store_with_tasks) == before


def test_two_unicode_forms_of_one_name_are_one_task(store_with_tasks, jsonl, tmp_path):
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert unicodedata.normalize("NFC", decomposed) == composed and composed != decomposed
    task = {"env": "toy", "prompt": "p", "spec": {}}
    assert invoke("ingest", "tasks", jsonl([{"task_id": decomposed, **task}]), "--db", store_with_tasks).exit_code == 0
    result = invoke("ingest", "tasks", jsonl([{"task_id": composed, **task}]), "--db", store_with_tasks)
    assert result.exit_code == 0 and "0 added, 1 already present" in result.output
    rollouts = jsonl([{"task_id": decomposed, "step": 1, "reward": 1}, {"task_id": composed, "step": 1, "reward": 0}])
    assert invoke("ingest", "trajectories", rollouts, "--db", store_with_tasks).exit_code == 0
    dump = verl_dump(tmp_path / "dump", json.dumps({"input": "u", "output": "o", "gts": decomposed, "score": 1,
                                                    "step": 2}))
    assert invoke("import-rollouts", dump, "--db", store_with_tasks).exit_code == 0
    with Store(store_with_tasks) as store:
        store.add_records("tasks", [{"task_id": decomposed, **task}], label="candidate 1")
        assert store.execute("SELECT task_id FROM tasks WHERE task_id LIKE 'caf%'").fetchall() == [(composed,)]
        # a task named on the command line (rollout --task-id) is found in either spelling
        assert [t["task_id"] for t in select_tasks(store, "toy", task_ids=[decomposed])] == [composed]
        assert store.execute("SELECT task_id, step, group_id FROM trajectories WHERE task_id LIKE 'caf%' "
                             "ORDER BY step, reward").fetchall() == [
            (composed, 1, f"{composed}@1"), (composed, 1, f"{composed}@1"), (composed, 2, f"{composed}@2")]
    # both forms in one file are one id twice
    before = table_hashes(store_with_tasks)
    both = jsonl([{"task_id": "n\u00f1"}, {"task_id": "nn\u0303"}])
    result = invoke("ingest", "tasks", both, "--db", store_with_tasks)
    assert result.exit_code == 1
    assert "line 2, field 'task_id': 'nñ' appears more than once (lines 1, 2)" in result.output
    assert table_hashes(store_with_tasks) == before


# -- sizes and rounds no store or memory holds ---------------------------------------------------------------------

def test_a_batch_too_large_to_hold_is_refused_naming_the_options(store_with_tasks):
    invoke("weights", "--strategy", "uniform", "--db", store_with_tasks)
    before = table_hashes(store_with_tasks)
    result = invoke("sample", "--groups-per-step", "999999999999", "-k", "999999999", "--db", store_with_tasks)
    assert result.exit_code == 2
    assert "--groups-per-step 999999999999 times --group-size 999999999 is more than 10,000,000 rows" in result.output
    assert table_hashes(store_with_tasks) == before


@pytest.mark.parametrize("command", [["weights"], ["sample"], ["export", "-o", "out"], ["patterns"],
                                     ["candidates"], ["synthesize"], ["validate"], ["summarize", "--model", "m"]])
def test_a_round_beyond_the_store_is_refused_naming_the_option(store_with_tasks, command):
    before = table_hashes(store_with_tasks)
    result = invoke(*command, "--round", "99999999999", "--db", store_with_tasks)
    assert result.exit_code == 2
    assert "Invalid value for '--round': 99999999999 is not in the range 0<=x<=2147483647" in result.output
    assert table_hashes(store_with_tasks) == before


@pytest.mark.parametrize("command, option, value, message", [
    (["patterns"], "--seed", "99999999999", "0<=x<=4294967295"),  # was KMeans' InvalidParameterError
    (["patterns"], "--seed", "-1", "0<=x<=4294967295"),
    (["rollout", "--env", "calc", "--model", "reference", "--step", "0"], "-k", "99999999999",
     "1<=x<=4096"),  # was a job list of 10^11 entries, built before the first rollout
    (["rollout", "--env", "calc", "--model", "reference"], "--step", str(2**53), "0<=x<=9007199254740991"),
    (["summarize", "--model", "m"], "--timeout", "99999999999", "0<x<=86400"),  # every call failed on time_t
    (["run"], "--rounds", "99999999999", "1<=x<=10000"),  # the run planned every round before the first
    (["demo"], "--seed", "99999999999", "0<=x<=4294967295"),
])
def test_an_option_value_no_run_can_use_is_refused_naming_the_option(store_with_tasks, tmp_path, command, option,
                                                                      value, message):
    before = table_hashes(store_with_tasks)
    demo = tmp_path / "demo"
    where = ["--dir", demo] if command[0] == "demo" else ["--db", store_with_tasks]
    result = invoke(*command, option, value, *where)
    assert result.exit_code == 2 and f"is not in the range {message}" in result.output, result.output
    assert table_hashes(store_with_tasks) == before
    assert not demo.exists()


@pytest.mark.parametrize("option, value, worlds", [("--n", "99999999999", "299,999,999,997"),
                                                   ("--max-worlds", "99999999999", "99,999,999,999")])
def test_a_bootstrap_too_large_to_plan_is_refused_before_it_builds_its_worlds(store_with_tasks, option, value, worlds):
    before = table_hashes(store_with_tasks)  # the worlds were built first: 3 x 10^11 of them, for hours
    result = invoke("bootstrap", "--env", "calc", "--explorer-model", "openai/m", option, value,
                    "--db", store_with_tasks)
    assert result.exit_code == 1
    assert f"max_worlds (--max-worlds; default 3 x n, --n) is {worlds}, more than 30,000" in result.output
    assert table_hashes(store_with_tasks) == before
