"""Vectorized ingest: JSON lines read by DuckDB, and the actions check in one parse, give exactly what the
record-by-record reader and the exact check give: the same stored rows (content-hash ids and JSON text
included), so a file ingested before is still recognised, and the same errors."""

from __future__ import annotations

import json
import random

import duckdb
import pytest

from coevolve_engine import ingest, ingest_sources
from coevolve_engine.errors import IngestError
from coevolve_engine.records import TRAJECTORY_FIELDS
from coevolve_engine.store import Store

TASKS = [{"task_id": t} for t in ("a", "b", "c")]

# Lines DuckDB reads, lines it leaves to Python (duplicate keys, exponents, long numbers, \u escapes), and
# JSON texts only the written-back form distinguishes (key order, spacing, unicode, escapes).
TRICKY = [
    '{"task_id": "a", "step": 1, "reward": 1}',
    '{"task_id":"a","step":1,"reward":0.25,"actions":[{"name":"ls","arguments":{"path":"."}}]}',
    '  {"task_id": "a", "step": 1, "reward": 0.5, "meta": {"z": 1, "a": [1, 2.5, -0.0, true, null]}}\r',
    '{"task_id": "b", "step": 2, "reward": 0, "messages": [{"role": "user", "content": "line\\none \\"quoted\\" \\\\ tab\\t é 😀 \\u00e9 a, b: c"}]}',
    '{"task_id": "b", "step": 2, "reward": 0, "meta": {"x": 1, "x": 2, "y": {"k": 1, "k": [3]}}}',
    '{"task_id": "b", "step": 2, "reward": 0, "step": 3}',
    '{"task_id": "b", "step": 2, "reward": 1e-1, "meta": {"small": 1e-05, "big": 1e16, "long": 12345678901234567890, "f": 0.00001}}',
    '{"task_id": "c", "step": 4, "reward": 1, "meta": {"ctl": "\\u0001\\u001f", "slash": "a\\/b", "del": "\x7f"}}',
    '{"task_id": "c", "step": 4, "reward": 1, "actions": [], "messages": [], "meta": {}}',
    '{"task_id": "c", "step": 4, "reward": 1, "meta": {"nested": [[], {}, [{"a": {"b": [1, {"c": "info, inf"}]}}]]}}',
    '{"task_id": "c", "step": 5, "reward": 1.0, "success": true, "policy": "p@1", "error": "timeout", "group_id": "g5"}',
    '{"task_id": "c", "step": 5, "reward": 1.0, "success": true, "policy": "p@1", "error": "timeout", "group_id": "g5"}',
    '{"task_id": "a", "step": 9007199254740991, "reward": 1, "trajectory_id": "given-1", "meta": {"call_1e2f": 1.5}}',
    '',
    '   ',
    '{"task_id": "a", "step": 6, "reward": 0.1, "actions": [{"name": "x", "arguments": null}, {"name": "y"}]}',
]


def _stored(path):
    with Store(path, read_only=True) as store:
        return store.execute(
            "SELECT trajectory_id, task_id, step, group_id, reward, success, action_pattern, CAST(actions AS VARCHAR), "
            "CAST(messages AS VARCHAR), policy, CAST(meta AS VARCHAR), error, ingest_line FROM trajectories ORDER BY ALL"
        ).fetchall()


def _ingest(path, lines, *, exact: bool, monkeypatch, name="rollouts.jsonl"):
    """Ingest ``lines`` into the store at ``path``; ``exact``: with the record-by-record reader only."""
    with monkeypatch.context() as patch:
        if exact:
            patch.setattr(ingest_sources, "_read_jsonl_sql", lambda path, fields: None)
        file = path.parent / name
        file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with Store(path) as store:
            if not store.scalar("SELECT count(*) FROM tasks"):
                store.add_records("tasks", TASKS, label="tasks")
            return store.ingest_trajectories(file)


def test_duckdb_reader_stores_what_the_python_reader_stores(tmp_path, monkeypatch):
    fast, exact = tmp_path / "fast" / "s.duckdb", tmp_path / "exact" / "s.duckdb"
    fast.parent.mkdir()
    exact.parent.mkdir()
    a = _ingest(fast, TRICKY, exact=False, monkeypatch=monkeypatch)
    b = _ingest(exact, TRICKY, exact=True, monkeypatch=monkeypatch)
    assert (a.records, a.added) == (b.records, b.added) == (14, 14)
    assert _stored(fast) == _stored(exact)


