"""Held-out tasks: split 'eval' is stored, checked, never weighed (so never drawn), and evaluations are kept."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.curriculum import compute_weights
from coevolve_engine.core.errors import CoevolveError, IngestError
from coevolve_engine.eval.heldout import TaskResult, eval_id, eval_tasks, find_evaluation, record_evaluation
from coevolve_engine.core.store import Store


def test_tasks_default_to_train_and_an_unknown_split_is_refused_naming_the_record(store):
    store.add_records("tasks", [{"task_id": "a"}, {"task_id": "b", "split": "eval"}])
    assert store.execute("SELECT task_id, split FROM tasks ORDER BY 1").fetchall() == [("a", "train"),
                                                                                       ("b", "eval")]
    with pytest.raises(IngestError) as caught:
        store.add_records("tasks", [{"task_id": "c"}, {"task_id": "d", "split": "test"}], label="mine")
    assert (caught.value.location, caught.value.field) == ("record 2", "split")
    assert "split must be 'train' or 'eval', got 'test'" in str(caught.value)
    assert store.scalar("SELECT count(*) FROM tasks") == 2
    with pytest.raises(IngestError, match="already in the store with different content"):
        store.add_records("tasks", [{"task_id": "b", "split": "train"}])


def test_eval_tasks_are_never_weighed_so_no_sampler_draws_them(store):
    store.add_records("tasks", [{"task_id": f"t{i}", "env": "calc"} for i in range(3)]
                      + [{"task_id": f"e{i}", "env": "calc", "split": "eval"} for i in range(2)])
    store.add_records("trajectories", [{"task_id": "t0", "step": 1, "reward": 1.0}])
    for strategy in ("uniform", "coevolve", "plr", "dapo-filter"):
        result = compute_weights(store, 0, strategy, replace=True)
        assert sorted(result.task_ids.tolist()) == ["t0", "t1", "t2"], strategy
    assert store.scalar("SELECT tasks FROM weight_sets WHERE round = 0") == 3


def test_a_store_of_eval_tasks_only_has_nothing_to_weigh(store):
    store.add_records("tasks", [{"task_id": "e", "split": "eval"}])
    with pytest.raises(CoevolveError, match="no training tasks to weigh"):
        compute_weights(store, 0, "uniform")


def test_tasks_import_can_hold_tasks_out(db_path):
    result = CliRunner().invoke(cli, ["tasks", "import", "calc", "--category", "test", "--limit", "5", "--split",
                                      "eval", "--create", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "for eval: 5 tasks, 5 added" in result.output
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT split, count(*) FROM tasks GROUP BY 1").fetchall() == [("eval", 5)]
        assert len(eval_tasks(store, "calc")) == 5
        assert [t["task_id"] for t in eval_tasks(store, "calc", limit=2)] == \
            [t["task_id"] for t in eval_tasks(store, "calc", limit=2)]
        assert len(eval_tasks(store, "calc", limit=2)) == 2 and eval_tasks(store, "bfcl") == []


def test_an_evaluation_is_stored_per_task_and_found_again_by_what_decides_it(store):
    results = [TaskResult("e1", 1.0, True, "ok", ({"name": "add", "arguments": {"n": 1}},), "x"),
               TaskResult("e2", 0.0, False, "wrong value")]
    settings = {"decoding": "greedy", "max_new_tokens": 16}
    evaluation = record_evaluation(store, policy="/ckpt/a", env="calc", settings=settings, results=results,
                                   round=1, label="round 1", step=8)
    assert (evaluation.tasks, evaluation.successes, evaluation.success_rate) == (2, 1, 0.5)
    assert evaluation.eval_id == eval_id("/ckpt/a", "calc", ["e2", "e1"], settings)
    assert eval_id("/ckpt/b", "calc", ["e1", "e2"], settings) != evaluation.eval_id
    assert find_evaluation(store, evaluation.eval_id) == evaluation
    assert store.execute("SELECT round, label, success_rate, step FROM evaluations").fetchall() == \
        [(1, "round 1", 0.5, 8)]
    assert store.execute("SELECT task_id, success, reason FROM eval_results ORDER BY 1").fetchall() == \
        [("e1", True, "ok"), ("e2", False, "wrong value")]
    record_evaluation(store, policy="/ckpt/a", env="calc", settings=settings, results=results)  # again: replaced
    assert store.scalar("SELECT count(*) FROM eval_results") == 2


def test_rollouts_never_play_eval_tasks(db_path):
    """Rollouts feed the signals and the synthesis, so a held-out task must never be rolled out for training."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.rollouts.jobs import run_rollout_job

    calc = load_environment("calc")
    with Store(db_path) as store:
        store.add_records("tasks", list(calc.load_tasks(split="seed", n=3)))
        store.add_records("tasks", [{**t, "split": "eval"} for t in calc.load_tasks(split="test", n=3)])
    summary = run_rollout_job(db_path, calc, "calc", ReferenceAgent(), group_size=1, step=0, concurrency=1)
    assert summary.rollouts == 3
    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM trajectories JOIN tasks USING (task_id) WHERE split = 'eval'") == 0
