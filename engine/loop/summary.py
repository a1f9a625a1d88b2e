"""What a run shows: the per-round table, each phase's one-line description and the totals they are built from.

Every figure is a query on the store (``run_rounds_with``, ``flagged_trajectories_with``,
``scored_trajectories``) at the run's signal constants, so ``coevolve-engine query`` recomputes it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from coevolve_engine.loop.config import RunConfig
from coevolve_engine.display.loop_cost import PAPER_COST, loop_cost_numbers, percent
from coevolve_engine.core.store import Store

ROUND_SIGNALS_SQL = """
SELECT signal, count(DISTINCT trajectory_id) AS trajectories, count(DISTINCT task_id) AS tasks
FROM flagged_trajectories_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                               forgetting_form := $forgetting_form)
WHERE step BETWEEN $first AND $last
GROUP BY signal ORDER BY signal
"""
ROUND_TOTALS_SQL = """
SELECT count(*) AS rollouts, count(DISTINCT group_id) AS groups, count(DISTINCT task_id) AS tasks,
       avg(CASE WHEN coalesce(success, reward >= $threshold) THEN 1.0 ELSE 0.0 END) AS success_rate,
       (SELECT count(DISTINCT trajectory_id)
        FROM flagged_trajectories_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                                       forgetting_form := $forgetting_form)
        WHERE step BETWEEN $first AND $last) AS flagged
FROM scored_trajectories WHERE step BETWEEN $first AND $last
"""


def to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


ROUNDS_SQL = """
SELECT round, status, first_step || '..' || last_step AS steps, rollouts, round(train_success, 3) AS train_success,
       round(start_eval, 3) AS start_eval, round(eval_success, 3) AS eval_success, forgetting, boundary, rare,
       patterns, accepted || '/' || candidates AS accepted, train_tasks,
       round(training_seconds, 1) AS train_s, round(feedback_seconds, 1) AS feedback_s,
       round(100 * feedback_share, 1) AS "feedback_%"
FROM run_rounds_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                     forgetting_form := $forgetting_form)
"""


def rounds_table(store: Store, config: RunConfig):
    """One row per round of the run, from the run_rounds_with macro at the run's signal constants."""
    return store.sql(ROUNDS_SQL, config.signal_params().bind())


def loop_cost(store: Store) -> str:
    """One line on what the feedback loop cost against training, over the finished rounds (round_costs; the one
    definition and label of ``coevolve_engine.display.loop_cost``, as the report's headline shows it)."""
    n = loop_cost_numbers(store)
    if not n["rounds"]:
        return "Loop cost: no finished round with training yet"
    return (f"Loop cost: feedback {n['feedback']:.1f} s against training {n['training']:.1f} s over {n['rounds']} "
            f"rounds: {percent(n['feedback'], n['training'])} (rounds {100 * n['lowest']:.1f}-"
            f"{100 * n['highest']:.1f}%; store writes during training {n['store']:.1f} s, counted as feedback; "
            f"{PAPER_COST})")


ROUND_LINE_SQL = """
SELECT r.round, r.rollouts, r.train_success, r.start_eval, r.eval_success, r.forgetting, r.boundary, r.rare,
       r.patterns, r.candidates, r.accepted, r.train_tasks,
       (SELECT sum(seconds) FROM run_phases AS p WHERE p.round = r.round) AS seconds
FROM run_rounds_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                     forgetting_form := $forgetting_form) AS r
WHERE r.round = $round
"""


def round_line(store: Store, config: RunConfig, round_: int) -> str:
    """The one line that closes a round: held-out success, flags per signal, patterns, accepted candidates and
    the task set, from ``run_rounds_with`` at the run's signal constants (``ROUND_LINE_SQL``)."""
    cursor = store.execute(ROUND_LINE_SQL, {**config.signal_params().bind(), "round": round_})
    rows = cursor.fetchall()
    if not rows:
        return f"round {round_} finished"
    r = dict(zip([c[0] for c in cursor.description], rows[0]))
    for rate in ("start_eval", "eval_success"):  # rounded as the eval phase's line rounds them, so the two agree
        r[rate] = None if r[rate] is None else round(float(r[rate]), 4)
    held = "held-out -"
    if r["eval_success"] is not None:
        start = f"{pct(r['start_eval'])} -> " if r["start_eval"] is not None else ""
        held = f"held-out {start}{pct(r['eval_success'])}"
    flags = f"flagged forgetting {r['forgetting'] or 0}, boundary {r['boundary'] or 0}, rare {r['rare'] or 0}"
    feedback = (f"; {r['patterns'] or 0} patterns, {r['accepted'] or 0}/{r['candidates'] or 0} candidates accepted"
                if r["candidates"] is not None or r["patterns"] else "")
    tasks = f"; {r['train_tasks']} training tasks" if r["train_tasks"] is not None else ""
    took = f" in {r['seconds']:.0f} s" if r["seconds"] is not None else ""
    return (f"round {round_} finished{took}: {held}, train success {pct(r['train_success'])} over "
            f"{r['rollouts'] or 0} rollouts; {flags}{feedback}{tasks}")


def round_totals(store: Store, config: RunConfig, first: int, last: int) -> dict[str, Any]:
    params = config.signal_params()
    cursor = store.execute(ROUND_TOTALS_SQL, {**params.bind(), "first": first, "last": last})
    names = [c[0] for c in cursor.description]
    totals = dict(zip(names, cursor.fetchall()[0]))
    if totals["success_rate"] is not None:
        totals["success_rate"] = round(float(totals["success_rate"]), 4)
    return totals


def plain_outputs(report: Any) -> dict[str, Any]:
    """A report object's scalar fields (and small lists and tables of them), for run_phases.outputs."""
    fields = dataclasses.asdict(report) if dataclasses.is_dataclass(report) else dict(vars(report))
    plain = json.loads(to_json(fields))
    return {k: v for k, v in plain.items() if not isinstance(v, (list, dict)) or len(to_json(v)) <= 2000}


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
