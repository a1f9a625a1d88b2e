"""Weight sets: a strategy's per-task weights for one round, written to ``task_weights`` and ``weight_sets`` in
one transaction, with a reason that says in words how they differ from the previous round's; and a fast
loader that returns a round's weights as numpy arrays for the sampler."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from coevolve_engine.core.weights import (  # the read side, shared with trainers
    WeightSet, check_weights, latest_round, load_weights)
from coevolve_engine.curriculum.strategy import CurriculumError, CurriculumStrategy, load_strategy
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.signals.snapshot import signal_snapshot
from coevolve_engine.core.store import Store

SIGNAL_COMPONENTS = ("forgetting", "boundary", "rare")

# How a new weight set (registered as new_weights) differs from round $prev; recompute it for two stored
# rounds by replacing new_weights with (SELECT * FROM task_weights WHERE round = R).
CHANGES_SQL = """
WITH new AS (SELECT task_id, weight, CAST(to_json(components) AS JSON) AS components FROM new_weights),
old AS (SELECT task_id, weight, components FROM task_weights WHERE round = $prev),
both_sides AS (
    SELECT coalesce(new.task_id, old.task_id) AS task_id,
           new.weight / sum(new.weight) OVER () AS p, old.weight / sum(old.weight) OVER () AS q,
           new.task_id IS NOT NULL AS in_new, old.task_id IS NOT NULL AS in_old,
           new.components AS new_c, old.components AS old_c
    FROM new FULL OUTER JOIN old USING (task_id)
),
mixed AS (SELECT *, (coalesce(p, 0) + coalesce(q, 0)) / 2 AS m FROM both_sides)
SELECT
    count(*) FILTER (WHERE in_new AND NOT in_old) AS added,
    count(*) FILTER (WHERE in_new AND NOT in_old AND task_id IN (SELECT task_id FROM tasks
                                                                WHERE source = 'synthesized')) AS added_synthesized,
    count(*) FILTER (WHERE in_old AND NOT in_new) AS removed,
    count(*) FILTER (WHERE in_new AND p = 0) AS zero_now,
    count(*) FILTER (WHERE in_old AND q = 0) AS zero_before,
    count(*) FILTER (WHERE in_new AND coalesce(CAST(new_c->>'forgetting' AS DOUBLE), 0) > 0
                     AND coalesce(CAST(old_c->>'forgetting' AS DOUBLE), 0) = 0) AS new_forgetting,
    count(*) FILTER (WHERE in_new AND coalesce(CAST(new_c->>'boundary' AS DOUBLE), 0) > 0
                     AND coalesce(CAST(old_c->>'boundary' AS DOUBLE), 0) = 0) AS new_boundary,
    count(*) FILTER (WHERE in_new AND coalesce(CAST(new_c->>'rare' AS DOUBLE), 0) > 0
                     AND coalesce(CAST(old_c->>'rare' AS DOUBLE), 0) = 0) AS new_rare,
    -- Jensen-Shannon divergence in bits: (KL(p || m) + KL(q || m)) / 2, m = (p + q) / 2; 0 log 0 = 0
    coalesce(sum(CASE WHEN p > 0 THEN p * log2(p / m) ELSE 0 END) / 2
             + sum(CASE WHEN q > 0 THEN q * log2(q / m) ELSE 0 END) / 2, 0) AS js_divergence
FROM mixed
"""


def _strategy(strategy: str | CurriculumStrategy, settings) -> CurriculumStrategy:
    if isinstance(strategy, CurriculumStrategy):
        if settings:
            raise CurriculumError("pass settings with a strategy name, or configure the strategy object itself")
        return strategy
    return load_strategy(strategy, settings)


def _checked(result_weights: pl.DataFrame, facts: pl.DataFrame, name: str) -> pl.DataFrame:
    """The strategy's rows, or an error naming what is wrong with them."""
    missing = {"task_id", "weight", "components"} - set(result_weights.columns)
    if missing:
        raise CurriculumError(f"strategy {name!r} returned no {', '.join(sorted(missing))} column; a strategy "
                              "returns task_id, weight and components")
    if result_weights.height != facts.height or not result_weights["task_id"].equals(facts["task_id"]):
        raise CurriculumError(f"strategy {name!r} must return one row per task in the order it got them "
                              f"({facts.height} tasks, got {result_weights.height} rows)")
    check_weights(dict(zip(result_weights["task_id"].to_list(), result_weights["weight"].cast(pl.Float64).to_numpy())),
                  what=f"strategy {name!r}", hint="; change its settings or use another strategy")
    return result_weights.with_columns(pl.col("weight").cast(pl.Float64))