def test_some_lines_go_to_python_and_the_rest_stay_in_duckdb(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(TRICKY) + "\n", encoding="utf-8")
    table = ingest_sources._read_jsonl_sql(path, TRAJECTORY_FIELDS)
    assert table is not None and table.num_rows == 14
    assert table.column("_line").to_pylist() == [n for n, line in enumerate(TRICKY, start=1) if line.strip()]
    meta = dict(zip(table.column("_line").to_pylist(), table.column("meta").to_pylist()))
    assert meta[5] == '{"x": 2, "y": {"k": [3]}}'  # duplicate keys: Python's reading, the last one kept
    assert meta[7] == '{"small": 1e-05, "big": 1e+16, "long": 12345678901234567890, "f": 1e-05}'
    assert meta[3] == '{"z": 1, "a": [1, 2.5, -0.0, true, null]}'


def test_a_file_ingested_by_the_record_by_record_reader_is_recognised(tmp_path, monkeypatch):
    """Re-ingesting a file the old reader ingested adds nothing: the content-hash ids are the same."""
    path = tmp_path / "s.duckdb"
    first = _ingest(path, TRICKY, exact=True, monkeypatch=monkeypatch)
    again = _ingest(path, TRICKY, exact=False, monkeypatch=monkeypatch)
    assert (first.added, again.added, again.skipped) == (14, 0, 14)


def test_random_records_agree(tmp_path, monkeypatch):
    rng = random.Random(7)
    words = ["ls", "cd", "a, b", "c: d", "é", "\n", '"', "\\", "inf", "1e5", "x" * 30]

    def value(depth=0):
        kind = rng.randrange(9 if depth < 3 else 5)
        if kind == 0:
            return rng.randint(-10**6, 10**6)
        if kind == 1:
            return rng.choice([rng.random(), rng.uniform(-1e6, 1e6), 10 ** rng.uniform(-8, 20), 0.5, 1.0])
        if kind == 2:
            return rng.choice(words) + rng.choice(words)
        if kind == 3:
            return rng.choice([True, False, None])
        if kind == 4:
            return rng.choice(words)
        if kind in (5, 6):
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(words): value(depth + 1) for _ in range(rng.randrange(4))}

    lines = []
    for i in range(300):
        record = {"task_id": rng.choice("abc"), "step": rng.randrange(5), "reward": rng.choice([0, 1, 0.5, rng.random()]),
                  "meta": {"v": value()},
                  "actions": [{"name": rng.choice(words), "arguments": {"k": value()}} for _ in range(rng.randrange(3))],
                  "messages": [{"role": "user", "content": value()}]}
        separators = rng.choice([(",", ":"), (", ", ": ")])
        lines.append(json.dumps(record, separators=separators, ensure_ascii=rng.random() < 0.5))
    fast, exact = tmp_path / "fast" / "s.duckdb", tmp_path / "exact" / "s.duckdb"
    fast.parent.mkdir()
    exact.parent.mkdir()
    assert _ingest(fast, lines, exact=False, monkeypatch=monkeypatch).added == _ingest(
        exact, lines, exact=True, monkeypatch=monkeypatch).added
    assert _stored(fast) == _stored(exact)
    assert ingest_sources._read_jsonl_sql(fast.parent / "rollouts.jsonl", TRAJECTORY_FIELDS) is not None  # read by DuckDB


