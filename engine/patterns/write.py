"""Turn a clustering of flagged trajectories into ``failure_patterns`` and ``pattern_members`` rows, and store them.

One ``failure_patterns`` row per cluster (see sql/migrations/003_synthesis.sql for the columns):
``pattern_id`` is '<round>-<cluster>'; ``dominant_signal`` is the signal most members carry, a tie going to
the earlier of forgetting, boundary, rare; ``signal_counts`` counts the members carrying each signal (all
three keys, zeros included); ``representative_trajectory`` is the member closest to the cluster's centre (a
tie goes to the smaller trajectory id). One ``pattern_members`` row per member, with its signals, its cosine
distance to the centre and the hash of the text that was embedded.

Everything a round writes is written in one transaction; with ``replace`` the round's earlier patterns and
members are deleted in that same transaction. A pattern's summary (``summarize``) is written here too
(``record_summary``): this module is the only writer of both tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.patterns.select import SIGNALS
from coevolve_engine.core.store import Store


@dataclass(frozen=True)
class PatternRow:
    """One failure pattern as stored."""

    pattern_id: str
    round: int
    step: int
    cluster: int
    size: int
    dominant_signal: str
    signal_counts: dict[str, int]
    representative_trajectory: str
    params: dict[str, Any]


@dataclass(frozen=True)
class MemberRow:
    """One (pattern, trajectory) as stored."""

    pattern_id: str
    trajectory_id: str
    signals: tuple[str, ...]
    distance: float
    text_hash: str


def pattern_id(round_: int, cluster: int) -> str:
    return f"{round_}-{cluster}"


def count_signals(member_signals: Sequence[Sequence[str]]) -> dict[str, int]:
    """Members carrying each signal: every one of forgetting, boundary, rare, then any other name seen."""
    counts = {signal: 0 for signal in SIGNALS}
    for signals in member_signals:
        for signal in set(signals):
            counts[signal] = counts.get(signal, 0) + 1
    return counts


def dominant_signal(counts: dict[str, int]) -> str:
    """The signal most members carry; a tie goes to the earlier of forgetting, boundary, rare."""
    order = list(SIGNALS) + sorted(set(counts) - set(SIGNALS))
    return max(order, key=lambda signal: (counts.get(signal, 0), -order.index(signal)))


def build_rows(round_: int, step: int, trajectory_ids: Sequence[str], signals: Sequence[tuple[str, ...]],
               hashes: Sequence[str], labels: Sequence[int], distances: Sequence[float],
               params: dict[str, Any]) -> tuple[list[PatternRow], list[MemberRow]]:
    """The rows of every cluster in ``labels`` (0..k-1); the i-th member is ``trajectory_ids[i]``."""
    clusters: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        clusters.setdefault(int(label), []).append(index)
    patterns, members = [], []
    for cluster in sorted(clusters):
        indices = clusters[cluster]
        pid = pattern_id(round_, cluster)
        counts = count_signals([signals[i] for i in indices])
        representative = min(indices, key=lambda i: (float(distances[i]), trajectory_ids[i]))
        patterns.append(PatternRow(pid, round_, step, cluster, len(indices), dominant_signal(counts), counts,
                                   trajectory_ids[representative], params))
        members.extend(MemberRow(pid, trajectory_ids[i], tuple(signals[i]), float(distances[i]), hashes[i])
                       for i in sorted(indices, key=lambda i: trajectory_ids[i]))
    return patterns, members


def next_round(store: Store) -> int:
    """1 + the latest round in failure_patterns, or 0 when there is none."""
    return int(store.scalar("SELECT coalesce(max(round) + 1, 0) FROM failure_patterns"))


def check_round(store: Store, round_: int, *, replace: bool) -> int:
    """How many patterns ``round_`` has; refuses when it has some and ``replace`` is false, or when candidate
    tasks were already synthesized from them (replacing would leave those pointing at patterns that changed)."""
    existing = int(store.scalar("SELECT count(*) FROM failure_patterns WHERE round = $round", {"round": round_}))
    if existing and not replace:
        raise CoevolveError(
            f"round {round_} already has {existing} failure pattern(s) in {store.path}; pass --replace "
            f"(replace=True) to find them again, or leave --round out to write round {next_round(store)}"
        )
    if existing:
        used = int(store.scalar(
            "SELECT count(*) FROM candidates WHERE pattern_id IN "
            "(SELECT pattern_id FROM failure_patterns WHERE round = $round)", {"round": round_}))
        if used:
            raise CoevolveError(
                f"{used} candidate task(s) were synthesized from round {round_}'s failure patterns; replacing "
                f"the patterns would leave them pointing at patterns that no longer exist. Write a new round "
                f"instead (leave --round out)"
            )
    return existing


def _members_table(members: list[MemberRow]) -> pa.Table:
    return pa.table({
        "pattern_id": pa.array([m.pattern_id for m in members], pa.string()),
        "trajectory_id": pa.array([m.trajectory_id for m in members], pa.string()),
        "signals": pa.array([list(m.signals) for m in members], pa.list_(pa.string())),
        "distance": pa.array([m.distance for m in members], pa.float64()),
        "text_hash": pa.array([m.text_hash for m in members], pa.string()),
    })


def write_rows(store: Store, round_: int, patterns: list[PatternRow], members: list[MemberRow], *,
               replace: bool) -> int:
    """Store one round's patterns and members in one transaction; returns how many old patterns it replaced."""
    table = _members_table(members)
    with store.transaction() as con:
        replaced = check_round(store, round_, replace=replace)
        if replaced:
            con.execute("DELETE FROM pattern_members WHERE pattern_id IN "
                        "(SELECT pattern_id FROM failure_patterns WHERE round = $round)", {"round": round_})
            con.execute("DELETE FROM failure_patterns WHERE round = $round", {"round": round_})
        con.executemany(
            "INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, signal_counts,"
            " representative_trajectory, params) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(p.pattern_id, p.round, p.step, p.cluster, p.size, p.dominant_signal, json.dumps(p.signal_counts),
              p.representative_trajectory, json.dumps(p.params, sort_keys=True)) for p in patterns],
        )
        con.register("new_pattern_members", table)
        try:
            con.execute("INSERT INTO pattern_members (pattern_id, trajectory_id, signals, distance, text_hash) "
                        "SELECT pattern_id, trajectory_id, signals, distance, text_hash FROM new_pattern_members")
        finally:
            con.unregister("new_pattern_members")
    return replaced


def record_summary(store: Store, pattern_id: str, *, summary: dict[str, Any] | None = None,
                   error: str | None = None) -> None:
    """A pattern's summary (clearing an earlier error), or the error that kept it from one (keeping an earlier
    summary)."""
    if summary is not None:
        store.execute("UPDATE failure_patterns SET summary = $summary, summary_error = NULL WHERE pattern_id = $id",
                      {"summary": json.dumps(summary), "id": pattern_id})
    else:
        store.execute("UPDATE failure_patterns SET summary_error = $error WHERE pattern_id = $id",
                      {"error": error, "id": pattern_id})
