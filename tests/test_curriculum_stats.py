"""The curriculum benchmark's statistics on literal inputs: paired differences, the bootstrap interval, steps to
reach a target, the mean curve, the most of the spread a larger held-out set could remove."""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "bench" / "curriculum_stats.py"
_spec = importlib.util.spec_from_file_location("curriculum_stats", PATH)
stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats)


def test_paired_differences_pair_by_seed_and_skip_unpaired_seeds():
    final = {("weighted", 0): 0.40, ("weighted", 1): 0.45, ("weighted", 2): 0.50,
             ("fixed", 0): 0.35, ("fixed", 1): 0.46, ("fixed", 3): 0.30}
    diffs = stats.paired_differences(final, "weighted", "fixed")
    assert [seed for seed, _ in diffs] == [0, 1]
    assert [round(d, 9) for _, d in diffs] == [0.05, -0.01]
    assert stats.paired_differences(final, "plr", "fixed") == []


def test_bootstrap_of_two_values_spans_both():
    # resamples of (0, 1): means 0, .5, .5, 1; 2.5% and 97.5% of four sorted means are the first and last
    assert stats.bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)


def test_bootstrap_of_equal_values_is_that_value():
    assert stats.bootstrap_ci([2.0] * 5) == (2.0, 2.0)
    assert stats.bootstrap_ci([0.3]) == (0.3, 0.3)


def test_bootstrap_of_five_seeds_is_exact():
    # means of resamples of (0, 0, 0, 0, 1) are k/5, k ~ Binomial(5, 0.2): P(k = 0) = 0.328 > 2.5%, so the low
    # end is 0; P(k >= 4) = 0.0067 < 2.5% <= P(k >= 3) = 0.058, so the high end is 3/5
    low, high = stats.bootstrap_ci([0.0, 0.0, 0.0, 0.0, 1.0])
    assert (low, round(high, 9)) == (0.0, 0.6)
    # all five above 0: the interval is above 0 however it is resampled
    low, high = stats.bootstrap_ci([0.01, 0.03, 0.05, 0.02, 0.04])
    assert low > 0 and round(low, 9) >= 0.01 and round(high, 9) <= 0.05


def test_bootstrap_beyond_exact_is_seeded_and_inside_the_range():
    values = [float(v) for v in range(10)]
    first = stats.bootstrap_ci(values, resamples=2000, seed=1)
    assert first == stats.bootstrap_ci(values, resamples=2000, seed=1)
    assert 0 < first[0] < 4.5 < first[1] < 9


def test_bootstrap_refuses_nothing_and_a_bad_level():
    with pytest.raises(ValueError, match="at least one"):
        stats.bootstrap_ci([])
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap_ci([1.0], level=1.0)


def test_summary_has_mean_sd_and_interval():
    got = stats.summary([0.0, 1.0])
    assert got == {"mean": 0.5, "sd": pytest.approx(0.7071067811865476), "low": 0.0, "high": 1.0, "n": 2}


def test_steps_to_reach_is_the_first_step_at_or_above():
    curve = [(50, 0.30), (25, 0.20), (75, 0.40), (100, 0.35)]
    assert stats.steps_to_reach(curve, 0.30) == 50
    assert stats.steps_to_reach(curve, 0.39) == 75
    assert stats.steps_to_reach(curve, 0.41) is None
    assert stats.steps_to_reach([], 0.1) is None


def test_mean_curve_per_step():
    points = [(25, 0.2), (25, 0.4), (50, 0.5)]
    assert stats.mean_curve(points) == [(25, pytest.approx(0.3), pytest.approx(0.1), 2), (50, 0.5, 0.0, 1)]


def test_the_t_interval_of_five_differences():
    values = [0.057, 0.007, 0.070, 0.025, 0.058]
    low, high = stats.t_interval(values)
    half = 2.7764451051977987 * statistics.stdev(values) / math.sqrt(5)  # t(0.975, 4 degrees of freedom)
    assert (low, high) == pytest.approx((statistics.mean(values) - half, statistics.mean(values) + half))
    assert low > 0 and low < stats.bootstrap_ci(values)[0]  # wider than the bootstrap's, as it should be here
    with pytest.raises(ValueError):
        stats.t_interval([0.1])


def test_heldout_noise_splits_the_spread_over_seeds():
    # seed 0: +1 on two of four tasks (d = 0.5); seed 1: +1 on one (d = 0.25); seed 2: level on all (d = 0)
    diffs = {0: [1, 1, 0, 0], 1: [1, 0, 0, 0], 2: [0, 0, 0, 0]}
    noise = stats.heldout_noise(diffs)
    assert noise["between"] == pytest.approx(statistics.variance([0.5, 0.25, 0.0]))  # 0.0625
    # squared standard errors: var([1,1,0,0]) / 4 = 1/12, var([1,0,0,0]) / 4 = 1/16, 0: their mean
    assert noise["within"] == pytest.approx((1 / 12 + 1 / 16 + 0) / 3)
    assert noise["share"] == pytest.approx(noise["within"] / 0.0625)
    level = stats.heldout_noise({0: [1, -1], 1: [1, -1]})  # the same difference on every seed: no spread
    assert level["between"] == 0 and math.isnan(level["share"])
    with pytest.raises(ValueError):
        stats.heldout_noise({0: [1, 0]})
