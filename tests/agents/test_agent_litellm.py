"""LiteLLMAgent through real HTTP: litellm -> the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import time

import pytest

from agent_contract import AgentContract
from scripted_server import bad_arguments, hang, http_error, malformed_body, text, tool_calls
from toy_env import CounterEnvironment, counter_task

from coevolve_engine.adapters.agents.base import EpisodeLimits
from coevolve_engine.adapters.agents.litellm_agent import LiteLLMAgent
from coevolve_engine.core.endpoint import CallSettings

if importlib.util.find_spec("litellm") is None:  # the "agents" extra; found, not imported (it is slow)
    pytest.skip("litellm is not installed", allow_module_level=True)

TWO_TURNS = counter_task("c-1", ["Add 2 to the counter.", "Now add 3."], target=5)
ONE_TURN = counter_task("c-2", ["Add 2 to the counter."], target=2)


def make_agent(server, **options) -> LiteLLMAgent:
    calls = CallSettings(options.pop("timeout", 5), options.pop("retries", 0), retry_backoff_s=0.0)
    limits = {key: options.pop(key) for key in ("max_steps", "max_model_calls_per_turn") if key in options}
    return LiteLLMAgent(server.endpoint(), calls=calls, limits=EpisodeLimits(**limits), **options)


def run(agent, task, env=None):
    return agent.run(env or CounterEnvironment(), task["task_id"], task["spec"])


def read_or_answer(request):
    """A stateless script: call read() once per turn, then answer."""
    if request["messages"][-1]["role"] == "tool":
        return text("ok")
    return tool_calls(("read", {}))


class TestLiteLLMAgentContract(AgentContract):
    @pytest.fixture
    def agent(self, scripted_server):
        scripted_server.respond_with(read_or_answer)
        return make_agent(scripted_server)


def test_an_episode_of_tool_calls_then_text_per_turn_is_played_and_scored(scripted_server):
    scripted_server.play(
        [
            tool_calls(("add", {"amount": 2}), usage=(100, 10)),
            text("Added 2.", usage=(120, 5)),
            tool_calls(("add", {"amount": 3}), ("read", {}), usage=(140, 12)),
            text("The counter is 5.", usage=(170, 6)),
        ]
    )
    env = CounterEnvironment()
    rollout = run(make_agent(scripted_server, temperature=0.9, max_tokens=64, seed=7), TWO_TURNS, env)

    assert (rollout.reward, rollout.success, rollout.reason) == (1.0, True, "counter reached 5")
    assert rollout.error is None and rollout.stop == "done"
    assert rollout.actions == [
        {"name": "add", "arguments": {"amount": 2}},
        {"name": "add", "arguments": {"amount": 3}},
        {"name": "read", "arguments": {}},
    ]
    assert rollout.action_pattern == "add>read"
    assert rollout.env_steps == 3 and rollout.tool_errors == 0
    assert env.episodes[0].replies == ["Added 2.", "The counter is 5."]
    assert [m["role"] for m in rollout.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert rollout.messages[2]["tool_calls"] == [
        {"id": "call_0_0", "type": "function", "function": {"name": "add", "arguments": '{"amount": 2}'}}
    ]
    assert rollout.messages[3] == {"role": "tool", "tool_call_id": "call_0_0", "name": "add", "content": "2"}
    assert rollout.messages[8]["content"] == "5"

    # usage: exactly what the server reported; the scripted model has no price, so cost is unknown
    usage = rollout.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.llm_calls) == (530, 33, 4)
    assert usage.cost is None and usage.retries == 0 and usage.latency_s > 0

    # what went over the wire
    first = scripted_server.requests[0]
    assert scripted_server.paths[0] == "/v1/chat/completions"
    assert first["model"] == "scripted"
    assert (first["temperature"], first["max_tokens"], first["seed"]) == (0.9, 64, 7)
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "read", "note"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert scripted_server.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0_0",
        "name": "add",
        "content": "2",
    }
    assert len(scripted_server.requests) == 4


def test_cost_is_computed_from_a_given_price(scripted_server):
    scripted_server.play([tool_calls(("add", {"amount": 2}), usage=(1000, 100)), text("ok", usage=(2000, 10))])
    rollout = run(make_agent(scripted_server, cost_per_token=(1e-6, 2e-6)), ONE_TURN)
    assert rollout.success
    assert rollout.usage.cost == pytest.approx(3000 * 1e-6 + 110 * 2e-6)


def test_qwen_style_tool_calls_in_the_text_are_executed(scripted_server):
    scripted_server.play(
        [text('Let me add.\n<tool_call>\n{"name": "add", "arguments": {"amount": 2}}\n</tool_call>'), text("done")]
    )
    rollout = run(make_agent(scripted_server), ONE_TURN)
    assert rollout.success and rollout.actions == [{"name": "add", "arguments": {"amount": 2}}]
    assert rollout.messages[2]["content"] == "Let me add."
    assert rollout.messages[2]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"amount": 2}'}
    # the next request carries the call as structured tool_calls, answered by a tool message
    assert scripted_server.requests[1]["messages"][-1]["tool_call_id"] == rollout.messages[2]["tool_calls"][0]["id"]


def test_plain_text_when_tools_were_expected_ends_the_turn_and_is_scored_not_an_error(scripted_server):
    scripted_server.play([text("I would rather not.")])
    rollout = run(make_agent(scripted_server), ONE_TURN)
    assert rollout.error is None and rollout.stop == "done"
    assert (rollout.reward, rollout.success, rollout.reason) == (0.0, False, "counter is 0, expected 2")
    assert rollout.actions == [] and rollout.usage.llm_calls == 1


def test_bad_tool_call_json_ends_the_turn_without_an_error_fed_back(scripted_server):
    # BFCL's loop: the answer does not decode, so the turn is over; no call runs, nothing answers it
    scripted_server.play([bad_arguments("add", '{"amount": 2'), tool_calls(("add", {"amount": 3})), text("done")])
    rollout = run(make_agent(scripted_server), TWO_TURNS)
    assert rollout.error is None and rollout.stop == "done" and not rollout.success
    assert rollout.tool_errors == 1 and rollout.env_steps == 1 and rollout.usage.llm_calls == 3
    assert rollout.actions == [{"name": "add", "arguments": {"amount": 3}}]  # the unparsable call never ran
    bad_call, next_user = rollout.messages[2], rollout.messages[3]
    assert bad_call["tool_calls"][0]["function"]["arguments"] == '{"amount": 2'  # recorded as the model wrote it
    assert next_user == {"role": "user", "content": "Now add 3."}
    # the second request is already turn 2's; on the wire the broken arguments are "{}" (vLLM json-decodes them)
    wired = scripted_server.requests[1]["messages"]
    assert [m["role"] for m in wired] == ["system", "user", "assistant", "user"]
    assert wired[2]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_arguments_that_are_not_an_object_end_the_turn(scripted_server):
    scripted_server.play([tool_calls(("add", "[2]")), text("done")])
    rollout = run(make_agent(scripted_server), ONE_TURN)
    assert not rollout.success and rollout.error is None and rollout.tool_errors == 1
    assert rollout.usage.llm_calls == 1 and rollout.messages[-1]["role"] == "assistant"


def test_a_call_the_environment_refuses_is_an_action_with_an_error_observation(scripted_server):
    scripted_server.play([tool_calls(("add", {"amount": "two"}), ("launch", {})), text("done")])
    rollout = run(make_agent(scripted_server), ONE_TURN)
    assert [a["name"] for a in rollout.actions] == ["add", "launch"] and rollout.tool_errors == 2
    assert rollout.messages[3]["content"] == "Error: add takes one integer 'amount', got {'amount': 'two'}"
    assert rollout.messages[4]["content"] == "Error: unknown tool 'launch'; available: add, read, note"


def test_http_500_after_retries_ends_the_rollout_with_the_error(scripted_server):
    scripted_server.play([tool_calls(("add", {"amount": 2}))] + [http_error(500, "upstream exploded")] * 3)
    rollout = run(make_agent(scripted_server, retries=2), ONE_TURN)
    assert rollout.stop == "error" and rollout.reward == 0.0 and not rollout.success
    assert rollout.error.startswith(
        f"model call 2 (turn 1): openai/scripted at {scripted_server.api_base} after 3 attempts"
    )
    assert "InternalServerError" in rollout.error and "upstream exploded" in rollout.error
    assert rollout.reason.startswith("model call failed: model call 2")
    assert len(scripted_server.requests) == 4  # 1 good + 3 attempts, no hidden client retries
    assert rollout.actions == [{"name": "add", "arguments": {"amount": 2}}] and rollout.usage.llm_calls == 1


def test_a_500_that_recovers_on_retry_is_counted_and_the_rollout_completes(scripted_server):
    scripted_server.play([http_error(503), tool_calls(("add", {"amount": 2})), text("done")])
    rollout = run(make_agent(scripted_server, retries=1), ONE_TURN)
    assert rollout.success and rollout.error is None
    assert rollout.usage.retries == 1 and rollout.usage.llm_calls == 2


def test_a_server_that_hangs_past_the_timeout_ends_the_rollout(scripted_server):
    scripted_server.play([hang(2.0)])
    started = time.perf_counter()
    rollout = run(make_agent(scripted_server, timeout=0.5), ONE_TURN)
    assert time.perf_counter() - started < 1.8
    assert rollout.stop == "error" and "Timeout" in rollout.error and rollout.reward == 0.0


def test_a_response_body_that_is_not_json_ends_the_rollout(scripted_server):
    scripted_server.play([malformed_body()])
    rollout = run(make_agent(scripted_server), ONE_TURN)
    assert rollout.stop == "error" and rollout.reward == 0.0
    assert "after 1 attempt:" in rollout.error and "Expecting value" in rollout.error


def test_a_client_error_is_not_retried(scripted_server):
    scripted_server.play([http_error(400, "bad request: context too long")] * 3)
    rollout = run(make_agent(scripted_server, retries=2), ONE_TURN)
    assert rollout.stop == "error" and "BadRequestError" in rollout.error and "context too long" in rollout.error
    assert len(scripted_server.requests) == 1


def test_more_environment_steps_than_allowed_is_a_failure(scripted_server):
    scripted_server.respond_with(lambda request: tool_calls(("add", {"amount": 1})))
    rollout = run(make_agent(scripted_server, max_steps=3), ONE_TURN)
    assert rollout.stop == "max_steps" and rollout.error is None
    assert (rollout.reward, rollout.success) == (0.0, False)
    assert rollout.reason == "exceeded max_steps=3 environment steps"
    assert rollout.env_steps == 3 and len(rollout.actions) == 3 and len(scripted_server.requests) == 4


def test_more_model_calls_in_a_turn_than_allowed_is_a_failure(scripted_server):
    scripted_server.respond_with(lambda request: tool_calls(("add", {"amount": 1})))
    rollout = run(make_agent(scripted_server, max_model_calls_per_turn=3), TWO_TURNS)
    assert rollout.stop == "max_model_calls" and rollout.error is None and rollout.reward == 0.0
    assert rollout.reason == "turn 1 needed more than max_model_calls_per_turn=3 model calls"
    assert rollout.usage.llm_calls == 3 and rollout.env_steps == 3 and rollout.failed_turn == 1


def test_bfcls_turn_cap_is_21_answers_with_tool_calls(scripted_server):
    # BFCL quits once more than 20 tool-calling answers came in a turn: the 21st runs, a 22nd is never asked
    scripted_server.respond_with(lambda request: tool_calls(("add", {"amount": 1})))
    rollout = run(make_agent(scripted_server), TWO_TURNS)
    assert rollout.stop == "max_model_calls" and rollout.usage.llm_calls == 21 and rollout.env_steps == 21
    assert rollout.turns == 1 and rollout.failed_turn == 1


def test_an_environment_that_raises_in_execute_ends_only_that_rollout(scripted_server):
    scripted_server.play([tool_calls(("add", {"amount": 2}))])
    task = counter_task("c-3", ["Add 2."], target=2, fail_in="execute")
    rollout = run(make_agent(scripted_server), task)
    assert rollout.stop == "error"
    assert rollout.error == "environment execute('add') raised RuntimeError: toy environment broke in execute"


def test_the_record_maps_onto_the_store_trajectory(scripted_server):
    scripted_server.play([tool_calls(("add", {"amount": 2}), usage=(10, 3)), text("done", usage=(12, 1))])
    rollout = run(make_agent(scripted_server, policy="qwen3-8b@step40"), ONE_TURN)
    record = rollout.to_record(step=40, group_id="c-2@40")
    json.dumps(record)  # plain JSON all the way down
    meta = record.pop("meta")
    assert record == {
        "task_id": "c-2",
        "step": 40,
        "group_id": "c-2@40",
        "reward": 1.0,
        "success": True,
        "actions": [{"name": "add", "arguments": {"amount": 2}}],
        "messages": rollout.messages,
        "policy": "qwen3-8b@step40",
        "error": None,
    }
    assert meta["usage"] == {
        "prompt_tokens": 22,
        "completion_tokens": 4,
        "cost": None,
        "latency_s": rollout.usage.latency_s,
        "llm_calls": 2,
        "retries": 0,
    }
    assert {k: meta[k] for k in ("reason", "stop", "env_steps", "tool_errors", "sample_index")} == {
        "reason": "counter reached 2",
        "stop": "done",
        "env_steps": 1,
        "tool_errors": 0,
        "sample_index": 0,
    }


def test_bad_configuration_is_refused_with_a_message():
    with pytest.raises(ValueError, match="timeout must be > 0"):
        LiteLLMAgent("openai/x", calls=CallSettings(timeout=0))
    with pytest.raises(ValueError, match="retries must be >= 0"):
        LiteLLMAgent("openai/x", calls=CallSettings(retries=-1))
    with pytest.raises(ValueError, match="model must be a litellm model string"):
        LiteLLMAgent("")
    with pytest.raises(ValueError, match="max_model_calls_per_turn must be >= 1"):
        LiteLLMAgent("openai/x", limits=EpisodeLimits(max_model_calls_per_turn=0))


def test_a_garbled_text_tool_call_ends_the_turn_and_is_sent_back_well_formed(scripted_server):
    scripted_server.play([text("<tool_call>add(amount=2)</tool_call>"), tool_calls(("add", {"amount": 5})), text("ok")])
    rollout = run(make_agent(scripted_server), TWO_TURNS)
    assert rollout.success and rollout.tool_errors == 1
    recorded = rollout.messages[2]["tool_calls"][0]["function"]
    assert recorded == {"name": "", "arguments": "add(amount=2)"}  # what the model wrote, never evaluated
    assert rollout.messages[3] == {"role": "user", "content": "Now add 3."}  # no error fed back: turn 2 follows
    wired = scripted_server.requests[1]["messages"][2]["tool_calls"][0]["function"]
    assert wired == {"name": "unnamed_tool_call", "arguments": "{}"}