@pytest.mark.parametrize("bad_line, location, field, words", [
    ('{"task_id": "a", "step": 1, "reward": 1,}', "line 2", None, "not valid JSON"),  # DuckDB would accept it
    ('{"task_id": "a", "step": 1, "reward": 1, "meta": {"x": NaN}}', "line 2", "meta", "not representable as JSON"),
    ('{"task_id": "a", "step": 1, "reward": NaN}', "line 2", "reward", "outside [0, 1]"),
    ('{"task_id": "a", "step": 1, "reward": 1, "meta": {"x": [1,]}}', "line 2", None, "not valid JSON"),
    ('{"task_id": "a", "step": 1, "reward": 1, "meta": {"x": nan}}', "line 2", None, "not valid JSON"),
    ('{"task_id": "a", "step": 1e0, "reward": 1}', "line 2", "step", "expected an integer, got float"),
    ('{"task_id": "a", "step": 9007199254740992, "reward": 1}', "line 2", "step", "is outside [0, 9007199254740991]"),
    ('{"task_id": "a", "step": 1, "reward": 1, "policy": 3}', "line 2", "policy", "expected a string"),
])
def test_lines_duckdb_would_read_differently_get_the_exact_error(tmp_path, monkeypatch, bad_line, location, field,
                                                                 words):
    path = tmp_path / "s.duckdb"
    lines = [TRICKY[0], bad_line]
    with pytest.raises(IngestError) as fast:
        _ingest(path, lines, exact=False, monkeypatch=monkeypatch, name="bad.jsonl")
    with pytest.raises(IngestError) as exact:
        _ingest(path, lines, exact=True, monkeypatch=monkeypatch, name="bad.jsonl")
    assert str(fast.value) == str(exact.value)
    assert (fast.value.location, fast.value.field) == (location, field) and words in str(fast.value)
    assert _stored(path) == []


def test_a_line_only_python_reads_sends_the_file_to_python(tmp_path, monkeypatch):
    """A UTF-8 byte order mark before a line: DuckDB refuses it, Python's reader has always read it."""
    fast, exact = tmp_path / "fast" / "s.duckdb", tmp_path / "exact" / "s.duckdb"
    fast.parent.mkdir()
    exact.parent.mkdir()
    lines = [TRICKY[0], '\ufeff{"task_id": "a", "step": 1, "reward": 1}']
    assert _ingest(fast, lines, exact=False, monkeypatch=monkeypatch).added == 2
    _ingest(exact, lines, exact=True, monkeypatch=monkeypatch)
    assert _stored(fast) == _stored(exact)


ACTIONS = [
    None, "[]", '[{"name": "a", "arguments": {"x": 1}}]', '[{"name": "a"}]', '[{"name": "a", "arguments": null}]',
    '["s"]', "[1]", "[[1]]", "[null]", '[{"name": 3}]', '[{"name": null}]', '[{"arguments": {}}]',
    '[{"name": "a", "arguments": "x"}]', '[{"name": "a", "arguments": []}]', '[{"name": 3, "name": "b"}]',
    '[{"name": "b", "name": 3}]', '[{"name": "a", "arguments": {}, "arguments": 1}]', '{"name": "a"}', "[1,",
    "not json", "null", '[{"name": "a", "arguments": {"deep": [1, {"x": [2]}]}, "extra": true}]', "  [ ]",
]


def test_the_one_parse_actions_check_flags_every_action_the_exact_check_flags():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest($a) AS actions", {"a": ACTIONS})
    rows = con.execute(f"SELECT actions, {ingest._SUSPECT_ACTION}, {ingest._BAD_ACTION} FROM t").fetchall()
    for actions, suspect, bad in rows:
        assert bool(suspect) == bool(bad) or (suspect and not bad), actions
    assert sum(bool(bad) for _, _, bad in rows) == 10


def test_a_file_name_duckdb_would_read_as_a_pattern_is_read_by_python(tmp_path):
    """read_text takes '*', '?', '[...]' as a glob: 'r[12].jsonl' would read r1.jsonl and r2.jsonl instead."""
    for name in ("r1.jsonl", "r2.jsonl", "r[12].jsonl"):
        (tmp_path / name).write_text(TRICKY[0] + "\n", encoding="utf-8")
    assert ingest_sources._read_jsonl_sql(tmp_path / "r[12].jsonl", TRAJECTORY_FIELDS) is None
    assert ingest_sources._read_jsonl_sql(tmp_path / "r1.jsonl", TRAJECTORY_FIELDS).num_rows == 1
    with Store(tmp_path / "s.duckdb") as store:
        store.add_records("tasks", TASKS, label="tasks")
        assert store.ingest_trajectories(tmp_path / "r[12].jsonl").added == 1