def compute_weights(store: Store, round: int, strategy: str | CurriculumStrategy = "coevolve",
                    params: SignalParams | None = None, *, settings: dict[str, str] | None = None,
                    replace: bool = False, env: str | None = None) -> WeightSet:
    """Compute a round's weights with ``strategy`` at the signal constants ``params`` and store them, with the
    ``weight_sets`` row, in one transaction. An existing round is refused unless ``replace``. With ``env``
    (a run's environment) only that environment's training tasks are weighed, and the reason counts the others
    left out (a placeholder from `ingest trajectories --create-tasks`, another environment's tasks)."""
    if round < 0:
        raise CurriculumError(f"round must be >= 0, got {round}")
    params = params or SignalParams()
    chosen = _strategy(strategy, settings)
    existing = store.scalar("SELECT strategy FROM weight_sets WHERE round = $round", {"round": round})
    if existing is not None and not replace:
        raise CurriculumError(f"round {round} already has weights (strategy {existing}); pass replace=True "
                              "(--replace) to compute them again, or choose another round")
    if not store.scalar("SELECT count(*) FROM tasks WHERE split = 'train'"):
        raise CurriculumError("the store has no training tasks to weigh (eval tasks are never weighed); add some "
                              "with `coevolve-engine ingest tasks` or `coevolve-engine tasks import`")
    notes: tuple[str, ...] = ()
    with signal_snapshot(store, params):
        facts = chosen.facts(store, params)
        if env is not None:
            mine = [task_id for (task_id,) in store.execute(
                "SELECT task_id FROM tasks WHERE split = 'train' AND env = $env", {"env": env}).fetchall()]
            every = facts.height
            facts = facts.filter(pl.col("task_id").is_in(mine))
            if every > facts.height:
                notes = (f"{_tasks(every - facts.height)} not of environment {env} left out",)
            if not facts.height:
                raise CurriculumError(f"the store has no {env} training tasks to weigh")
        with np.errstate(over="ignore", invalid="ignore"):  # a weight that overflows is named by _checked
            result = chosen.weigh(facts)
    frame = _checked(result.weights, facts, chosen.name)
    stored_params = {"strategy": _config_dict(chosen), "signals": params.bind(), "recent": chosen.recent}
    step = store.scalar("SELECT max(step) FROM scored_trajectories")
    store.con.register("new_weights", frame.select("task_id", "weight", "components").to_arrow())
    try:
        previous = store.scalar("SELECT max(round) FROM weight_sets WHERE round < $round", {"round": round})
        reason = _reason(store, frame, previous, chosen.name, (*result.notes, *notes))
        with store.transaction() as con:
            con.execute("DELETE FROM task_weights WHERE round = $round", {"round": round})
            con.execute("DELETE FROM weight_sets WHERE round = $round", {"round": round})
            con.execute("INSERT INTO task_weights SELECT $round, task_id, weight, to_json(components), $strategy "
                        "FROM new_weights", {"round": round, "strategy": chosen.name})
            con.execute("INSERT INTO weight_sets (round, strategy, params, step, tasks, nonzero, reason) VALUES "
                        "($round, $strategy, $params, $step, $tasks, $nonzero, $reason)",
                        {"round": round, "strategy": chosen.name, "params": json.dumps(stored_params), "step": step,
                         "tasks": frame.height, "nonzero": int((frame["weight"] > 0).sum()), "reason": reason})
    finally:
        store.con.unregister("new_weights")
    return WeightSet(round, chosen.name, stored_params, step, reason, frame["task_id"].to_numpy(),
                     frame["weight"].to_numpy())


def _config_dict(strategy: CurriculumStrategy) -> dict:
    return dataclasses.asdict(strategy.config)


def _reason(store: Store, frame: pl.DataFrame, previous: int | None, strategy: str, notes) -> str:
    """Why these weights differ from round ``previous``'s (or from uniform, for the first set), in words."""
    changes = store.con.execute(CHANGES_SQL, {"prev": -1 if previous is None else previous}).fetchall()[0]
    (added, added_synth, removed, zero_now, zero_before, *flagged, js) = changes
    flagged = dict(zip(SIGNAL_COMPONENTS, flagged))
    parts: list[str] = []
    if previous is None:
        synthesized = store.scalar("SELECT count(*) FROM new_weights JOIN tasks USING (task_id) "
                                   "WHERE source = 'synthesized'")
        parts.append(f"first weight set ({strategy}): {_tasks(frame.height)}"
                     + (f" ({synthesized} synthesized)" if synthesized else ""))
        parts += [f"{_tasks(n)} flagged {signal}" for signal, n in flagged.items() if n]
        if zero_now:
            parts.append(f"{_tasks(zero_now)} at weight 0")
        uniform = _js_from_uniform(frame["weight"].to_numpy())
        parts.append(f"Jensen-Shannon divergence {uniform:.3g} from uniform")
    else:
        before = store.scalar("SELECT strategy FROM weight_sets WHERE round = $r", {"r": previous})
        if before != strategy:
            parts.append(f"strategy {before} -> {strategy}")
        if added:
            parts.append(f"{_tasks(added)} added" + (f" ({added_synth} synthesized)" if added_synth else ""))
        if removed:
            parts.append(f"{_tasks(removed)} removed")
        parts += [f"{_tasks(n)} newly flagged {signal}" for signal, n in flagged.items() if n]
        if zero_now != zero_before:
            parts.append(f"{_tasks(zero_now)} at weight 0 ({zero_before} before)")
        parts.append(f"Jensen-Shannon divergence {js:.3g} from round {previous}")
    parts += list(notes)
    return "; ".join(parts)


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _js_from_uniform(weights: np.ndarray) -> float:
    # JS(p, u) in bits, u = 1/n: (KL(p || m) + KL(u || m)) / 2, m = (p + u) / 2
    p = weights / weights.sum()
    u = np.full_like(p, 1.0 / len(p))
    m = (p + u) / 2
    kl_p = np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1) / m), 0.0))
    kl_u = np.sum(u * np.log2(u / m))
    value = float((kl_p + kl_u) / 2)
    return 0.0 if math.isclose(value, 0.0, abs_tol=1e-12) else value
