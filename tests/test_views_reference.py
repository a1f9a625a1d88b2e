"""The SQL views agree with the plain-Python reference definitions on random stores."""

from __future__ import annotations

import math
import random

import pytest

import signals_reference as ref


def _normalise(rows):
    def cell(value):
        return round(value, 9) if isinstance(value, float) and not math.isnan(value) else value

    return sorted((tuple(cell(v) for v in row) for row in rows), key=repr)


def _random_records(rng: random.Random, n_tasks: int, steps: int) -> list[dict]:
    records = []
    for step in rng.sample(range(steps * 2), steps):  # steps with gaps, written out of order
        for task in rng.sample(range(n_tasks), rng.randint(1, n_tasks)):
            for k in range(rng.choice([1, 2, 3, 4, 8])):
                record = {"task_id": f"t{task}", "step": step,
                          "reward": rng.choice([0.0, 1.0, 0.5, 0.25, round(rng.random(), 2)])}
                if rng.random() < 0.1:
                    record["success"] = rng.random() < 0.5
                if rng.random() < 0.05:
                    record["error"] = "the model server timed out"
                if rng.random() < 0.9:
                    names = rng.choices("abcdefg", weights=[30, 20, 10, 5, 2, 1, 1], k=rng.randint(0, 4))
                    record["actions"] = [{"name": name} for name in names]
                records.append(record)
    return records


@pytest.mark.parametrize("seed", range(6))
def test_views_match_reference(store, jsonl, seed):
    rng = random.Random(seed)
    store.ingest_tasks(jsonl([{"task_id": f"t{i}"} for i in range(0, 14, 3)] + [{"task_id": "unseen"}]))
    records = _random_records(rng, n_tasks=12, steps=rng.randint(1, 9))
    records[0]["error"] = "the environment raised"  # at least one rollout cut short by a fault
    store.ingest_trajectories(jsonl(records), create_tasks=True)
    trajectories = [ref.Trajectory(*row) for row in store.execute(
        "SELECT trajectory_id, task_id, step, group_id, reward, success, action_pattern FROM trajectories "
        "WHERE error IS NULL"
    ).fetchall()]
    assert store.scalar("SELECT count(*) FROM trajectories WHERE error IS NOT NULL") > 0
    task_ids = [row[0] for row in store.execute("SELECT task_id FROM tasks").fetchall()]
    rounds = store.execute("SELECT round, first_step, last_step FROM drift_rounds").fetchall()
    threshold = rng.choice([0.5, 0.25, 1.0])
    w = rng.choice([1, 2, 3, 5])
    theta = rng.choice([5, 20, 40])
    min_n = rng.choice([0, 10, 50])
    cases = {
        f"task_steps_with(threshold := {threshold})": ref.task_steps(trajectories, threshold),
        f"forgetting_with(w := {w}, threshold := {threshold})": ref.forgetting(trajectories, w, threshold),
        f"forgetting_trajectories_with(w := {w}, threshold := {threshold})":
            ref.forgetting_trajectories(trajectories, w, threshold),
        f"forgetting_events_with(threshold := {threshold})": ref.forgetting_events(trajectories, threshold),
        f"forgetting_drops_with(w := {w}, threshold := {threshold})": ref.forgetting_drops(trajectories, w, threshold),
        f"forgetting_tasks_with(w := {w}, threshold := {threshold})": ref.forgetting_tasks(trajectories, w, threshold),
        f"group_outcomes_with(threshold := {threshold})": ref.group_outcomes(trajectories, threshold),
        f"boundary_with(threshold := {threshold})": ref.boundary(trajectories, threshold),
        f"pattern_steps_with(theta := {theta}, min_n := {min_n})": ref.pattern_steps(trajectories, theta, min_n),
        f"rare_patterns_with(theta := {theta}, min_n := {min_n})": ref.rare_patterns(trajectories, theta, min_n),
        f"flagged_trajectories_with(threshold := {threshold}, w := {w}, theta := {theta}, min_n := {min_n})":
            ref.flagged_trajectories(trajectories, threshold, w, theta, min_n),
        f"flagged_trajectories_with(threshold := {threshold}, w := {w}, theta := {theta}, min_n := {min_n}, "
        f"forgetting_form := 'trajectory')": ref.flagged_trajectories(trajectories, threshold, w, theta, min_n, "trajectory"),
        f"task_signals_with(threshold := {threshold}, w := {w}, theta := {theta}, min_n := {min_n})":
            ref.task_signals(trajectories, task_ids, threshold, w, theta, min_n),
        f"group_spread_with(threshold := {threshold})": ref.group_spread(trajectories, threshold),
        f"group_health_with(threshold := {threshold})": ref.group_health(trajectories, threshold, rounds),
        f"task_group_health_with(threshold := {threshold})": ref.task_group_health(trajectories, threshold),
    }
    for macro, expected in cases.items():
        got = store.execute(f"SELECT * FROM {macro}").fetchall()
        assert _normalise(got) == _normalise(expected), macro


def test_default_views_equal_their_macros_at_default_parameters(store, jsonl):
    store.ingest_trajectories(jsonl(_random_records(random.Random(99), n_tasks=20, steps=8)), create_tasks=True)
    for view in ("task_steps", "group_outcomes", "forgetting", "forgetting_trajectories", "forgetting_events",
                 "forgetting_drops", "forgetting_tasks", "boundary", "pattern_steps",
                 "rare_patterns", "flagged_trajectories", "task_signals", "group_health", "task_group_health"):
        assert _normalise(store.execute(f"SELECT * FROM {view}").fetchall()) == _normalise(
            store.execute(f"SELECT * FROM {view}_with()").fetchall()), view
