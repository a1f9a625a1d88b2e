"""Select the trajectories flagged at one step (or over a range of steps, e.g. a round's), one row per trajectory
with all the signals it carries.

``flagged_trajectories_with`` has one row per (trajectory, signal); here the signals of a trajectory become
one list, ordered forgetting, boundary, rare. When more trajectories are flagged than ``limit``, a seeded
sample is taken (ordered by ``md5(trajectory_id || ':' || seed)``), so the same seed picks the same ones.
With ``signals`` only the flags of those signals count: a trajectory flagged by none of them is not selected,
and the others carry only those signals (the paper's "without X" ablations).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.core.store import Store

SIGNALS = ("forgetting", "boundary", "rare")  # also the order that breaks ties between dominant signals

FLAGGED_AT_STEP_SQL = """
WITH flags AS (
    SELECT trajectory_id, list(DISTINCT signal) AS signals
    FROM flagged_trajectories_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                                   forgetting_form := $forgetting_form)
    WHERE step BETWEEN $first_step AND $step AND list_contains($signals, signal)
    GROUP BY trajectory_id
),
chosen AS (
    SELECT *, count(*) OVER () AS flagged
    FROM flags
    ORDER BY md5(trajectory_id || ':' || CAST($seed AS VARCHAR))
    LIMIT $limit
)
SELECT c.trajectory_id, c.signals, c.flagged, t.task_id, k.prompt, t.actions, t.messages, t.meta, t.error
FROM chosen AS c
JOIN trajectories AS t USING (trajectory_id)
LEFT JOIN tasks AS k USING (task_id)
ORDER BY c.trajectory_id
"""

STEPS_SQL = "SELECT min(step), max(step), count(*) FILTER (WHERE step = $step) FROM scored_trajectories"


@dataclass(frozen=True)
class FlaggedSelection:
    """The flagged trajectories at ``step``: how many there are, and the rows chosen (at most ``limit``)."""

    step: int
    flagged: int
    rows: list[dict[str, Any]]  # trajectory_id, signals (tuple), task_id, prompt, actions, messages, meta, error


def latest_step(store: Store) -> int:
    """The latest step of any scored trajectory; a clear error when there is none."""
    step = store.scalar("SELECT max(step) FROM scored_trajectories")
    if step is None:
        raise CoevolveError(
            f"no scored trajectories in {store.path}; ingest rollouts first "
            "(`coevolve-engine ingest trajectories FILE` or `coevolve-engine rollout ...`)"
        )
    return int(step)


def ordered_signals(signals: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The distinct signals in the canonical order forgetting, boundary, rare (unknown names last, sorted)."""
    known = [s for s in SIGNALS if s in signals]
    return tuple(known + sorted(set(signals) - set(SIGNALS)))


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def check_signals(signals: Sequence[str] | None) -> list[str]:
    """The signals to select by (all of them when None), refusing an empty list or an unknown name."""
    if signals is None:
        return list(SIGNALS)
    unknown = sorted(set(signals) - set(SIGNALS))
    if unknown or not signals:
        raise CoevolveError(f"signals must name at least one of {', '.join(SIGNALS)}; got {list(signals)!r}")
    return list(ordered_signals(signals))


def select_flagged(store: Store, step: int, params: SignalParams, *, limit: int, seed: int = 0,
                   first_step: int | None = None, signals: Sequence[str] | None = None) -> FlaggedSelection:
    """The trajectories flagged at ``step`` (at steps ``first_step`` .. ``step`` when given) under ``params``, at
    most ``limit`` of them (a seeded sample); only by ``signals`` when given (default: every signal)."""
    first = step if first_step is None else first_step
    if first > step:
        raise CoevolveError(f"first_step {first} is after step {step}")
    cursor = store.execute(FLAGGED_AT_STEP_SQL, {**params.bind(), "step": step, "first_step": first, "seed": seed,
                                                 "limit": limit, "signals": check_signals(signals)})
    names = [column[0] for column in cursor.description]
    rows = []
    flagged = 0
    for values in cursor.fetchall():
        row = dict(zip(names, values))
        flagged = int(row.pop("flagged"))
        row["signals"] = ordered_signals(row["signals"])
        for key in ("actions", "messages", "meta"):
            row[key] = _parsed(row[key])
        rows.append(row)
    return FlaggedSelection(step=step, flagged=flagged, rows=rows)


def explain_none_flagged(store: Store, step: int, params: SignalParams, signals: Sequence[str] | None = None) -> str:
    """Why nothing was selected at ``step``: no rollouts there at all, or none carrying a (selected) signal."""
    first, last, at_step = store.execute(STEPS_SQL, {"step": step}).fetchall()[0]
    constants = (f"threshold {params.threshold:g}, window {params.w}, theta {params.theta:g}%, "
                 f"min_n {params.min_n}")
    if not at_step:
        where = f"scored steps are {first}..{last}" if first is not None else "the store has no scored rollouts"
        return f"no scored trajectories at step {step} ({where}); nothing was written"
    by = "" if signals is None else f" by {', '.join(ordered_signals(signals))}"
    return (f"none of the {at_step} scored trajectories at step {step} is flagged{by} ({constants}); nothing was "
            "written. See `coevolve-engine signals`, or try another --step or other signal constants")
