"""The signal definitions in plain Python, written to be read, not to be fast.

This is the executable specification the SQL views in ``sql/views`` are tested and benchmarked against:
each function returns the same rows as the view of the same name (unordered; sort to compare). Inputs are
the scored trajectories (those without an ``error``, not played by the reference agent) as ``Trajectory``
tuples; parameters have the same names and defaults as the macros.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, NamedTuple

from coevolve_engine.core.signal_params import FORGETTING_FORMS, SIGNAL_DEFAULTS as _D


class Trajectory(NamedTuple):
    trajectory_id: str
    task_id: str
    step: int
    group_id: str
    reward: float
    success: bool | None  # None: decided by reward >= threshold
    action_pattern: str | None  # None: actions not recorded


SCORE_DECIMALS = 9  # scores are rounded so that a tie at the threshold survives any summation order


def _succeeded(t: Trajectory, threshold: float) -> bool:
    return t.success if t.success is not None else t.reward >= threshold


def task_steps(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, step, rollouts, successes, score) per (task, step); score is the mean reward."""
    rollouts: dict[tuple[str, int], int] = defaultdict(int)
    successes: dict[tuple[str, int], int] = defaultdict(int)
    rewards: dict[tuple[str, int], float] = defaultdict(float)
    for t in trajectories:
        key = (t.task_id, t.step)
        rollouts[key] += 1
        successes[key] += _succeeded(t, threshold)
        rewards[key] += t.reward
    return [(task, step, n, successes[(task, step)], round(rewards[(task, step)] / n, SCORE_DECIMALS))
            for (task, step), n in rollouts.items()]


def _history(trajectories: Iterable[Trajectory], threshold: float) -> dict[str, list[tuple[int, float]]]:
    """Each task's (step, score) list in step order."""
    history: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for task, step, _, _, score in task_steps(trajectories, threshold):
        history[task].append((step, score))
    for scores in history.values():
        scores.sort()
    return history


