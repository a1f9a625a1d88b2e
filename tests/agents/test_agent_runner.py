"""run_rollouts: K rollouts per task, bounded concurrency, a callback per finished rollout."""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest
from scripted_server import http_error, text, tool_calls
from toy_env import CounterEnvironment, counter_task

from coevolve_engine.adapters.agents import Agent, AgentFault, ModelReply, Rollout, run_rollouts
from coevolve_engine.adapters.agents.litellm_agent import LiteLLMAgent
from coevolve_engine.core.endpoint import CallSettings

TASKS = [
    counter_task("add-2", ["Add 2 to the counter."], target=2),
    counter_task("boom", ["Add 9 to the counter."], target=9),
    counter_task("add-4", ["Add 4 to the counter."], target=4),
]


def by_task(request):
    """Answer from what the request says, so concurrent rollouts get consistent scripts."""
    messages = request["messages"]
    user = next(m["content"] for m in messages if m["role"] == "user")
    if "9" in user:
        return http_error(500, "this task always breaks the server")
    if messages[-1]["role"] == "tool":
        return text("done")
    amount = int(user.split()[1])
    return tool_calls(("add", {"amount": amount}), usage=(amount * 10, amount))


def make_agent(server, **options):
    if importlib.util.find_spec("litellm") is None:  # the "agents" extra
        pytest.skip("litellm is not installed")
    return LiteLLMAgent(server.endpoint(), calls=CallSettings(timeout=5, retries=0), **options)


def test_one_faulty_rollout_does_not_stop_the_others(scripted_server):
    scripted_server.respond_with(by_task)
    env = CounterEnvironment()
    seen: list[tuple[str, int, int]] = []
    rollouts = run_rollouts(
        env,
        TASKS,
        make_agent(scripted_server),
        group_size=2,
        concurrency=3,
        step=7,
        on_rollout=lambda r: seen.append((r.task_id, r.sample_index, threading.get_ident())),
    )
    assert [(r.task_id, r.sample_index) for r in rollouts] == [
        ("add-2", 0),
        ("add-2", 1),
        ("boom", 0),
        ("boom", 1),
        ("add-4", 0),
        ("add-4", 1),
    ]
    assert [r.success for r in rollouts] == [True, True, False, False, True, True]
    for r in rollouts:
        assert r.step == 7 and r.group_id == f"{r.task_id}@7"
        if r.task_id == "boom":
            assert r.stop == "error" and "this task always breaks the server" in r.error
        else:
            assert r.error is None and r.reward == 1.0
    # usage tokens are per rollout
    assert [(r.usage.prompt_tokens, r.usage.completion_tokens) for r in rollouts if r.task_id == "add-4"][0][0] >= 40
    # the callback saw every rollout once, in the calling thread
    assert sorted((t, s) for t, s, _ in seen) == sorted((r.task_id, r.sample_index) for r in rollouts)
    assert {ident for _, _, ident in seen} == {threading.get_ident()}
    # each rollout had a fresh episode
    assert len(env.episodes) == 6 and all(e.closed for e in env.episodes)


def test_concurrency_is_bounded(scripted_server):
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def slow(request):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.1)
        with lock:
            state["now"] -= 1
        return text("done")

    scripted_server.respond_with(slow)
    tasks = [counter_task(f"t{i}", ["Say done."], target=0) for i in range(3)]
    rollouts = run_rollouts(CounterEnvironment(), tasks, make_agent(scripted_server), group_size=2, concurrency=2)
    assert len(rollouts) == 6 and all(r.success for r in rollouts)
    assert state["peak"] == 2


class _Raises(Agent):
    """An agent whose run() itself raises: the runner still returns a rollout for it."""

    policy = "raises"

    def complete(self, messages, tools):  # pragma: no cover - never reached
        raise AgentFault("unused")

    def run(self, env, task_id, spec):
        if task_id == "boom":
            raise RuntimeError("agent bug")
        return super().run(env, task_id, spec)


class _Answers(_Raises):
    def complete(self, messages, tools):
        return ModelReply(content="done", prompt_tokens=1, completion_tokens=1, cost=0.0)


def test_an_agent_that_raises_is_contained_to_its_rollout():
    rollouts = run_rollouts(CounterEnvironment(), TASKS, _Answers(), group_size=1, concurrency=2)
    assert [r.stop for r in rollouts] == ["done", "error", "done"]
    assert rollouts[1].error == "_Answers.run raised RuntimeError: agent bug"
    assert rollouts[1].group_id == "boom@0" and rollouts[1].policy == "raises"


def test_a_failing_callback_stops_the_run_and_propagates():
    calls = []

    def sink(rollout: Rollout) -> None:
        calls.append(rollout.task_id)
        raise OSError("store is read-only")

    with pytest.raises(OSError, match="store is read-only"):
        run_rollouts(CounterEnvironment(), TASKS, _Answers(), group_size=4, concurrency=1, on_rollout=sink)
    assert len(calls) == 1


def test_progress_bar_and_custom_group_ids(capsys):
    rollouts = run_rollouts(
        CounterEnvironment(),
        TASKS[:1],
        _Answers(),
        group_size=3,
        progress=True,
        group_id_for=lambda task_id, step: f"{task_id}/eval",
    )
    assert {r.group_id for r in rollouts} == {"add-2/eval"} and [r.sample_index for r in rollouts] == [0, 1, 2]
    assert "rollouts" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, message",
    [({"group_size": 0}, "group_size \\(rollouts per task\\) must be >= 1"),
     ({"concurrency": 0}, "concurrency must be >= 1")],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_rollouts(CounterEnvironment(), TASKS, _Answers(), **kwargs)


def test_a_task_without_a_spec_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="task #0 must be a mapping with 'task_id' and 'spec'"):
        run_rollouts(CounterEnvironment(), [{"task_id": "x"}], _Answers())
