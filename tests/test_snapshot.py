"""A signal snapshot changes how fast the views are computed, never what they return."""

from __future__ import annotations

import random

import duckdb
import pytest

from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.signals.snapshot import signal_snapshot
from coevolve_engine.core.store import Store
from test_views_reference import _normalise, _random_records

VIEWS = ("task_steps", "group_outcomes", "forgetting", "forgetting_events", "boundary", "pattern_steps",
         "rare_patterns", "rare_trajectories", "flagged_trajectories", "task_signals")


def _all(store: Store, params: SignalParams) -> dict:
    bound = f"threshold := {params.threshold}, w := {params.w}, theta := {params.theta}, min_n := {params.min_n}"
    queries = {view: f"SELECT * FROM {view}" for view in VIEWS}
    queries["flagged_with"] = f"SELECT * FROM flagged_trajectories_with({bound})"
    queries["task_signals_with"] = f"SELECT * FROM task_signals_with({bound})"
    queries["forgetting_with"] = f"SELECT * FROM forgetting_with(w := {params.w}, threshold := {params.threshold})"
    return {name: _normalise(store.execute(sql).fetchall()) for name, sql in queries.items()}


@pytest.mark.parametrize("read_only", [False, True])
def test_snapshot_returns_what_the_views_return(db_path, jsonl, read_only):
    with Store(db_path) as store:
        store.ingest_trajectories(jsonl(_random_records(random.Random(5), n_tasks=15, steps=8)), create_tasks=True)
    params = SignalParams(threshold=0.5, w=2, theta=20, min_n=10)
    with Store(db_path, read_only=read_only) as store:
        before = _all(store, params)
        defaults = _all(store, SignalParams())
        with signal_snapshot(store, params):
            assert store.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'snapshot_%'").fetchall()[0][0] > 0
            # views at default parameters are the macros at default parameters: only the matching calls work
            inside = {name: _normalise(store.execute(sql).fetchall()) for name, sql in (
                ("flagged_with", "SELECT * FROM flagged_trajectories_with(threshold := 0.5, w := 2, theta := 20, min_n := 10)"),
                ("task_signals_with", "SELECT * FROM task_signals_with(threshold := 0.5, w := 2, theta := 20, min_n := 10)"),
                ("forgetting_with", "SELECT * FROM forgetting_with(w := 2, threshold := 0.5)"),
            )}
            with pytest.raises(duckdb.Error, match="other parameters than the signal snapshot"):
                store.execute("SELECT * FROM forgetting_with(w := 3)").fetchall()
        for name, rows in inside.items():
            assert rows == before[name], name
        assert _all(store, params) == before  # after the block the stored definitions apply again
        assert _all(store, SignalParams()) == defaults


def test_snapshot_at_default_parameters_serves_every_view(store, jsonl):
    store.ingest_trajectories(jsonl(_random_records(random.Random(8), n_tasks=10, steps=6)), create_tasks=True)
    expected = _all(store, SignalParams())
    with signal_snapshot(store):
        assert _all(store, SignalParams()) == expected
