"""The loop's cost: one definition, one label, wherever it is shown (the terminal after `run` and `demo`, the
report's headline, docs/run.md).

    feedback against training = sum(feedback_seconds) / sum(training_seconds) over the finished rounds that
    trained (``round_costs``), printed as "+10.3%"

feedback_seconds is everything of a round that is not training or warm-up (signals, patterns, synthesis,
validation, evaluation, and the store writes made during training); the paper reports the same ratio (+9.67% of
training time on AppWorld, +12.76% on BFCL).
"""

from __future__ import annotations

from typing import Any

from coevolve_engine.core.store import Store

LOOP_COST_SQL = """
SELECT count(*) AS rounds, sum(training_seconds) AS training, sum(feedback_seconds) AS feedback,
       sum(store_seconds) AS store, min(feedback_share) AS lowest, max(feedback_share) AS highest
FROM round_costs WHERE status = 'finished' AND training_seconds > 0
"""
#: the one label of the figure
LABEL = "the loop's cost: feedback against training"
#: what the paper's feedback loop added to training time (CoEvolve, ACL 2026)
PAPER_COST = "the paper: +9.67% on AppWorld, +12.76% on BFCL"


def loop_cost_numbers(store: Store) -> dict[str, Any]:
    """``LOOP_COST_SQL``'s one row as a dict (rounds 0 and the rest None when no finished round trained)."""
    cursor = store.execute(LOOP_COST_SQL)
    return dict(zip([c[0] for c in cursor.description], cursor.fetchall()[0]))


def percent(feedback: float, training: float) -> str:
    """The figure as printed everywhere: feedback against training, in percent with one decimal and a sign."""
    return f"+{100 * feedback / training:.1f}%"
