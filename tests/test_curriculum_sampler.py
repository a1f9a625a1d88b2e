"""The weighted group sampler: frequencies follow the weights, GRPO groups stay intact, and the same seed gives
the same batches in any process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from coevolve_engine.curriculum import CurriculumError, WeightedGroupSampler, compute_weights, load_weights

WEIGHTS = [1.0, 2.0, 3.0, 4.0, 0.0, 10.0]


def test_frequencies_follow_the_weights():
    sampler = WeightedGroupSampler(WEIGHTS, group_size=1, groups_per_step=100, seed=123)
    draws = np.concatenate([sampler.tasks(step) for step in range(1000)])  # 100,000 draws
    counts = np.bincount(draws, minlength=len(WEIGHTS))
    assert counts[4] == 0  # weight 0 is never drawn
    nonzero = np.array(WEIGHTS) > 0
    expected = draws.size * np.array(WEIGHTS)[nonzero] / sum(WEIGHTS)
    chi_square = float(((counts[nonzero] - expected) ** 2 / expected).sum())
    assert chi_square < 18.47, (counts, expected)  # chi-square, 4 degrees of freedom, p = 0.001
    # and each share within 1 % of its weight's (a few standard errors at this many draws)
    np.testing.assert_allclose(counts[nonzero] / draws.size, np.array(WEIGHTS)[nonzero] / 20, atol=0.01)


def test_groups_stay_intact():
    k, b = 8, 16
    sampler = WeightedGroupSampler(WEIGHTS, group_size=k, groups_per_step=b, seed=1, num_batches=50)
    indices = np.array(list(sampler))
    assert len(indices) == len(sampler) == 50 * b * k
    groups = indices.reshape(-1, k)  # every run of K positions from the start is one task, K times
    assert (groups == groups[:, :1]).all()
    assert np.array_equal(indices[: b * k], sampler.batch(0))  # batch 0, then batch 1, ...
    assert np.array_equal(indices[b * k: 2 * b * k], sampler.batch(1))


@pytest.mark.parametrize("k", [1, 3])
def test_one_batch_is_tasks_repeated(k):
    sampler = WeightedGroupSampler(WEIGHTS, group_size=k, groups_per_step=5, seed=0)
    assert np.array_equal(sampler.batch(7), np.repeat(sampler.tasks(7), k))


def test_same_seed_same_sequence_different_seed_different():
    a = WeightedGroupSampler(WEIGHTS, group_size=4, groups_per_step=32, seed=5, num_batches=3)
    b = WeightedGroupSampler(WEIGHTS, group_size=4, groups_per_step=32, seed=5, num_batches=3)
    sequence = list(a)
    assert sequence == list(b)
    other = WeightedGroupSampler(WEIGHTS, group_size=4, groups_per_step=32, seed=6, num_batches=3)
    assert list(other) != sequence
    assert not np.array_equal(a.batch(0), a.batch(1))  # successive steps are independent draws
    resumed = WeightedGroupSampler(WEIGHTS, group_size=4, groups_per_step=32, seed=5, start_step=2, num_batches=1)
    assert list(resumed) == sequence[-128:]  # a resumed run continues the sequence


def test_the_state_is_the_next_draw_and_carries_across_a_resume():
    run = WeightedGroupSampler(WEIGHTS, group_size=2, groups_per_step=3, seed=4, num_batches=2)
    first_pass, second_pass = list(run), list(run)  # a DataLoader's next epoch continues the run's draws
    assert run.state_dict() == {"seed": 4, "next_step": 4}
    assert first_pass + second_pass == np.concatenate([run.batch(step) for step in range(4)]).tolist()
    resumed = WeightedGroupSampler(WEIGHTS, group_size=2, groups_per_step=3, seed=0, num_batches=2)
    resumed.load_state_dict({"seed": 4, "next_step": 2})
    assert list(resumed) == second_pass


def test_a_step_has_one_group_per_task_while_enough_tasks_can_be_drawn():
    sampler = WeightedGroupSampler(WEIGHTS, group_size=1, groups_per_step=5, seed=2)
    for step in range(50):  # five tasks have a positive weight: each step draws each of them once
        assert sorted(sampler.tasks(step).tolist()) == [0, 1, 2, 3, 5]
    partial = WeightedGroupSampler(WEIGHTS, group_size=1, groups_per_step=2, seed=2)
    draws = [partial.tasks(step).tolist() for step in range(2000)]
    assert all(len(set(pair)) == 2 for pair in draws)  # without replacement
    firsts = np.bincount([pair[0] for pair in draws], minlength=len(WEIGHTS)) / len(draws)
    np.testing.assert_allclose(firsts, np.array(WEIGHTS) / 20, atol=0.03)  # the first pick follows the weights
    assert WeightedGroupSampler(WEIGHTS, group_size=1, groups_per_step=5, seed=2, with_replacement=True).tasks(0).size == 5


def test_weights_read_afresh_take_effect_at_the_next_draw():
    current = {"a": 1.0, "b": 0.0, "c": 0.0}
    sampler = WeightedGroupSampler(lambda: current, task_ids=["a", "b", "c"], group_size=2, groups_per_step=1, seed=0)
    assert sampler.batch_ids(0) == ["a", "a"]
    current = {"a": 0.0, "b": 0.0, "c": 2.0}
    assert sampler.batch_ids(0) == ["c", "c"]
    current = {"a": 1.0, "elsewhere": 1.0}
    with pytest.raises(CurriculumError, match="do not hold: elsewhere"):
        sampler.tasks(1)


def test_every_process_draws_the_same_batch():
    code = ("from coevolve_engine.curriculum import WeightedGroupSampler as S; "
            f"print(S({WEIGHTS}, group_size=2, groups_per_step=64, seed=9).batch(3).tolist())")
    other_process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = WeightedGroupSampler(WEIGHTS, group_size=2, groups_per_step=64, seed=9).batch(3).tolist()
    assert other_process.stdout.strip() == str(here)


def test_a_single_drawable_task():
    sampler = WeightedGroupSampler([0.0, 5.0, 0.0], group_size=2, groups_per_step=50, seed=0)
    assert set(sampler.batch(0).tolist()) == {1}


@pytest.mark.parametrize("weights, kwargs, message", [
    ([], {}, "no task has a weight above 0"),
    ([0.0, 0.0], {}, "no task has a weight above 0"),
    ([1.0, -1.0], {}, "entry 1 has weight -1.0; a weight is a finite number >= 0"),
    ([1.0, float("nan")], {}, "entry 1 has weight nan; a weight is a finite number >= 0"),
    ([1.0], {"group_size": 0}, "group_size must be at least 1"),
    ([1.0], {"groups_per_step": 0}, "groups_per_step must be at least 1"),
    ([1.0], {"seed": 2**32}, "below 2\\*\\*32"),
])
def test_bad_input(weights, kwargs, message):
    with pytest.raises(CurriculumError, match=message):
        WeightedGroupSampler(weights, **kwargs)


def test_endless_sampler_has_no_length():
    with pytest.raises(TypeError, match="pass num_batches"):
        len(WeightedGroupSampler([1.0]))


def test_sampling_a_stored_round(store):
    store.add_records("tasks", [{"task_id": t} for t in ("b", "a", "c")])
    store.add_records("trajectories", [{"task_id": "a", "step": 1, "reward": r} for r in (1.0, 1.0)])
    compute_weights(store, 0, "dapo-filter")  # 'a' solved its last group: weight 0
    weight_set = load_weights(store, 0)
    sampler = WeightedGroupSampler(weight_set.weights, group_size=2, groups_per_step=40, seed=0)
    drawn = weight_set.task_ids[sampler.batch(0)]
    assert set(drawn) == {"b", "c"}
