"""The actions check in one parse (``ingest.staging._SUSPECT_ACTION``) flags every record the exact check
(``ingest.staging._BAD_ACTION``) flags, so running the exact check only on what it flags gives the same errors."""

from __future__ import annotations

import duckdb

from coevolve_engine.core.ingest import staging as ingest

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
