"""LiteLLMAgent on real BFCL multi_turn_base tasks: the scripted server replays each task's ground truth."""

from __future__ import annotations

import importlib.util
import pytest

from scripted_server import text, tool_calls

if importlib.util.find_spec("litellm") is None:  # the "agents" extra; found, not imported (it is slow)
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")

from coevolve_engine.adapters.agents import run_rollouts  # noqa: E402
from coevolve_engine.adapters.agents.litellm_agent import LiteLLMAgent  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.core.endpoint import CallSettings  # noqa: E402


def ground_truth_script(env, spec):
    """Per turn: one reply carrying that turn's ground-truth calls (if any), then a text answer."""
    steps = []
    for calls in env.reference_solution(spec):
        if calls:
            steps.append(tool_calls(*[(call.name, call.arguments) for call in calls]))
        steps.append(text("Done."))
    return steps


def test_replaying_the_ground_truth_through_litellm_scores_1(scripted_server):
    env = load_environment("bfcl")
    task = next(iter(env.load_tasks("multi_turn_base", limit=1)))
    scripted_server.play(ground_truth_script(env, task["spec"]))
    agent = LiteLLMAgent(scripted_server.endpoint(), calls=CallSettings(timeout=5, retries=0))

    rollout = agent.run(env, task["task_id"], task["spec"])

    assert rollout.error is None, rollout.error
    assert (rollout.reward, rollout.success) == (1.0, True), rollout.reason
    truth = [call for turn in env.reference_solution(task["spec"]) for call in turn]
    assert [(a["name"], a["arguments"]) for a in rollout.actions] == [(c.name, c.arguments) for c in truth]
    assert not scripted_server.exhausted
    first = scripted_server.requests[0]
    assert first["tools"] and all(t["type"] == "function" for t in first["tools"])


def test_a_wrong_replay_scores_0_and_run_rollouts_keeps_going(scripted_server):
    env = load_environment("bfcl")
    tasks = list(env.load_tasks("multi_turn_base", limit=2))
    scripts = {t["spec"]["turns"][0][0]["content"]: ground_truth_script(env, t["spec"]) for t in tasks}
    first_prompt = tasks[0]["spec"]["turns"][0][0]["content"]

    def replay(request):
        messages = request["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        if user.startswith(first_prompt):  # the first task: answer every turn with text only
            return text("I cannot help with that.")
        answered = sum(1 for m in messages if m["role"] == "assistant")
        return scripts[next(p for p in scripts if user.startswith(p))][answered]

    scripted_server.respond_with(replay)
    agent = LiteLLMAgent(scripted_server.endpoint(), calls=CallSettings(timeout=5, retries=0))
    rollouts = run_rollouts(env, tasks, agent, group_size=2, concurrency=2)
    assert [r.success for r in rollouts] == [False, False, True, True]
    assert all(r.error is None for r in rollouts)
    assert "empty_turn_model_response" in rollouts[0].reason
