"""One weighted group sampler: trl-grpo, `coevolve-engine sample` and verl's weighted dataset draw with the same
class, ``coevolve_engine.core.sampler.WeightedGroupSampler`` (the class itself, not a copy), so the same weights,
seed and step give the same groups wherever they are drawn."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.core.sampler import WeightedGroupSampler
from coevolve_engine.trainers.base import BatchSource


def test_sample_draws_with_the_core_sampler(db_path):
    import coevolve_engine
    from coevolve_engine.curriculum import load_weights
    from coevolve_engine.core.store import Store

    assert coevolve_engine.WeightedGroupSampler is WeightedGroupSampler
    runner = CliRunner()
    assert runner.invoke(cli, ["init", "--sample", "--db", str(db_path)]).exit_code == 0
    assert runner.invoke(cli, ["weights", "--strategy", "coevolve", "--db", str(db_path)]).exit_code == 0
    out = runner.invoke(cli, ["sample", "--groups-per-step", "5", "-k", "2", "--seed", "3", "--step", "4", "--format", "json",
                              "--db", str(db_path)], catch_exceptions=False).output
    with Store(db_path, read_only=True) as store:
        weights = load_weights(store)
    # the trainer's view of the same round: task id -> weight, read through a BatchSource as trl-grpo reads it
    source = BatchSource(weights.by_task, seed=3)
    drawn = WeightedGroupSampler(source.weights, task_ids=source.task_ids(), group_size=2, groups_per_step=5, seed=3)
    assert [row["task_id"] for row in json.loads(out)] == drawn.batch_ids(4)


def test_trl_grpo_draws_with_the_core_sampler():
    pytest.importorskip("trl")
    from types import SimpleNamespace

    from datasets import Dataset

    from coevolve_engine.trainers.trl_grpo.grpo import CoevolveGRPOTrainer

    source = BatchSource({"a": 1.0, "b": 2.0, "c": 0.0}, seed=5)
    grpo = SimpleNamespace(train_dataset=Dataset.from_list([{"task_id": t} for t in "abc"]), num_generations=4,
                           num_iterations=1, args=SimpleNamespace(generation_batch_size=8, steps_per_generation=1),
                           source=source, first_draw=6)
    sampler = CoevolveGRPOTrainer._get_train_sampler(grpo)
    assert type(sampler) is WeightedGroupSampler
    assert (sampler.seed, sampler.next_step, sampler.group_size, sampler.groups_per_step) == (5, 6, 4, 2)
    assert sampler.batch_ids(6) == WeightedGroupSampler(source.weights(), group_size=4, groups_per_step=2,
                                                        seed=5).batch_ids(6)


def test_the_verl_dataset_draws_with_the_core_sampler():
    from coevolve_engine.trainers import verl_sampler

    rows = [{"extra_info": {"weight": w}} for w in (1.0, 0.0, 3.0)]
    sampler = verl_sampler.rows_sampler([1.0, 0.0, 3.0], rows=7, seed=2)
    assert type(sampler) is WeightedGroupSampler
    assert verl_sampler.weighted_draws(rows, {"weighted_draws": 7, "seed": 2}) == sampler.batch(0).tolist()
    older = verl_sampler.WeightedTaskSampler(rows, {"sampler": {"seed": 2, "num_samples": 7}})
    assert type(older.sampler) is WeightedGroupSampler and list(older) == sampler.batch(0).tolist()


def test_a_batch_source_s_weights_draw_as_given_and_follow_a_refresh():
    """``WeightedGroupSampler(source.weights, ...)``, the obvious use, reads the source afresh at each draw and
    takes its tasks from what it reads: each draw is the one the weights of that moment give as a mapping."""
    source = BatchSource({"a": 1.0, "b": 2.0, "c": 0.0, "d": 0.5}, seed=7)
    sampler = WeightedGroupSampler(source.weights, group_size=3, groups_per_step=2, seed=source.seed)
    for step in range(4):
        assert sampler.batch_ids(step) == WeightedGroupSampler(source.weights(), group_size=3, groups_per_step=2,
                                                               seed=7).batch_ids(step)
    source.refresh({"a": 0.0, "b": 0.0, "new": 5.0, "other": 1.0})   # the next round adds tasks and drops some
    drawn = sampler.batch_ids(4)
    assert set(drawn) == {"new", "other"} and drawn == WeightedGroupSampler(
        source.weights(), group_size=3, groups_per_step=2, seed=7).batch_ids(4)
