"""Ingesting trajectory and task records: formats, defaults, idempotence, and bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coevolve_engine.core.errors import IngestError

GOOD = [
    {"task_id": "a", "step": 1, "reward": 1.0, "actions": [{"name": "ls", "arguments": {"path": "."}}]},
    {"task_id": "a", "step": 1, "reward": 0.0, "success": False, "policy": "ckpt-1", "meta": {"tokens": 12}},
    {"task_id": "b", "step": 2, "reward": 0.5, "group_id": "g-b", "messages": [{"role": "user", "content": "hi"}]},
]


@pytest.fixture(autouse=True)
def tasks_a_and_b(request):
    """The tasks these trajectories name (trajectories of unknown tasks are refused; see test_unknown_tasks)."""
    if "store" in request.fixturenames:
        request.getfixturevalue("store").add_records("tasks", [{"task_id": "a"}, {"task_id": "b"}], label="tasks")


def snapshot(store) -> dict:
    """Everything a failed ingest must leave untouched."""
    return {
        table: store.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        for table in ("tasks", "trajectories", "ingests", "rounds")
    }


def test_jsonl_defaults_and_idempotence(store, jsonl):
    path = jsonl(GOOD)
    report = store.ingest_trajectories(path)
    assert (report.records, report.added, report.format) == (3, 3, "jsonl")
    got = store.execute(
        "SELECT task_id, step, group_id, reward, success, action_pattern, policy, meta->>'tokens' "
        "FROM trajectories ORDER BY task_id, reward DESC"
    ).fetchall()
    assert got == [
        ("a", 1, "a@1", 1.0, None, "ls", None, None),
        ("a", 1, "a@1", 0.0, False, None, "ckpt-1", "12"),
        ("b", 2, "g-b", 0.5, None, None, None, None),
    ]
    again = store.ingest_trajectories(path)
    assert (again.records, again.added, again.skipped) == (3, 0, 3)
    assert store.scalar("SELECT count(*) FROM trajectories") == 3
    assert store.execute("SELECT kind, records, added FROM ingests WHERE kind = 'trajectories' "
                         "ORDER BY ingest_id").fetchall() == [("trajectories", 3, 3), ("trajectories", 3, 0)]


def test_identical_rollouts_in_one_group_stay_distinct(store, jsonl):
    same = {"task_id": "a", "step": 1, "reward": 1.0}
    store.ingest_trajectories(jsonl([same, same, same]))
    assert store.scalar("SELECT count(DISTINCT trajectory_id) FROM trajectories") == 3
    # the same rollouts in another file are recognised and not added again
    assert store.ingest_trajectories(jsonl([same, same, same, same])).added == 1


def test_given_trajectory_ids_are_kept(store, jsonl):
    store.ingest_trajectories(jsonl([{**GOOD[0], "trajectory_id": "r-1"}]))
    assert store.scalar("SELECT trajectory_id FROM trajectories") == "r-1"
    assert store.ingest_trajectories(jsonl([{**GOOD[0], "trajectory_id": "r-1"}])).added == 0  # the same record


def test_parquet_with_nested_and_json_text_columns(store, tmp_path):
    table = pa.table({
        "task_id": ["a", "a"], "step": pa.array([3, 3], pa.int32()), "reward": [1, 0],
        "actions": [[{"name": "cd", "arguments": {"folder": "x"}}, {"name": "cd", "arguments": {"folder": "y"}}],
                    []],
        "meta": ['{"k": 1}', None],
    })
    path = tmp_path / "rollouts.parquet"
    pq.write_table(table, path)
    report = store.ingest_trajectories(path)
    assert (report.format, report.added) == ("parquet", 2)
    got = store.execute("SELECT step, reward, action_pattern, json_type(meta) FROM trajectories ORDER BY reward").fetchall()
    assert got == [(3, 0.0, "", None), (3, 1.0, "cd", "OBJECT")]
    assert store.ingest_trajectories(path).added == 0


def test_saved_dataset(store, tmp_path):
    import datasets

    ds = datasets.Dataset.from_list([{"task_id": "a", "step": 0, "reward": 0.25}, {"task_id": "b", "step": 0, "reward": 1.0}])
    ds.save_to_disk(str(tmp_path / "ds"))
    report = store.ingest_trajectories(tmp_path / "ds")
    assert (report.format, report.added) == ("dataset", 2)
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(IngestError, match="several splits"):
        store.ingest_trajectories(tmp_path / "dd")


def test_tasks_ingest_and_immutability(store, jsonl):
    task = {"task_id": "t1", "env": "bfcl", "prompt": "do it", "spec": {"turns": [["do it"]]}, "source": "test"}
    assert store.ingest_tasks(jsonl([task])).added == 1
    assert store.ingest_tasks(jsonl([task])).added == 0
    before = snapshot(store)
    with pytest.raises(IngestError) as info:
        store.ingest_tasks(jsonl([{"task_id": "t0"}, {**task, "prompt": "changed"}], name="changed.jsonl"))
    assert "changed.jsonl, line 2, field 'task_id'" in str(info.value)
    assert "different content" in str(info.value)
    assert snapshot(store) == before


BAD_LINES = [
    # (lines of the file, expected location, expected field, words in the message)
    (['{"task_id": "a", "step": 1, "reward": 1}', '{"task_id": "a", "step": 1, "reward": '], "line 2", None, "not valid JSON"),
    (['{"task_id": "a", "reward": 1}'], "line 1", "step", "required field is missing"),
    (['{"task_id": "a", "step": "3", "reward": 1}'], "line 1", "step", "expected an integer, got str"),
    (['{"task_id": "a", "step": 1.5, "reward": 1}'], "line 1", "step", "expected an integer, got float"),
    (['{"task_id": 7, "step": 1, "reward": 1}'], "line 1", "task_id", "expected a string"),
    (['{"task_id": "a", "step": 1, "reward": true}'], "line 1", "reward", "expected a number, got bool"),
    (['', '{"task_id": "a", "step": 1, "reward": 1.5}'], "line 2", "reward", "1.5 is outside [0, 1]"),
    (['{"task_id": "a", "step": 1, "reward": -0.1}'], "line 1", "reward", "outside [0, 1]"),
    (['{"task_id": "a", "step": 1, "reward": 1, "rewrad": 1}'], "line 1", "rewrad", "unknown field"),
    (['[1, 2]'], "line 1", None, "expected a JSON object"),
    (['{"task_id": "", "step": 1, "reward": 1}'], "line 1", "task_id", "must not be empty"),
    (['{"task_id": "a", "step": 1, "reward": 1, "actions": {"name": "x"}}'], "line 1", "actions", "expected a list"),
    (['{"task_id": "a", "step": 1, "reward": 1}', '{"task_id": "a", "step": 1, "reward": 1, "actions": [{"arguments": {}}]}'],
     "line 2", "actions", "each action must be an object"),
    (['{"task_id": "a", "step": 1, "reward": 1, "actions": [{"name": "x", "arguments": "a=1"}]}'],
     "line 1", "actions", "each action must be an object"),
    (['{"task_id": "a", "step": 1, "reward": 1, "meta": [1]}'], "line 1", "meta", "expected an object"),
    (['{"task_id": "a", "step": 1, "reward": 1, "group_id": "g"}', '{"task_id": "b", "step": 1, "reward": 1, "group_id": "g"}'],
     "line 1", "group_id", "a group is the rollouts of one task at one step"),
    (['{"task_id": "a", "step": 1, "reward": 1, "trajectory_id": "x"}', '{"task_id": "a", "step": 2, "reward": 0, "trajectory_id": "x"}'],
     "line 2", "trajectory_id", "appears more than once"),
]


@pytest.mark.parametrize("lines, location, field, words", BAD_LINES)
def test_bad_jsonl_is_rejected_whole_and_named(store, jsonl, tmp_path, lines, location, field, words):
    store.ingest_trajectories(jsonl([GOOD[0]]))
    before = snapshot(store)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(IngestError) as info:
        store.ingest_trajectories(path)
    error = info.value
    assert error.path == str(path) and error.location == location and error.field == field
    assert words in str(error)
    assert str(error).startswith(f"{path}, {location}")
    assert snapshot(store) == before


def test_group_conflicting_with_the_store(store, jsonl):
    store.ingest_trajectories(jsonl([{"task_id": "a", "step": 1, "reward": 1, "group_id": "g"}]))
    before = snapshot(store)
    with pytest.raises(IngestError, match="group 'g' would hold rollouts of tasks"):
        store.ingest_trajectories(jsonl([{"task_id": "a", "step": 2, "reward": 1, "group_id": "g"}]))
    assert snapshot(store) == before


@pytest.mark.parametrize("columns, field, words", [
    ({"task_id": ["a"], "reward": [1.0]}, "step", "required column is missing"),
    ({"task_id": ["a"], "step": ["1"], "reward": [1.0]}, "step", "type VARCHAR"),
    ({"task_id": ["a"], "step": [1], "reward": [1.0], "score": [1]}, "score", "unknown column"),
])
def test_bad_parquet_columns(store, tmp_path, columns, field, words):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    before = snapshot(store)
    with pytest.raises(IngestError) as info:
        store.ingest_trajectories(path)
    assert info.value.field == field and words in str(info.value)
    assert snapshot(store) == before


def test_bad_parquet_value_names_the_row(store, tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"task_id": ["a", "a", None], "step": [1, 1, 1], "reward": [0.5, 2.0, 1.0]}), path)
    with pytest.raises(IngestError) as info:
        store.ingest_trajectories(path)
    assert (info.value.location, info.value.field) == ("row 3", "task_id")
    pq.write_table(pa.table({"task_id": ["a", "a"], "step": [1, 1], "reward": [0.5, 2.0]}), path)
    with pytest.raises(IngestError) as info:
        store.ingest_trajectories(path)
    assert (info.value.location, info.value.field) == ("row 2", "reward")
    assert store.scalar("SELECT count(*) FROM trajectories") == 0


@pytest.mark.parametrize("name, words", [
    ("rollouts.csv", "unknown file format '.csv'"),
    ("rollouts", "unknown file format '(no extension)'"),
])
def test_unknown_format(store, tmp_path, name, words):
    path = tmp_path / name
    path.write_text("task_id,step,reward\na,1,1\n")
    with pytest.raises(IngestError, match=words.replace("(", r"\(").replace(")", r"\)")):
        store.ingest_trajectories(path)


def test_missing_file_and_corrupt_parquet(store, tmp_path):
    with pytest.raises(IngestError, match="no such file"):
        store.ingest_trajectories(tmp_path / "nope.jsonl")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(IngestError, match="cannot read as Parquet"):
        store.ingest_trajectories(corrupt)
    assert store.scalar("SELECT count(*) FROM ingests WHERE kind = 'trajectories'") == 0


def test_read_only_store_refuses_ingest(db_path, jsonl):
    from coevolve_engine.core.store import Store

    Store(db_path).close()
    with Store(db_path, read_only=True) as store:
        with pytest.raises(IngestError, match="read-only"):
            store.ingest_trajectories(jsonl(GOOD))


def test_in_memory_records_share_the_checks(store):
    report = store.add_records("trajectories", GOOD, label="rollout batch 1")
    assert (report.format, report.added) == ("records", 3)
    assert store.add_records("trajectories", GOOD, label="rollout batch 1").added == 0
    before = snapshot(store)
    with pytest.raises(IngestError) as info:
        store.add_records("trajectories", [GOOD[0], {"task_id": "a", "step": 1, "reward": float("nan")}],
                          label="rollout batch 2")
    assert str(info.value).startswith("rollout batch 2, record 2, field 'reward'")
    with pytest.raises(IngestError, match="record 1, field 'meta': not representable as JSON"):
        store.add_records("trajectories", [{**GOOD[0], "meta": {"x": float("inf")}}], label="b")
    assert snapshot(store) == before


def test_json_key_order_is_kept(store, jsonl):
    # an environment may read the first key of an object as meaningful (BFCL's file system loads the first
    # directory under its root), so stored JSON keeps the order it was written in
    spec = {"root": {"zeta": {"type": "directory"}, "alpha": {"type": "directory"}}}
    store.ingest_tasks(jsonl([{"task_id": "t", "spec": spec}]))
    stored = json.loads(store.scalar("SELECT CAST(spec AS VARCHAR) FROM tasks WHERE task_id = 't'"))
    assert list(stored["root"]) == ["zeta", "alpha"]
    store.add_records("tasks", [{"task_id": "u", "spec": spec}])
    assert list(json.loads(store.scalar("SELECT CAST(spec AS VARCHAR) FROM tasks WHERE task_id = 'u'"))["root"]) == [
        "zeta", "alpha"]


def test_a_bad_record_before_a_line_that_is_not_json_is_named_first(store, tmp_path):
    # lines are reported in file order, whatever is wrong with them
    path = tmp_path / "order.jsonl"
    path.write_text('{"task_id": "a", "step": 1, "reward": 1}\n{"task_id": "a", "step": "x", "reward": 1}\n'
                    '{"task_id": "a", "step": 1, "reward": \n', encoding="utf-8")
    with pytest.raises(IngestError) as info:
        store.ingest_trajectories(path)
    assert (info.value.location, info.value.field) == ("line 2", "step")
