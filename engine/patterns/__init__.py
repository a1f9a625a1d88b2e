"""Failure patterns: the trajectories flagged at one step, rendered, embedded and clustered
(docs/architecture.md, "The round").

A failure pattern is a cluster of flagged trajectories that failed (or wavered) in a similar way; the
synthesis loop summarises each pattern once with an LLM instead of reading every trajectory. The patterns of
a round are stored in ``failure_patterns`` (one row per pattern) and ``pattern_members`` (one row per member).

    from coevolve_engine.patterns import find_patterns
    report = find_patterns(store)              # latest step, next round, default signal constants
    report = find_patterns(store, PatternSelection(step=3, max_k=4, seed=1))
    for pattern in report.patterns:
        print(pattern.pattern_id, pattern.size, pattern.dominant_signal, pattern.signal_counts)

Modules: ``select`` (flagged trajectories at a step), ``render`` (one trajectory as text), ``cluster``
(vectors to clusters), ``write`` (rows and the transaction), ``find`` (the phases in order).
"""

from coevolve_engine.patterns.cluster import Clustering, cluster_vectors
from coevolve_engine.patterns.find import Pattern, PatternReport, PatternSelection, find_patterns
from coevolve_engine.patterns.render import render_trajectory
from coevolve_engine.patterns.write import dominant_signal

__all__ = [
    "Clustering", "Pattern", "PatternReport", "PatternSelection", "cluster_vectors", "dominant_signal", "find_patterns",
    "render_trajectory",
]