def forgetting(trajectories: Iterable[Trajectory], w: int = _D.w, threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, step, score, recent_best, window_scores, w, threshold) where forgetting fires: one of the
    w most recent earlier scores is >= threshold and the score now is below."""
    rows = []
    for task, scores in _history(trajectories, threshold).items():
        for i, (step, score) in enumerate(scores):
            window = [s for _, s in scores[max(0, i - w):i]]
            if window and max(window) >= threshold and score < threshold:
                rows.append((task, step, score, max(window), len(window), w, threshold))
    return rows


def forgetting_trajectories(trajectories: Iterable[Trajectory], w: int = _D.w,
                            threshold: float = _D.threshold) -> list[tuple]:
    """(trajectory_id, task_id, step, group_id, reward, recent_best, window_scores, w, threshold) for each
    trajectory where per-trajectory forgetting (the paper's form) fires: the trajectory failed and one of its
    task's w most recent earlier scores (scores at earlier steps, this step excluded) is >= threshold."""
    trajectories = list(trajectories)
    windows = {}
    for task, scores in _history(trajectories, threshold).items():
        for i, (step, _) in enumerate(scores):
            windows[(task, step)] = [s for _, s in scores[max(0, i - w):i]]
    rows = []
    for t in trajectories:
        window = windows[(t.task_id, t.step)]
        if window and max(window) >= threshold and not _succeeded(t, threshold):
            rows.append((t.trajectory_id, t.task_id, t.step, t.group_id, t.reward, max(window), len(window), w,
                         threshold))
    return rows


def forgetting_events(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, scored_steps, forgetting_events): transitions from >= threshold to below, per task."""
    rows = []
    for task, scores in _history(trajectories, threshold).items():
        events = sum(1 for (_, a), (_, b) in zip(scores, scores[1:]) if a >= threshold and b < threshold)
        rows.append((task, len(scores), events))
    return rows


def forgetting_drops(trajectories: Iterable[Trajectory], w: int = _D.w, threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, step, previous_score, level_before, level_after, steps_down, last_down_step, recovered_step, lost,
    w, threshold) per forgetting event: a score below threshold after a score >= threshold. Its stretch is that
    step and the next ones below threshold; level_before is the mean of the (up to) w scores before the drop,
    level_after the mean over the stretch, lost = (level_before - level_after) * steps_down."""
    rows = []
    for task, scores in _history(trajectories, threshold).items():
        for i in range(1, len(scores)):
            (_, previous), (step, score) = scores[i - 1], scores[i]
            if not (previous >= threshold and score < threshold):
                continue
            end = i
            while end + 1 < len(scores) and scores[end + 1][1] < threshold:
                end += 1
            down = [s for _, s in scores[i:end + 1]]
            window = [s for _, s in scores[max(0, i - w):i]]
            before, after = sum(window) / len(window), sum(down) / len(down)
            recovered = scores[end + 1][0] if end + 1 < len(scores) else None
            rows.append((task, step, previous, round(before, 9), round(after, 9), len(down), scores[end][0],
                         recovered, round((before - after) * len(down), 9), w, threshold))
    return rows


def forgetting_tasks(trajectories: Iterable[Trajectory], w: int = _D.w, threshold: float = _D.threshold) -> list[tuple]:
    """(rank, task_id, lost, step, level_before, level_after, steps_down, recovered_step, total_lost,
    forgetting_events, forgetting_flags, first_step, last_step) per task with a forgetting event: its worst drop
    (largest lost, the earliest on a tie), ranked by that lost, then total_lost, then task_id."""
    trajectories = list(trajectories)
    drops: dict[str, list[tuple]] = defaultdict(list)
    for row in forgetting_drops(trajectories, w, threshold):
        drops[row[0]].append(row)
    flags: dict[str, int] = defaultdict(int)
    for row in forgetting(trajectories, w, threshold):
        flags[row[0]] += 1
    found = []
    for task, rows in drops.items():
        worst = max(rows, key=lambda r: (r[8], -r[1]))
        total = round(sum(r[8] for r in rows), 9)
        found.append((task, worst[8], worst[1], worst[3], worst[4], worst[5], worst[7], total, len(rows), flags[task],
                      min(r[1] for r in rows), max(r[1] for r in rows)))
    found.sort(key=lambda r: (-r[1], -r[7], r[0]))
    return [(rank, *row) for rank, row in enumerate(found, start=1)]


def group_outcomes(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(group_id, task_id, step, rollouts, successes, p, variance, mean_reward) per group."""
    members: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        members[t.group_id].append(t)
    rows = []
    for group, ts in members.items():
        n = len(ts)
        k = sum(_succeeded(t, threshold) for t in ts)
        p = k / n
        rows.append((group, min(t.task_id for t in ts), min(t.step for t in ts), n, k, p, p * (1 - p),
                     round(sum(t.reward for t in ts) / n, SCORE_DECIMALS)))
    return rows


def boundary(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, group_id, step, rollouts, successes, p, variance) for groups with mixed outcomes."""
    return [(task, group, step, n, k, p, var)
            for group, task, step, n, k, p, var, _ in group_outcomes(trajectories, threshold) if 0 < k < n]


def pattern_steps(trajectories: Iterable[Trajectory], theta: float = _D.theta, min_n: int = _D.min_n) -> list[tuple]:
    """(action_pattern, step, trajectories, cumulative, seen, share, rare) per (pattern, step)."""
    at_step: dict[tuple[str, int], int] = defaultdict(int)
    per_step: dict[int, int] = defaultdict(int)
    for t in trajectories:
        if t.action_pattern is not None:
            at_step[(t.action_pattern, t.step)] += 1
            per_step[t.step] += 1
    seen, total = {}, 0
    for step in sorted(per_step):
        total += per_step[step]
        seen[step] = total
    cumulative: dict[str, int] = defaultdict(int)
    rows = []
    for pattern, step in sorted(at_step, key=lambda key: key[1]):
        n = at_step[(pattern, step)]
        cumulative[pattern] += n
        share = cumulative[pattern] / seen[step]
        rows.append((pattern, step, n, cumulative[pattern], seen[step], share,
                     seen[step] >= min_n and share < theta / 100))
    return rows


def rare_patterns(trajectories: Iterable[Trajectory], theta: float = _D.theta, min_n: int = _D.min_n) -> list[tuple]:
    """(action_pattern, trajectories, share, rare, first_step, last_step, rare_trajectories) per pattern."""
    steps = pattern_steps(trajectories, theta, min_n)
    total = sum(row[2] for row in steps)
    by_pattern: dict[str, list[tuple]] = defaultdict(list)
    for row in steps:
        by_pattern[row[0]].append(row)
    rows = []
    for pattern, rs in by_pattern.items():
        n = sum(r[2] for r in rs)
        rows.append((pattern, n, n / total, total >= min_n and n / total < theta / 100,
                     min(r[1] for r in rs), max(r[1] for r in rs), sum(r[2] for r in rs if r[6])))
    return rows


def _forgetting_flags(trajectories: list[Trajectory], w: int, threshold: float, form: str) -> set[str]:
    """The ids of the trajectories flagged forgetting in ``form``."""
    if form not in FORGETTING_FORMS:
        raise ValueError(f"forgetting_form must be 'group' or 'trajectory', got {form!r}")
    if form == "trajectory":
        return {row[0] for row in forgetting_trajectories(trajectories, w, threshold)}
    steps = {(row[0], row[1]) for row in forgetting(trajectories, w, threshold)}
    return {t.trajectory_id for t in trajectories if (t.task_id, t.step) in steps}


def flagged_trajectories(trajectories: list[Trajectory], threshold: float = _D.threshold, w: int = _D.w,
                         theta: float = _D.theta, min_n: int = _D.min_n,
                         forgetting_form: str = _D.forgetting_form) -> list[tuple]:
    """(trajectory_id, task_id, step, group_id, signal) for each signal a trajectory carries.
    ``forgetting_form``:
    'group' flags every rollout of a (task, step) where the group form fires; 'trajectory' flags each rollout
    where the per-trajectory form fires."""
    forgot = _forgetting_flags(trajectories, w, threshold, forgetting_form)
    mixed = {row[1] for row in boundary(trajectories, threshold)}
    rare = {(row[0], row[1]) for row in pattern_steps(trajectories, theta, min_n) if row[6]}
    rows = []
    for t in trajectories:
        base = (t.trajectory_id, t.task_id, t.step, t.group_id)
        if t.trajectory_id in forgot:
            rows.append(base + ("forgetting",))
        if t.group_id in mixed:
            rows.append(base + ("boundary",))
        if (t.action_pattern, t.step) in rare:
            rows.append(base + ("rare",))
    return rows


def task_signals(trajectories: list[Trajectory], task_ids: Iterable[str] = (), threshold: float = _D.threshold,
                 w: int = _D.w, theta: float = _D.theta, min_n: int = _D.min_n) -> list[tuple]:
    """(task_id, latest_step, latest_score, scored_steps, forgetting_events, forgetting_flags, groups,
    boundary_groups, boundary_share, rare_trajectories) for every task in task_ids or in trajectories."""
    history = _history(trajectories, threshold)
    events = {row[0]: row[2] for row in forgetting_events(trajectories, threshold)}
    flags: dict[str, int] = defaultdict(int)
    for row in forgetting(trajectories, w, threshold):
        flags[row[0]] += 1
    groups: dict[str, int] = defaultdict(int)
    mixed: dict[str, int] = defaultdict(int)
    for _, task, _, n, k, *_ in group_outcomes(trajectories, threshold):
        groups[task] += 1
        mixed[task] += 0 < k < n
    rare: dict[str, int] = defaultdict(int)
    for row in flagged_trajectories(trajectories, threshold, w, theta, min_n):
        if row[4] == "rare":
            rare[row[1]] += 1
    rows = []
    for task in set(task_ids) | {t.task_id for t in trajectories}:
        scores = history.get(task, [])
        latest_step, latest_score = scores[-1] if scores else (None, None)
        rows.append((task, latest_step, latest_score, len(scores), events.get(task, 0), flags[task],
                     groups[task], mixed[task], mixed[task] / groups[task] if groups[task] else None, rare[task]))
    return rows


def group_spread(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(group_id, task_id, step, rollouts, successes, spread, dead, all_solved, all_failed) per group: spread the
    population standard deviation of its rewards; dead when every reward is the same (no GRPO advantage)."""
    members: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        members[t.group_id].append(t)
    rows = []
    for group, ts in members.items():
        rewards = [t.reward for t in ts]
        n, k = len(ts), sum(_succeeded(t, threshold) for t in ts)
        mean = sum(rewards) / n
        spread = (sum((r - mean) ** 2 for r in rewards) / n) ** 0.5
        dead = max(rewards) == min(rewards)
        rows.append((group, min(t.task_id for t in ts), min(t.step for t in ts), n, k, spread, dead,
                     dead and k == n, dead and k == 0))
    return rows


def group_health(trajectories: Iterable[Trajectory], threshold: float = _D.threshold,
                 rounds: Iterable[tuple[int, int, int]] = ()) -> list[tuple]:
    """(step, round, groups, dead_groups, all_solved, all_failed, dead_share, mean_spread, rollouts, live_rollouts,
    gradient_share) per step; ``rounds`` are (round, first_step, last_step), as drift_rounds has them."""
    by_step: dict[int, list[tuple]] = defaultdict(list)
    for row in group_spread(trajectories, threshold):
        by_step[row[2]].append(row)
    rounds = list(rounds)
    rows = []
    for step, groups in by_step.items():
        dead = [g for g in groups if g[6]]
        rollouts = sum(g[3] for g in groups)
        live = sum(g[3] for g in groups if not g[6])
        round_ = next((r for r, first, last in rounds if first <= step <= last), None)
        rows.append((step, round_, len(groups), len(dead), sum(g[7] for g in groups), sum(g[8] for g in groups),
                     len(dead) / len(groups), round(sum(g[5] for g in groups) / len(groups), SCORE_DECIMALS),
                     rollouts, live, live / rollouts))
    return rows


def task_group_health(trajectories: Iterable[Trajectory], threshold: float = _D.threshold) -> list[tuple]:
    """(task_id, groups, dead_groups, all_solved, all_failed, dead_share, mean_spread, last_step) per task."""
    by_task: dict[str, list[tuple]] = defaultdict(list)
    for row in group_spread(trajectories, threshold):
        by_task[row[1]].append(row)
    return [(task, len(groups), sum(g[6] for g in groups), sum(g[7] for g in groups), sum(g[8] for g in groups),
             sum(g[6] for g in groups) / len(groups), round(sum(g[5] for g in groups) / len(groups), SCORE_DECIMALS),
             max(g[2] for g in groups))
            for task, groups in by_task.items()]
