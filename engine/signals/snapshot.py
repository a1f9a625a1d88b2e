"""Compute every signal at one parameter set while sharing the expensive layers.

Each signal view is a stack of macros, and the bottom of every stack is one of three passes over all scored
trajectories: ``task_steps_with``, ``group_outcomes_with`` and ``pattern_steps_with`` (plus the window over task
scores, ``task_history_with``). Queried one by one, the views repeat those passes. Inside
``signal_snapshot(store, params)`` each shared layer is computed once into a
temporary table, and a temporary macro of the same name shadows the stored one (DuckDB resolves temporary
objects first), so every view and macro queried in the block reads the shared result. No definition is
repeated: the views themselves are unchanged, only their bottom layer is served from the snapshot.

A shadowing macro refuses a call with other parameters than the snapshot's, so a query in the block can never
silently mix parameter sets. On leaving the block the temporary objects are dropped and the stored
definitions apply again.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from coevolve_engine.core import sqlfiles
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.core.store import Store

# macro -> (the parameters it takes, as declared in its file)
SHARED_LAYERS = {
    "task_steps_with": ("threshold",),
    "task_history_with": ("w", "threshold"),
    "forgetting_events_with": ("threshold",),
    "group_outcomes_with": ("threshold",),
    "pattern_steps_with": ("theta", "min_n"),
}

_DEFAULTS = {"threshold": "0.5", "w": "3", "theta": "5", "min_n": "50"}


def _shadow_sql(macro: str, names: tuple[str, ...]) -> str:
    params = ", ".join(f"{name} := {_DEFAULTS[name]}" for name in names)
    mismatch = " OR ".join(f"{name} IS DISTINCT FROM p.{name}" for name in names)
    return (
        f"CREATE OR REPLACE TEMP MACRO {macro}({params}) AS TABLE "
        f"SELECT s.* FROM snapshot_{macro} AS s, snapshot_params AS p "
        f"WHERE CASE WHEN {mismatch} THEN error('{macro} was called with other parameters than the "
        f"signal snapshot in use') ELSE true END"
    )


@contextmanager
def signal_snapshot(store: Store, params: SignalParams | None = None) -> Iterator[Store]:
    """Within the block, every signal view and macro at ``params`` reuses one pass per shared layer."""
    params = params or SignalParams()
    con = store.con
    con.execute("CREATE OR REPLACE TEMP TABLE snapshot_params AS "
                "SELECT CAST($threshold AS DOUBLE) AS threshold, CAST($w AS BIGINT) AS w, "
                "CAST($theta AS DOUBLE) AS theta, CAST($min_n AS BIGINT) AS min_n",
                {"threshold": params.threshold, "w": params.w, "theta": params.theta, "min_n": params.min_n})
    try:
        for macro, names in SHARED_LAYERS.items():  # in order: task_history reads the shared task_steps
            arguments = ", ".join(f"{name} := $" + name for name in names)
            con.execute(f"CREATE OR REPLACE TEMP TABLE snapshot_{macro} AS SELECT * FROM {macro}({arguments})",
                        {name: getattr(params, name) for name in names})
            con.execute(_shadow_sql(macro, names))
        yield store
    finally:
        _restore(store)


def _restore(store: Store) -> None:
    """Drop the snapshot's temporary objects; a read-only store gets its temporary views' macros back."""
    con = store.con
    for macro in SHARED_LAYERS:
        con.execute(f"DROP MACRO TABLE IF EXISTS temp.{macro}")
        con.execute(f"DROP TABLE IF EXISTS temp.snapshot_{macro}")
    con.execute("DROP TABLE IF EXISTS temp.snapshot_params")
    if store.read_only:
        by_name = {view.name: view for view in sqlfiles.views()}
        for macro in SHARED_LAYERS:
            con.execute(sqlfiles.as_temporary(by_name[macro].sql))
