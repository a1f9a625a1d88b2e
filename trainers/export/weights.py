"""Which tasks a round exports, and with what weight.

Weights come from one of three places, in this order:

1. given by the caller: a mapping ``task_id -> weight``, or a polars / pyarrow table with the columns
   ``task_id`` and ``weight``;
2. the store's ``task_weights`` table (written by the curriculum; one weight set per round);
3. ``uniform=True``: every task in the store with weight 1.

A weight is a finite number >= 0; a sampler draws a task with probability ``weight / sum(weights)``.
Tasks with weight 0 are left out of an export (no sampler would draw them, and a trainer that ignores the
weights would otherwise train on them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from coevolve_engine.core.weights import check_weights
from coevolve_engine.core.errors import CoevolveError

if TYPE_CHECKING:
    from coevolve_engine.core.store import Store

WEIGHTS_TABLE = "task_weights"


class ExportError(CoevolveError):
    """A round cannot be exported as asked (no weights, unknown tasks, bad weights)."""


@dataclass(frozen=True)
class RoundWeights:
    """The weights one export uses, and where they came from (shown to the user and kept in the manifest)."""

    weights: dict[str, float]  # task_id -> weight, in task_id order
    source: str  # 'given', 'task_weights round R' or 'uniform'


def weights_mapping(weights: Any, what: str = "weights") -> dict[str, float]:
    """A mapping, or a polars / pyarrow table with columns task_id and weight, as a plain dict."""
    if isinstance(weights, Mapping):
        pairs = list(weights.items())
    else:
        table = weights.to_arrow() if hasattr(weights, "to_arrow") else weights
        names = getattr(table, "column_names", None)
        if names is None or "task_id" not in names or "weight" not in names:
            raise ExportError(
                "weights must be a mapping task_id -> weight, or a polars/pyarrow table with columns "
                f"'task_id' and 'weight' (got {type(weights).__name__})"
            )
        pairs = list(zip(table.column("task_id").to_pylist(), table.column("weight").to_pylist()))
    out: dict[str, float] = {}
    for task_id, weight in pairs:
        if not isinstance(task_id, str) or not task_id:
            raise ExportError(f"weights: task id {task_id!r} is not a non-empty string")
        if task_id in out:
            raise ExportError(f"weights: task {task_id!r} appears more than once")
        out[task_id] = weight
    checked = check_weights(out, what=what, error=ExportError) if out else ()
    return dict(zip(out, map(float, checked)))


def _has_weights_table(store: "Store") -> bool:
    return bool(store.scalar(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = $name AND schema_name = 'main'",
        {"name": WEIGHTS_TABLE},
    ))


def weights_from_table(store: "Store", round: int) -> dict[str, float]:
    """The weight set the curriculum wrote for ``round`` (table ``task_weights``)."""
    if not _has_weights_table(store):
        raise ExportError(
            f"this store has no {WEIGHTS_TABLE} table, so round {round} has no weights yet; "
            "pass the weights yourself, or export every task with weight 1 (--uniform)"
        )
    rows = store.execute(
        "SELECT task_id, weight FROM task_weights WHERE round = $round ORDER BY task_id", {"round": round}
    ).fetchall()
    if not rows:
        rounds = [r[0] for r in store.execute("SELECT DISTINCT round FROM task_weights ORDER BY round").fetchall()]
        known = ", ".join(map(str, rounds)) or "none"
        raise ExportError(
            f"{WEIGHTS_TABLE} has no weights for round {round} (rounds with weights: {known}); "
            "pick one with --weights-from-round, or pass --uniform"
        )
    return weights_mapping(dict(rows), f"weights from {WEIGHTS_TABLE} round {round}")


def resolve_weights(
    store: "Store",
    round: int,
    *,
    weights: Any = None,
    weights_from_round: int | None = None,
    uniform: bool = False,
) -> RoundWeights:
    """The weights to export for ``round``: given, read from task_weights, or uniform (see module doc)."""
    chosen = sum(x is not None and x is not False for x in (weights, weights_from_round, uniform))
    if chosen > 1:
        raise ExportError("give at most one of weights, weights_from_round and uniform")
    if weights is not None:
        resolved, source = weights_mapping(weights), "given"
    elif uniform:
        ids = [r[0] for r in store.execute(
            "SELECT task_id FROM tasks WHERE split = 'train' ORDER BY task_id").fetchall()]  # eval tasks held out
        resolved, source = {task_id: 1.0 for task_id in ids}, "uniform"
    else:
        from_round = round if weights_from_round is None else weights_from_round
        resolved, source = weights_from_table(store, from_round), f"{WEIGHTS_TABLE} round {from_round}"
    check_weights(resolved, what=f"weights from {source}", error=ExportError)
    return RoundWeights(dict(sorted(resolved.items())), source)
