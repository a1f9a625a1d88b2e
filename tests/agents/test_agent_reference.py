"""ReferenceAgent: real BFCL tasks played from their ground truth through the shared driver, into a real store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from toy_env import CounterEnvironment, counter_task

pytest.importorskip("bfcl_eval")

from coevolve_engine.adapters.agents import AGENTS, run_rollouts  # noqa: E402
from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

TASKS = ["bfcl/multi_turn_base_0", "bfcl/multi_turn_base_100", "bfcl/multi_turn_base_66"]  # sorted


@pytest.fixture(scope="module")
def bfcl():
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment

    environment = BFCLEnvironment()
    tasks = [t for t in environment.load_tasks(category="multi_turn_base") if t["task_id"] in TASKS]
    return environment, sorted(tasks, key=lambda t: t["task_id"])


def test_reference_rollouts_score_1_and_ingest_into_the_store(bfcl, db_path):
    environment, tasks = bfcl
    rollouts = run_rollouts(environment, tasks, AGENTS.load("reference")(), group_size=1, step=0)
    assert [(r.task_id, r.reward, r.success, r.error) for r in rollouts] == [(t, 1.0, True, None) for t in TASKS]
    for rollout, task in zip(rollouts, tasks):
        solution = environment.reference_solution(task["spec"])
        assert rollout.actions == [{"name": c.name, "arguments": c.arguments} for turn in solution for c in turn]
        users = [i for i, m in enumerate(rollout.messages) if m["role"] == "user"]
        assert len(users) == len(solution)
        for turn, start in enumerate(users):  # one call per assistant message, each answered, then a short reply
            end = users[turn + 1] if turn + 1 < len(users) else len(rollout.messages)
            played = rollout.messages[start + 1:end]
            assert [m["role"] for m in played] == ["assistant", "tool"] * len(solution[turn]) + ["assistant"]
            calls = [m["tool_calls"][0]["function"] for m in played if m.get("tool_calls")]
            assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
                (call.name, call.arguments) for call in solution[turn]]
            assert played[-1] == {"role": "assistant", "content": "Done."}
    with Store(db_path) as store:
        store.add_records("tasks", tasks)
        store.add_records("trajectories", [r.to_record() for r in rollouts], label="reference rollouts")
        rows = store.sql("SELECT task_id, reward, success, policy, error FROM trajectories ORDER BY task_id").rows()
    assert rows == [(t, 1.0, True, "reference", None) for t in TASKS]


def test_parallel_puts_each_turns_calls_in_one_message(bfcl):
    environment, tasks = bfcl
    task = tasks[0]  # multi_turn_base_0: a turn with several calls
    rollout = ReferenceAgent(parallel=True, policy="ref-parallel").run(environment, task["task_id"], task["spec"])
    assert rollout.reward == 1.0 and rollout.policy == "ref-parallel"
    solution = environment.reference_solution(task["spec"])
    with_calls = [m for m in rollout.messages if m.get("tool_calls")]
    assert [len(m["tool_calls"]) for m in with_calls] == [len(turn) for turn in solution if turn]
    assert rollout.usage.llm_calls == len(solution) + len(with_calls)


def test_a_task_without_a_reference_solution_is_a_rollout_with_an_error():
    task = counter_task("c-1", ["Add 2 to the counter."], target=2)
    rollout = ReferenceAgent().run(CounterEnvironment(), task["task_id"], task["spec"])
    assert rollout.stop == "error" and rollout.reward == 0.0 and not rollout.success
    assert rollout.error == "task c-1: environment 'counter' gives no reference solution"


def test_an_episode_started_elsewhere_ends_with_a_fault_not_an_exception():
    environment = CounterEnvironment()
    task = counter_task("c-2", ["Add 2 to the counter."], target=2)
    rollout = ReferenceAgent().run_episode(environment.start(task["task_id"], task["spec"]), task["task_id"])
    assert rollout.stop == "error" and "needs the spec" in rollout.error


def test_rollout_cli_model_reference(bfcl, db_path):
    from coevolve_engine.cli import cli
    from coevolve_engine.cli.rollout import make_agent

    agent = make_agent("reference", temperature=0.9, max_tokens=8, timeout=1, retries=0, max_steps=30, policy=None)
    assert isinstance(agent, ReferenceAgent) and agent.limits.max_steps == 30
    environment, tasks = bfcl
    with Store(db_path) as store:
        store.add_records("tasks", tasks)
    result = CliRunner().invoke(cli, ["rollout", "--env", "bfcl", "--model", "reference", "-k", "1", "--step", "0",
                                      "--no-progress", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "3 rollouts of 3 tasks written; 3 succeeded, mean reward 1.000" in result.output


def test_registry_lists_reference():
    assert "reference" in AGENTS.names()
    assert AGENTS.load("reference") is ReferenceAgent
    assert "reference solution" in AGENTS.entries["reference"].description
