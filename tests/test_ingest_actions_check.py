"""The cheap checks that decide where an exact one runs flag every record the exact check flags: the actions
check in one parse (``_SUSPECT_ACTION`` before ``_BAD_ACTION``), and the search for duplicate JSON keys, NaN and
infinities in Parquet texts (``_MAYBE_AMBIGUOUS`` before the Python parse), so the errors are the same."""

from __future__ import annotations

import json

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


TEXTS = [
    '{"a": 1, "a": 2}', '{"a": 1, "b": {"c": 1, "c": 2}}', '[{"x": [{"k": 1, "k": 1}]}]', '{"a": 1, "\\u0061": 2}',
    '{"\\u00e9": 1, "é": 2}', '{"\\ud800": 1, "\\ud800": 2}', '{"a" :1,"a":2}', '{"a": NaN}', '[-Infinity]',
    '{"a": Infinity}', '{"a": 1, "A": 2}', '{"a": {"a": {"a": 1}}}', '{"k": "{\\"a\\": 1, \\"a\\": 2}"}',
    '{"note": "NaN is not a number"}', '{}', "[]", '[{"a": 1}, {"a": 2}]', '{"a": [1, {"b": 2, "c": {"b": 3}}]}',
    '{"a": 1,', "not json", '{"x": ' * 40 + "1" + "}" * 40, '{"x": ' * 39 + '{"y": 1, "y": 2}' + "}" * 39,
    '{"a": 1, "pad": "' + "x" * 70_000 + '", "a": 2}',  # too long for the search: parsed in Python
]


def test_the_duplicate_key_search_flags_every_text_the_python_parse_refuses():
    # the cheap predicate of the Parquet texts' check runs on every text; the Python parse only on what it flags
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest($t) AS meta", {"t": TEXTS})
    rows = con.execute(f"SELECT meta, {ingest._MAYBE_AMBIGUOUS.format(c='meta')} FROM t").fetchall()
    flagged = {text for text, cheap in rows if cheap}
    # every text that is JSON to Python and that the parse refuses (a text that is not JSON fails the field's
    # list or object check first, whatever this one says)
    refused = {text for text in TEXTS if is_json(text) and ingest._ambiguous_json(text)}
    assert refused <= flagged, sorted(refused - flagged)
    assert len(refused) == 12  # the duplicates (escaped, unpaired surrogates, deep, long), NaN, the infinities
    # and an object with no duplicate key and no constant is not flagged: the parse is not run on it
    plain = {'{"a": 1, "A": 2}', '{"a": {"a": {"a": 1}}}', '[{"a": 1}, {"a": 2}]', '{"a": [1, {"b": 2, "c": {"b": 3}}]}',
             '{"k": "{\\"a\\": 1, \\"a\\": 2}"}', "{}", '{"x": ' * 40 + "1" + "}" * 40}
    assert not plain & flagged, sorted(plain & flagged)


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
