"""A readable summary of the signals in a store. Every figure comes from one SQL query over the views,
kept beside it so that it can be recomputed with `coevolve-engine query`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.core.store import Store
from coevolve_engine.signals.snapshot import signal_snapshot


TOTALS_SQL = """
SELECT
    (SELECT count(*) FROM tasks) AS tasks,
    (SELECT count(DISTINCT task_id) FROM trajectories) AS attempted_tasks,
    (SELECT count(*) FROM trajectories) AS trajectories,
    (SELECT count(DISTINCT group_id) FROM trajectories) AS groups,
    (SELECT min(step) FROM trajectories) AS first_step,
    (SELECT max(step) FROM trajectories) AS last_step
"""

SIGNALS_SQL = """
WITH flags AS (SELECT * FROM flagged_trajectories_with(threshold := $threshold, w := $w, theta := $theta,
                                                       min_n := $min_n, forgetting_form := $forgetting_form))
SELECT s.signal,
       count(f.trajectory_id) AS flags,
       count(f.trajectory_id) FILTER (WHERE f.step = (SELECT max(step) FROM trajectories)) AS at_last_step
FROM (VALUES ('forgetting'), ('boundary'), ('rare')) AS s(signal)
LEFT JOIN flags AS f USING (signal)
GROUP BY s.signal
ORDER BY array_position(['forgetting', 'boundary', 'rare'], s.signal)
"""

FLAGGED_SQL = """
SELECT count(DISTINCT trajectory_id) AS flagged_trajectories
FROM flagged_trajectories_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                               forgetting_form := $forgetting_form)
"""

DETAIL_SQL = """
SELECT
    (SELECT count(*) FROM forgetting_with(w := $w, threshold := $threshold)) AS forgetting_steps,
    (SELECT count(*) FROM forgetting_trajectories_with(w := $w, threshold := $threshold))
        AS forgetting_trajectories,
    (SELECT coalesce(sum(forgetting_events), 0) FROM forgetting_events_with(threshold := $threshold))
        AS forgetting_events,
    (SELECT count(*) FROM forgetting_events_with(threshold := $threshold) WHERE forgetting_events > 0)
        AS tasks_that_forgot,
    (SELECT count(*) FROM boundary_with(threshold := $threshold)) AS boundary_groups,
    (SELECT count(*) FROM rare_patterns_with(theta := $theta, min_n := $min_n)) AS patterns,
    (SELECT count(*) FROM rare_patterns_with(theta := $theta, min_n := $min_n) WHERE rare) AS rare_patterns
"""

TOP_FORGETTING_SQL = """
SELECT rank, task_id, lost, step, level_before, level_after, steps_down, forgetting_events, forgetting_flags
FROM forgetting_tasks_with(w := $w, threshold := $threshold)
ORDER BY rank
LIMIT $top
"""

TOP_BOUNDARY_SQL = """
SELECT task_id, boundary_groups, groups, boundary_share, latest_score
FROM task_signals_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n)
WHERE boundary_groups > 0
ORDER BY boundary_share DESC, boundary_groups DESC, task_id
LIMIT $top
"""

RARE_SQL = """
SELECT action_pattern, trajectories, round(100 * share, 2) AS share_pct, rare_trajectories, first_step, last_step
FROM rare_patterns_with(theta := $theta, min_n := $min_n)
WHERE rare_trajectories > 0
ORDER BY share, action_pattern
LIMIT $top
"""


@dataclass
class SignalSummary:
    params: SignalParams
    totals: dict
    detail: dict
    flagged_trajectories: int
    by_signal: pl.DataFrame
    top_forgetting: pl.DataFrame
    top_boundary: pl.DataFrame
    rare: pl.DataFrame
    queries: dict[str, str] = field(default_factory=dict)


def _used(sql: str, values: dict) -> dict:
    """The parameters that ``sql`` refers to (DuckDB refuses unused ones)."""
    names = set(re.findall(r"\$(\w+)", sql))
    return {name: value for name, value in values.items() if name in names}


def summarise(store: Store, params: SignalParams | None = None, top: int = 5) -> SignalSummary:
    """Compute the summary that `coevolve-engine signals` prints."""
    params = params or SignalParams()
    values = {**params.bind(), "top": top}

    def frame(sql: str) -> pl.DataFrame:
        return store.sql(sql, _used(sql, values))

    with signal_snapshot(store, params):  # the queries below share one pass over the trajectories
        return _collect(store, params, frame, values)


def _collect(store: Store, params: SignalParams, frame, values: dict) -> SignalSummary:
    return SignalSummary(
        params=params,
        totals=frame(TOTALS_SQL).row(0, named=True),
        detail=frame(DETAIL_SQL).row(0, named=True),
        flagged_trajectories=store.scalar(FLAGGED_SQL, _used(FLAGGED_SQL, values)),
        by_signal=frame(SIGNALS_SQL),
        top_forgetting=frame(TOP_FORGETTING_SQL),
        top_boundary=frame(TOP_BOUNDARY_SQL),
        rare=frame(RARE_SQL),
        queries={
            "totals": TOTALS_SQL, "by_signal": SIGNALS_SQL, "flagged": FLAGGED_SQL, "detail": DETAIL_SQL,
            "top_forgetting": TOP_FORGETTING_SQL, "top_boundary": TOP_BOUNDARY_SQL, "rare": RARE_SQL,
        },
    )
