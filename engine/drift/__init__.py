"""How the task distribution drifted across rounds, from the store alone (``coevolve-engine drift``).

    with open_for_reading("coevolve.duckdb") as opened:
        report = compute_drift(opened.store, DriftParams(k=5))
    print(report.summary)            # one row per round
    report["patterns"]               # every table; METRIC_QUERIES[name] recomputes it in SQL
"""

from coevolve_engine.drift.metrics import (
    JS_SQL, METRIC_QUERIES, DriftParams, DriftReport, compare, compute_drift, ensure_prompt_embeddings,
    weight_divergence,
)
from coevolve_engine.drift.opening import OpenedStore, open_for_reading, pending_migrations

__all__ = [
    "JS_SQL", "METRIC_QUERIES", "DriftParams", "DriftReport", "OpenedStore", "compare", "compute_drift",
    "ensure_prompt_embeddings", "open_for_reading", "pending_migrations", "weight_divergence",
]
