"""The curriculum benchmark's statistics: paired differences over seeds, their bootstrap interval, steps to reach.

Every arm of the benchmark starts each seed from the same warmed-up policy, trains the same number of steps and is
scored on the same held-out tasks, so the arms pair by seed: the quantity compared is, per seed, the arm's final
held-out success minus the baseline's on that seed (``paired_differences``). Over seeds it is summarised by its
mean and a 95% percentile-bootstrap interval of that mean (``bootstrap_ci``): resample the seeds with
replacement, take the mean, and read the 2.5th and 97.5th percentiles of those means. With at most
``EXACT_UP_TO`` seeds every one of the n^n resamples is enumerated (the exact bootstrap distribution, no random
draws); beyond that ``resamples`` are drawn from ``random.Random(seed)``.

An interval from 5 seeds is coarse: it cannot be narrower than what 5 values allow, and the bootstrap of a
small sample is known to be a little too narrow. It is what the issue asks for, not a test of significance.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from typing import Iterable, Mapping, Sequence

#: Up to this many values, ``bootstrap_ci`` enumerates every resample (6^6 = 46,656 means).
EXACT_UP_TO = 6


def paired_differences(final: Mapping[tuple[str, int], float], arm: str, baseline: str) -> list[tuple[int, float]]:
    """(seed, arm's value minus the baseline's) for every seed that both have, by seed."""
    seeds = sorted(seed for name, seed in final if name == arm and (baseline, seed) in final)
    return [(seed, final[(arm, seed)] - final[(baseline, seed)]) for seed in seeds]


def bootstrap_ci(values: Sequence[float], *, level: float = 0.95, resamples: int = 20_000,
                 seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap interval of the mean of ``values`` at ``level``.

    The means of the resamples are sorted, M of them; the interval is the means at ranks floor(a * M) and
    ceil((1 - a) * M) - 1 (0-based), a = (1 - level) / 2."""
    values = list(values)
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = len(values)
    if n <= EXACT_UP_TO:
        means = sorted(sum(sample) / n for sample in itertools.product(values, repeat=n))
    else:
        rng = random.Random(seed)
        means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    a = (1 - level) / 2
    low = means[math.floor(a * len(means))]
    high = means[math.ceil((1 - a) * len(means)) - 1]
    return low, high


def summary(values: Sequence[float], **options) -> dict[str, float]:
    """Mean, sample standard deviation (0 for one value), the bootstrap interval and how many values."""
    low, high = bootstrap_ci(values, **options)
    return {"mean": statistics.mean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "low": low, "high": high, "n": len(values)}


def t_interval(values: Sequence[float], *, level: float = 0.95) -> tuple[float, float]:
    """The Student-t interval of the mean of ``values`` at ``level`` (mean -/+ t * sd / sqrt(n), n - 1 degrees
    of freedom): a check on ``bootstrap_ci``, which is too narrow for a handful of values."""
    from scipy.stats import t

    values = list(values)
    if len(values) < 2:
        raise ValueError("t_interval needs at least two values")
    mean = statistics.mean(values)
    half = t.ppf((1 + level) / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def steps_to_reach(curve: Iterable[tuple[int, float]], target: float, *, tolerance: float = 1e-9) -> int | None:
    """The first step of ``curve`` ((step, value) pairs, any order) whose value is at least ``target``; None if
    none is."""
    for step, value in sorted(curve):
        if value >= target - tolerance:
            return step
    return None


def heldout_noise(task_diffs: Mapping[int, Sequence[float]]) -> dict[str, float]:
    """How much of the spread of a paired difference over seeds a larger held-out set could remove, at most.

    ``task_diffs`` maps each seed to its per-task differences (arm's verdict minus the baseline's on each held-out
    task: -1, 0 or 1). A seed's paired difference d_s is their mean. Its variance over seeds has two parts: tasks
    flipping one way or the other independently (which a held-out set k times as large divides by k) and whole
    runs going better or worse across tasks together (which only more seeds average out). The variance of one
    seed's per-task differences over its n tasks (the squared standard error of d_s) is at least the first part
    in expectation, since it also holds how much the effect differs from task to task. Returned: ``between``,
    the variance of d_s over seeds (n - 1 in the divisor); ``within``, the mean over seeds of the squared
    standard errors; ``share``, within / between (NaN when between is 0): at most this share of the spread is
    per-task noise. Every seed is scored on the same held-out set, so the spread over seeds (and an interval
    from it) leaves out that set's own sampling error, which only more held-out tasks reduce."""
    diffs = {seed: list(values) for seed, values in task_diffs.items() if len(values) > 1}
    if len(diffs) < 2:
        raise ValueError("heldout_noise needs at least two seeds with at least two tasks each")
    between = statistics.variance([statistics.mean(values) for values in diffs.values()])
    within = statistics.mean(statistics.variance(values) / len(values) for values in diffs.values())
    return {"between": between, "within": within, "share": within / between if between > 0 else float("nan")}


def mean_curve(points: Iterable[tuple[int, float]]) -> list[tuple[int, float, float, int]]:
    """(step, mean, population sd, count) per step of (step, value) pairs gathered over seeds."""
    by: dict[int, list[float]] = {}
    for step, value in points:
        by.setdefault(step, []).append(value)
    return [(step, statistics.mean(v), statistics.pstdev(v) if len(v) > 1 else 0.0, len(v))
            for step, v in sorted(by.items())]
