"""LocalAgent on a tiny random Qwen3 built offline (tokenizer trained here, model from a config)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("trl")  # ships the Qwen3 chat template the tiny tokenizer uses

from agent_contract import AgentContract  # noqa: E402
from tiny_qwen import build_tiny_qwen3, qwen3_chat_template  # noqa: E402
from toy_env import TOOLS, CounterEnvironment, counter_task  # noqa: E402

from coevolve_engine.adapters.agents.local_agent import LocalAgent  # noqa: E402

CALL = '<tool_call>\n{"name": "add", "arguments": {"amount": 2}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    corpus = [
        "Add 2 to the counter.",
        "Now add 3.",
        "You operate a counter. Use the tools, then answer briefly.",
        json.dumps(TOOLS),
        CALL,
        "The counter is 5.",
        qwen3_chat_template(),
    ] * 3
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"), corpus)


def make_agent(path, **options):
    options.setdefault("max_new_tokens", 12)
    options.setdefault("max_model_calls_per_turn", 2)
    return LocalAgent(path, seed=0, **options)


class TestLocalAgentContract(AgentContract):
    @pytest.fixture
    def agent(self, tiny_model):
        return make_agent(tiny_model)


def test_a_random_model_plays_an_episode_to_a_recorded_result(tiny_model):
    env = CounterEnvironment()
    task = counter_task("c-1", ["Add 2 to the counter.", "Now add 3."], target=5)
    agent = make_agent(tiny_model)
    rollout = agent.run(env, task["task_id"], task["spec"])
    assert rollout.error is None and rollout.stop in ("done", "max_model_calls", "max_steps")
    assert rollout.policy == str(tiny_model)
    assert rollout.usage.llm_calls >= 1 and rollout.usage.cost is None
    assert rollout.usage.completion_tokens <= 12 * rollout.usage.llm_calls
    assert rollout.usage.prompt_tokens > 100  # the system prompt and three tool schemas
    # greedy decoding is repeatable
    again = make_agent(tiny_model).run(CounterEnvironment(), task["task_id"], task["spec"])
    assert again.messages == rollout.messages


def test_sampling_runs_too(tiny_model):
    task = counter_task("c-1", ["Add 2 to the counter."], target=2)
    rollout = make_agent(tiny_model, temperature=0.9, top_p=0.95).run(CounterEnvironment(), "c-1", task["spec"])
    assert rollout.error is None and rollout.usage.llm_calls >= 1


def test_the_chat_is_built_one_answer_at_a_time_as_the_template_renders_it(tiny_model):
    from transformers import AutoTokenizer

    from coevolve_engine.adapters.agents.chat_tokens import ChatTokens

    call = {"id": "call_1_0", "type": "function", "function": {"name": "add", "arguments": '{"amount": 2}'}}
    messages = [
        {"role": "system", "content": "You operate a counter."},
        {"role": "user", "content": "Add 2 to the counter."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1_0", "name": "add", "content": "2"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Now add 3."},
        {"role": "assistant", "content": "Done."},
    ]
    chat = ChatTokens(AutoTokenizer.from_pretrained(tiny_model))
    tokens = chat.episode(messages, TOOLS)
    prompt = chat.tokenizer.decode(tokens.prompt_ids)
    assert prompt.startswith("<|im_start|>system\nYou operate a counter.\n\n# Tools")
    assert json.dumps(TOOLS[0]) in prompt and prompt.endswith("<|im_start|>assistant\n")
    pieces, current, flag = [], [], None
    for token, mask in zip(tokens.completion_ids, tokens.mask):
        if mask != flag and current:
            pieces.append((flag, chat.tokenizer.decode(current)))
            current = []
        flag = mask
        current.append(token)
    pieces.append((flag, chat.tokenizer.decode(current)))
    assert pieces == [
        (1, CALL + "<|im_end|>"),
        (0, "\n<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
        (1, "Done.<|im_end|>"),
        (0, "\n<|im_start|>user\nNow add 3.<|im_end|>\n<|im_start|>assistant\n"),
        (1, "Done.<|im_end|>"),
    ]


def test_generated_text_keeps_tool_call_tags(tiny_model):
    agent = make_agent(tiny_model)
    _, tokenizer = agent.load()
    ids = tokenizer(CALL + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids)[0] == "<tool_call>"
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert text.split(tokenizer.eos_token)[0] == CALL


def test_a_missing_model_path_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model at"):
        LocalAgent(tmp_path / "nope")


def test_a_model_that_cannot_load_is_a_rollout_with_an_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    rollout = LocalAgent(tmp_path).run(CounterEnvironment(), "c-1", {"turns": ["Add 2."], "target": 2})
    assert rollout.stop == "error" and rollout.error.startswith("model call 1 (turn 1): ")
    assert str(tmp_path) in rollout.error or "LocalAgent" in rollout.error
