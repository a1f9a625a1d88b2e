"""A store with real BFCL tasks, rollouts that flag them, and failure patterns over those rollouts.

``build_pattern_store(path, tasks=30)`` imports ``tasks`` multi_turn_base tasks (every sixth, for a mix of API
classes) and writes, per task, two steps of four rollouts each:

- forgetting tasks (index % 3 == 0) score 1 at step 0 and 0 at step 1 (forgetting fires at step 1);
- boundary tasks (index % 3 == 1) have a mixed group at step 1 (two successes, two failures);
- rare tasks (index % 3 == 2) fail throughout; their step-1 rollouts carry one-off action patterns.

Then one failure pattern per signal (round 1, literal rows) holds the step-1 rollouts of its tasks, as the
patterns phase would write them.
"""

from __future__ import annotations

import json
from pathlib import Path

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.store import Store

SIGNALS = ("forgetting", "boundary", "rare")


def base_tasks(limit: int, stride: int = 1) -> list[dict]:
    """Every ``stride``-th multi_turn_base task, ``limit`` of them (the file is grouped by API class, so a
    stride gives a mix of classes)."""
    tasks = list(load_environment("bfcl").load_tasks(category="multi_turn_base"))
    return tasks[::stride][:limit]


def _reward(signal: str, step: int, sample: int) -> float:
    if signal == "forgetting":
        return 1.0 if step == 0 else 0.0
    if signal == "boundary":
        return float(step == 0 or sample % 2 == 0)
    return 0.0


def rollouts(tasks: list[dict]) -> list[dict]:
    records = []
    for index, task in enumerate(tasks):
        signal = SIGNALS[index % 3]
        for step in (0, 1):
            for sample in range(4):
                name = f"tool_{index}_{sample}" if signal == "rare" and step == 1 else "ls"
                records.append({
                    "trajectory_id": f"traj-{index}-{step}-{sample}", "task_id": task["task_id"], "step": step,
                    "reward": _reward(signal, step, sample), "actions": [{"name": name, "arguments": {}}],
                })
    return records


def insert_patterns(store: Store, tasks: list[dict], round_: int = 1) -> None:
    """One literal failure pattern per signal over the step-1 rollouts of its tasks."""
    with store.transaction() as con:
        for cluster, signal in enumerate(SIGNALS):
            members = [index for index in range(len(tasks)) if SIGNALS[index % 3] == signal]
            pattern_id = f"{round_}-{cluster}"
            con.execute(
                "INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, "
                "signal_counts, representative_trajectory) VALUES ($id, $round, 1, $cluster, $size, $signal, "
                "$counts, $representative)",
                {"id": pattern_id, "round": round_, "cluster": cluster, "size": 4 * len(members), "signal": signal,
                 "counts": json.dumps({s: 4 * len(members) if s == signal else 0 for s in SIGNALS}),
                 "representative": f"traj-{members[0]}-1-0"},
            )
            for rank, index in enumerate(members):
                for sample in range(4):
                    con.execute(
                        "INSERT INTO pattern_members (pattern_id, trajectory_id, signals, distance) "
                        "VALUES ($id, $trajectory, $signals, $distance)",
                        {"id": pattern_id, "trajectory": f"traj-{index}-1-{sample}", "signals": [signal],
                         "distance": round(0.01 * rank + 0.001 * sample, 6)},
                    )


def build_pattern_store(path: Path, tasks: int = 30, stride: int = 6) -> list[dict]:
    """Create the store at ``path``; returns the imported task records."""
    records = base_tasks(tasks, stride)
    with Store(path) as store:
        store.add_records("tasks", records, label="bfcl tasks")
        store.add_records("trajectories", rollouts(records), label="rollouts")
        insert_patterns(store, records)
    return records
