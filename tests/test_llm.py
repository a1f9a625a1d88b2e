"""LLMClient through real HTTP (litellm -> the scripted server on 127.0.0.1): every call logged in llm_calls,
identical requests answered from the table, JSON answers validated and retried; and the versioned prompt files."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time

import pytest

from scripted_server import hang, http_error, malformed_body, text, tool_calls

from coevolve_engine.core.endpoint import CallSettings
from coevolve_engine.models.llm import LLMClient, LLMError, canonical_json, parse_json_answer
from coevolve_engine.prompts import PromptError, Prompt, available, load_prompt, parse_prompt
from coevolve_engine.core.store import Store

needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm is not installed")

SCHEMA = {
    "type": "object",
    "properties": {"cause": {"type": "string"}, "steps": {"type": "array", "items": {"type": "string"}}},
    "required": ["cause", "steps"],
    "additionalProperties": False,
}
ASK = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Why did it fail?"}]
GOOD = '{"cause": "wrong folder", "steps": ["cd", "ls"]}'


def make_client(server, db_path, **options) -> LLMClient:
    calls = CallSettings(options.pop("timeout", 5), options.pop("retries", 0), retry_backoff_s=0.0)
    return LLMClient(db_path, server.endpoint(), calls=calls, **options)


def calls(db_path) -> list[dict]:
    with Store(db_path, read_only=True) as store:
        return store.sql("SELECT * FROM llm_calls ORDER BY call_id").to_dicts()


# -- answers, validation and the log ------------------------------------------------------------------------


@needs_litellm
def test_a_valid_json_answer_is_validated_and_logged_with_its_tokens(scripted_server, db_path):
    scripted_server.play([text(GOOD, usage=(120, 15))])
    client = make_client(scripted_server, db_path, max_tokens=300)
    result = client.complete("summary", "summary@1", ASK, json_schema=SCHEMA)

    assert result.data == {"cause": "wrong folder", "steps": ["cd", "ls"]}
    assert (result.text, result.attempts, result.cached) == (GOOD, 1, False)
    assert (result.usage.requests, result.usage.cached, result.usage.prompt_tokens) == (1, 0, 120)
    assert result.usage.unpriced == 1 and result.usage.cost == 0.0  # the scripted model has no price

    sent = scripted_server.requests[0]
    assert (sent["model"], sent["messages"], sent["temperature"], sent["max_tokens"]) == ("scripted", ASK, 0.0, 300)

    [row] = calls(db_path)
    assert row["call_id"] == result.call_id
    assert (row["purpose"], row["model"], row["prompt_version"]) == ("summary", "openai/scripted", "summary@1")
    assert row["request_hash"] == hashlib.sha256(row["request"].encode()).hexdigest()
    request = json.loads(row["request"])
    assert request == {"model": "openai/scripted", "messages": ASK, "temperature": 0.0, "max_tokens": 300}
    assert "dummy" not in row["request"]  # the key is never stored
    assert json.loads(row["response"])["choices"][0]["message"]["content"] == GOOD
    assert (row["prompt_tokens"], row["completion_tokens"], row["cost"]) == (120, 15, None)
    assert row["latency_s"] > 0 and row["error"] is None and row["cached"] is False


@needs_litellm
def test_an_identical_request_is_answered_from_the_cache_and_logged_cached(scripted_server, db_path):
    scripted_server.play([text(GOOD)])
    first = make_client(scripted_server, db_path).complete("summary", "summary@1", ASK, json_schema=SCHEMA)
    scripted_server.play([])  # forget the request; an exhausted script would answer 500

    again = make_client(scripted_server, db_path).complete("summary", "summary@1", ASK, json_schema=SCHEMA)

    assert scripted_server.requests == []
    assert again.data == first.data and again.cached and again.call_id != first.call_id
    assert (again.usage.requests, again.usage.cached, again.usage.prompt_tokens) == (0, 1, 0)
    original, cached = calls(db_path)
    assert cached["cached"] is True and cached["request_hash"] == original["request_hash"]
    assert (cached["prompt_tokens"], cached["completion_tokens"], cached["cost"]) == (0, 0, 0.0)
    assert cached["response"] == original["response"] and cached["error"] is None


@needs_litellm
def test_a_different_request_or_no_cache_goes_to_the_model(scripted_server, db_path):
    scripted_server.play([text(GOOD)])
    make_client(scripted_server, db_path).complete("summary", "summary@1", ASK)

    scripted_server.play([text(GOOD), text(GOOD), text(GOOD)])
    make_client(scripted_server, db_path, temperature=0.7).complete("summary", "summary@1", ASK)
    make_client(scripted_server, db_path).complete("summary", "summary@1", ASK[:1] + [{"role": "user", "content": "?"}])
    result = make_client(scripted_server, db_path, cache=False).complete("summary", "summary@1", ASK)

    assert len(scripted_server.requests) == 3 and not result.cached
    rows = calls(db_path)
    assert [row["cached"] for row in rows] == [False] * 4
    assert len({row["request_hash"] for row in rows}) == 3  # the no-cache request repeats the first


@needs_litellm
@pytest.mark.parametrize(
    ("first_answer", "problem"),
    [
        ("The cause is the wrong folder.", "the answer is not valid JSON"),
        ('["cd", "ls"]', "the answer is JSON but a list, not an object"),
        ('{"cause": 3, "steps": []}', "at 'cause': 3 is not of type 'string'"),
        ('{"cause": "x", "steps": [], "extra": 1}', "Additional properties are not allowed ('extra' was unexpected)"),
    ],
)
def test_a_rejected_answer_is_shown_back_and_retried(scripted_server, db_path, first_answer, problem):
    scripted_server.play([text(first_answer), text(GOOD)])
    result = make_client(scripted_server, db_path).complete("summary", "summary@1", ASK, json_schema=SCHEMA)

    assert result.data["cause"] == "wrong folder" and result.attempts == 2
    retry = scripted_server.requests[1]["messages"]
    assert retry[:2] == ASK
    assert retry[2] == {"role": "assistant", "content": first_answer}
    assert retry[3]["role"] == "user" and problem in retry[3]["content"]
    rows = calls(db_path)
    assert len(rows) == 2 and all(row["error"] is None for row in rows)  # both calls were answered
    assert rows[0]["request_hash"] != rows[1]["request_hash"]
    assert result.call_id == rows[1]["call_id"]


@needs_litellm
def test_answers_invalid_every_time_raise_llm_error_after_max_attempts(scripted_server, db_path):
    scripted_server.play([text("no"), text('{"cause": "x"}'), text("```json\n{\"cause\": 1, \"steps\": []}\n```")])
    with pytest.raises(LLMError) as raised:
        make_client(scripted_server, db_path).complete("summary", "summary@1", ASK, json_schema=SCHEMA,
                                                       max_attempts=3)
    message = str(raised.value)
    assert "no acceptable answer in 3 attempts" in message and "1 is not of type 'string'" in message
    assert raised.value.usage.requests == 3
    assert len(calls(db_path)) == 3 and len(scripted_server.requests) == 3


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (GOOD, {"cause": "wrong folder", "steps": ["cd", "ls"]}),
        ("Here it is:\n```json\n" + GOOD + "\n```\nDone.", {"cause": "wrong folder", "steps": ["cd", "ls"]}),
        ("```\n{\"a\": 1}\n```", {"a": 1}),
        ("<think>maybe {not json}</think>\n{\"a\": 1}", {"a": 1}),
        ("  {\"a\": \"__import__('os')\"}  ", {"a": "__import__('os')"}),  # read as data, never run
    ],
)
def test_json_answers_are_read_bare_or_fenced(answer, expected):
    assert parse_json_answer(answer) == (expected, None)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [(None, "empty"), ("  ", "empty"), ("{'a': 1}", "not valid JSON"), ("42", "JSON but a int"),
     ("text {\"a\": 1} text", "not valid JSON")],
)
def test_what_is_not_a_json_object_is_named(answer, problem):
    value, error = parse_json_answer(answer)
    assert value is None and problem in error


# -- transport faults ---------------------------------------------------------------------------------------


@needs_litellm
@pytest.mark.parametrize(
    ("fault", "cause"),
    [(http_error(500), "InternalServerError"), (http_error(503, "overloaded"), "ServiceUnavailableError"),
     (malformed_body(), "InternalServerError")],
    ids=["500", "503", "malformed"],
)
def test_a_transport_fault_is_logged_and_retried(scripted_server, db_path, fault, cause):
    scripted_server.play([fault, text(GOOD)])
    result = make_client(scripted_server, db_path, retries=1).complete("summary", None, ASK, json_schema=SCHEMA)

    assert result.data["cause"] == "wrong folder" and result.usage.requests == 2
    failed, answered = calls(db_path)
    assert failed["error"].startswith(cause)
    assert failed["response"] is None and failed["prompt_tokens"] is None and failed["cached"] is False
    assert answered["error"] is None and failed["request_hash"] == answered["request_hash"]


@needs_litellm
def test_transport_faults_after_the_retries_raise_llm_error_with_the_cause(scripted_server, db_path):
    scripted_server.play([http_error(500), http_error(500), text(GOOD)])
    with pytest.raises(LLMError, match=r"summary: openai/scripted at http://127\.0\.0\.1:\d+/v1 failed after 2 "
                                       r"attempts: InternalServerError"):
        make_client(scripted_server, db_path, retries=1).complete("summary", None, ASK)
    assert [row["error"] is not None for row in calls(db_path)] == [True, True]

    # a failed request is not an answer: the same request goes to the model again
    make_client(scripted_server, db_path).complete("summary", None, ASK)
    assert len(scripted_server.requests) == 3


@needs_litellm
def test_a_client_error_is_not_retried(scripted_server, db_path):
    scripted_server.play([http_error(400, "bad request"), text(GOOD)])
    with pytest.raises(LLMError, match="after 1 attempt: BadRequestError"):
        make_client(scripted_server, db_path, retries=2).complete("summary", None, ASK)
    assert len(scripted_server.requests) == 1


@needs_litellm
def test_a_hang_past_the_timeout_is_recorded_as_an_error(scripted_server, db_path):
    scripted_server.play([hang(3.0)])
    started = time.perf_counter()
    with pytest.raises(LLMError, match="Timeout"):
        make_client(scripted_server, db_path, timeout=0.5).complete("summary", "summary@1", ASK)
    assert time.perf_counter() - started < 2.5
    [row] = calls(db_path)
    assert "Timeout" in row["error"] and row["response"] is None and row["latency_s"] >= 0.4


# -- the store is free while the model thinks -----------------------------------------------------------------


@needs_litellm
def test_the_store_is_not_held_during_the_http_call(scripted_server, db_path):
    seen = []

    def answer_after_reading(request):
        try:
            with Store(db_path, read_only=True, wait=0) as store:
                seen.append(store.scalar("SELECT count(*) FROM llm_calls"))
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion below
            seen.append(exc)
        return text(GOOD)

    scripted_server.respond_with(answer_after_reading)
    client = make_client(scripted_server, db_path)
    client.complete("summary", None, ASK)
    client.complete("summary", None, ASK + [{"role": "user", "content": "And?"}])
    assert seen == [0, 1]
    assert client.usage.requests == 2


@needs_litellm
def test_tools_are_sent_and_part_of_the_request(scripted_server, db_path):
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]
    scripted_server.play([tool_calls(("ls", {}))])
    result = make_client(scripted_server, db_path).complete("exploration", "explore@1", ASK, tools=tools)

    assert result.text is None and result.message["tool_calls"][0]["function"]["name"] == "ls"
    assert scripted_server.requests[0]["tools"] == tools
    [row] = calls(db_path)
    assert json.loads(row["request"])["tools"] == tools
    assert row["request_hash"] == hashlib.sha256(canonical_json(json.loads(row["request"])).encode()).hexdigest()


# -- prompts as versioned files ---------------------------------------------------------------------------

SUMMARY_VALUES = dict(pattern_id="1-0", size=7, step=40, dominant_signal="boundary", signal_meaning="mixed",
                      signal_counts="boundary 7, rare 2", representative="Task: list files", other_members="- a")


def test_every_shipped_prompt_loads_with_its_version():
    assert "summary" in available()
    for name in available():
        prompt = load_prompt(name)
        assert prompt.name == name and prompt.version and prompt.id == f"{name}@{prompt.version}"


def test_the_summary_prompt_renders_a_system_and_a_user_message():
    prompt = load_prompt("summary")
    assert prompt.id == "summary@1"
    assert prompt.placeholders == set(SUMMARY_VALUES)
    system, user = prompt.render(**SUMMARY_VALUES)
    assert system["role"] == "system" and user["role"] == "user"
    for key in ("failure_cause", "instability_pattern", "focus_pattern", "exploration_objectives", "do_not_repeat"):
        assert f'"{key}"' in system["content"]
    assert "Failure pattern 1-0: 7 flagged rollouts, found at training step 40." in user["content"]
    assert "Dominant signal: boundary (mixed)." in user["content"] and "Task: list files" in user["content"]
    assert "$" not in user["content"]


def test_missing_and_unexpected_values_are_refused():
    prompt = load_prompt("summary")
    partial = {k: v for k, v in SUMMARY_VALUES.items() if k not in ("size", "step")}
    with pytest.raises(PromptError, match="prompt summary@1 needs values for: size, step"):
        prompt.render(**partial)
    with pytest.raises(PromptError, match="no placeholder for: colour"):
        prompt.render(**SUMMARY_VALUES, colour="red")


def test_values_are_pasted_as_text_and_dollars_escape():
    prompt = parse_prompt("t", "<!-- version: 3 -->\nPay $$5 for ${item}s: $item\n")
    assert prompt.id == "t@3"
    assert prompt.render(item="$other") == [{"role": "user", "content": "Pay $5 for $others: $other"}]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("Hello $name\n", "must start with a line '<!-- version: N -->'"),
        ("<!-- version: 1 -->\nCost: $5\n", "line 1: '$' must start a placeholder"),
        ("<!-- version: 1 -->\nintro\n<!-- role: user -->\nhi\n", "text before the first"),
    ],
)
def test_malformed_prompt_files_are_refused(source, problem):
    with pytest.raises(PromptError, match=problem.replace("(", r"\(").replace("$", r"\$")):
        parse_prompt("t", source)


def test_an_unknown_prompt_name_lists_the_prompts():
    with pytest.raises(PromptError, match="no prompt named 'nope'; the prompts are: .*summary"):
        load_prompt("nope")
    assert isinstance(load_prompt("summary"), Prompt)


def test_one_function_calls_litellm_and_holds_the_retries():
    """The engine's LLMClient and the litellm agent reach a model through complete_with_retries alone."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    callers = []
    for path in sorted(p for folder in ("engine", "adapters", "trainers") for p in (root / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in ("completion", "acompletion"):
                    callers.append((path.relative_to(root).as_posix(), function.name))
    assert sorted(set(callers)) == [("adapters/agents/litellm_agent.py", "complete_with_retries")]
    users = {path.relative_to(root).as_posix() for folder in ("engine", "adapters") for path in
             (root / folder).rglob("*.py") if "complete_with_retries(" in path.read_text(encoding="utf-8")}
    assert users == {"adapters/agents/litellm_agent.py", "engine/models/llm.py"}
