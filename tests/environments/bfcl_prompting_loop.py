"""BFCL's prompting loop with its Qwen handler, and our token path, driven by the same scripted answer texts.

``bfcl_qwen_run`` drives ``inference_multi_turn_prompting`` of bfcl_eval's ``QwenFCHandler`` (the loop and
handler BFCL runs Qwen2.5 and Qwen3 with, from their weights), its model query answered from a script instead of a
vLLM server, then scores the result as bfcl's evaluation does (the FC reference's ``evaluate``). ``token_run``
plays the same task with our player and a ``TokenPolicy`` (the token path of ``eval`` and trl-grpo) on Qwen3's real
vocabulary, its model answering with the same texts as token ids.

A script is one list of answer texts per user turn. Each loop takes the next answer of the turn it is in; a turn
whose answers are used up answers "Done." (no calls), so a loop that ended a turn early or late shows up as a
difference in the calls.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from bfcl_reference_loop import _call, _forget, _run_ids, _wrong, call_tuple, evaluate

from coevolve_engine.adapters.agents.base import Agent, EpisodeLimits
from coevolve_engine.adapters.agents.local_agent import TokenPolicy
from coevolve_engine.adapters.agents.player import play_all, start_play
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module

TextScript = list[list[str]]
DONE = "Done."


def text_at(script: TextScript, turn: int, step: int) -> str:
    answers = script[turn] if turn < len(script) else []
    return answers[step] if step < len(answers) else DONE


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """A call as bfcl's ``convert_to_function_call`` writes it (what its loop runs and names tool results by)."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


@dataclass
class TokenLoopRun:
    """What one loop did with a task: each call run with its result (in order), the calls per turn as the checker
    reads them, the verdict, and the first turn the checker refuses (None: accepted)."""

    runs: list[tuple[str, str]]
    calls_per_turn: list[list[tuple[str, dict[str, Any]]]]
    valid: bool
    failed_turn: int | None


def bfcl_qwen_run(entry: dict[str, Any], truth: list[list[str]], script: TextScript) -> TokenLoopRun:
    """bfcl_eval's ``inference_multi_turn_prompting`` with ``QwenFCHandler`` on ``entry``, answers from ``script``."""
    qwen = bfcl_module("model_handler.local_inference.qwen_fc")

    def query(inference_data: dict) -> tuple[Any, float]:  # the model: the script, not a vLLM server
        messages = inference_data["message"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        turn, step = len(users) - 1, sum(m["role"] == "assistant" for m in messages[users[-1]:])
        handler._format_prompt(messages, inference_data["function"])  # the handler formats every prompt
        return SimpleNamespace(choices=[SimpleNamespace(text=text_at(script, turn, step))],
                               usage=SimpleNamespace(prompt_tokens=1, completion_tokens=1)), 0.0

    tag = f"coevolve_qwen_{next(_run_ids)}"
    handler = qwen.QwenFCHandler(tag, 0.0, tag, True)
    handler._query_prompting = query
    entry = copy.deepcopy(entry)
    holder: dict[str, Any] = {}
    original = handler._add_execution_results_prompting

    def keep(inference_data: dict, execution_results: list[str], model_response_data: dict) -> dict:
        holder["data"] = inference_data
        return original(inference_data, execution_results, model_response_data)

    handler._add_execution_results_prompting = keep
    try:
        result, _ = handler.inference_multi_turn_prompting(entry, include_input_log=False, exclude_state_log=True)
    finally:
        _forget(handler.model_name_underline_replaced)
    messages = holder.get("data", {"message": []})["message"]
    runs = [(m["name"], m["content"]) for m in messages if m["role"] == "tool"]
    decoded, valid, failed = evaluate(handler, entry, result, truth)
    return TokenLoopRun(runs, [[call_tuple(text) for step in turn for text in step] for turn in decoded], valid,
                        failed)


class ScriptedTokenModel:
    """A causal LM's ``generate`` answering with a given text, as Qwen3's token ids ending in ``<|im_end|>``."""

    training = False

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.text, self.prompts = tokenizer, DONE, []

    def eval(self):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        import torch

        ids = input_ids[0].tolist()
        self.prompts.append(ids)
        new = self.tokenizer(self.text + "<|im_end|>", add_special_tokens=False)["input_ids"]
        return SimpleNamespace(sequences=torch.tensor([ids + new]))


class ScriptedTokenPolicy(Agent):
    """Our token path: a ``TokenPolicy`` whose model writes the script's answer for the episode's turn and step."""

    policy = "scripted"
    batched = True

    def __init__(self, tokenizer, script: TextScript, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.script, self.limits, self.model = script, EpisodeLimits(), ScriptedTokenModel(tokenizer)
        self.core = TokenPolicy(self.model, tokenizer, max_new_tokens=4096, chat_template_kwargs=chat_template_kwargs)

    def complete(self, messages, tools):  # pragma: no cover - respond is used
        raise NotImplementedError

    def respond(self, plays: list[Any]) -> list[Any]:
        replies = []
        for play in plays:
            self.model.text = text_at(self.script, play.turn - 1, play.answers_this_turn)
            replies += self.core.respond([play])
        return replies


def token_run(environment: Any, task: dict[str, Any], script: TextScript, tokenizer,
              chat_template_kwargs: dict[str, Any] | None = None) -> tuple[TokenLoopRun, Any]:
    """Our player on the token path with the scripted answers; the run and the rollout."""
    agent = ScriptedTokenPolicy(tokenizer, script, chat_template_kwargs)
    play = start_play(environment, task["task_id"], task["spec"], agent)
    episode = play.episode
    rollout = play_all([play], agent)[0]
    results = [m["content"] for m in rollout.messages if m["role"] == "tool"]
    runs = [(call_string(a["name"], a["arguments"]), result) for a, result in zip(rollout.actions, results)]
    calls = [[call_tuple(text) for text in turn] for turn in episode.calls_by_turn[:rollout.turns]]
    return TokenLoopRun(runs, calls, rollout.success, rollout.failed_turn), rollout


# -- scripts ----------------------------------------------------------------------------------------------------

def block(name: str, arguments: Any) -> str:
    """A ``<tool_call>`` block as Qwen writes one."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def blocks(calls: list[tuple[str, str]]) -> str:
    return "\n".join(block(name, json.loads(arguments)) for name, arguments in calls)


MALFORMED = '<tool_call>\n{"name": "ls", "arguments": {"a": \n</tool_call>'  # json.loads refuses it: dropped

#: (kind, thinking on): every kind of answer the token path must read as BFCL's Qwen handler does
TEXT_SCRIPT_KINDS = (("one_call_per_answer", False), ("valid_and_malformed", True), ("only_malformed", False),
                     ("empty_think", True), ("not_an_object", False), ("think_then_parallel", True),
                     ("arguments_not_object", False), ("unframed_and_in_think", True), ("arguments_as_text", False),
                     ("wrong_argument_turn_1", True), ("cap_hit", False), ("valid_and_malformed", False),
                     ("empty_think", True), ("cap_hit_last_turn", True))


def text_script(kind: str, truth: list[list[str]], order: dict[str, list[str]]) -> TextScript:
    """Scripted answer texts of one kind for a task whose ground truth is ``truth``."""
    turns = [[_call(text, order) for text in turn] for turn in truth]
    script: TextScript = []
    for index, calls in enumerate(turns):
        if kind == "think_then_parallel" and calls:
            answers = [f"<think>\nturn {index}: all at once\n</think>\n\n{blocks(calls)}", "<think>\nok\n</think>\n\nDone."]
        elif kind == "empty_think":
            answers = [f"<think>\n\n</think>\n\n{blocks([call])}" for call in calls] + ["<think>\n\n</think>\n\nDone."]
        elif kind == "arguments_as_text":
            answers = [f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
                       for name, arguments in calls] + [DONE]
        else:
            answers = [blocks([call]) for call in calls] + [DONE]
        script.append(answers)
    nonempty = [i for i, calls in enumerate(turns) if calls]
    first, last = (nonempty[0], nonempty[-1]) if nonempty else (0, 0)
    if kind == "valid_and_malformed" and turns[first]:  # the valid call runs, the malformed block is dropped
        script[first][0] = f"{blocks([turns[first][0]])}\n{MALFORMED}"
    elif kind == "only_malformed":  # no call kept: the turn ends there, its calls never made
        script[first].insert(0, f"Let me look.\n{MALFORMED}")
    elif kind == "not_an_object" and turns[last]:  # decode_execute refuses the answer: nothing of it runs
        script[last].insert(len(turns[last]) // 2, f"{blocks([turns[last][0]])}\n<tool_call>\n[1, 2]\n</tool_call>")
    elif kind == "arguments_not_object" and turns[first]:  # decode_execute refuses it too
        name = turns[first][0][0]
        script[first].insert(0, f"{blocks([turns[first][0]])}\n{block(name, ['not', 'an', 'object'])}")
    elif kind == "unframed_and_in_think" and turns[first]:  # neither counts; the call after the reasoning runs
        name, arguments = turns[first][0]
        unframed = f"<tool_call>{json.dumps({'name': name, 'arguments': json.loads(arguments)})}</tool_call>"
        script[first][0] = f"<think>\nmaybe {blocks([('cd', json.dumps({'folder': 'x'}))])}\n</think>\n\n" \
                           f"{unframed}\n{blocks([turns[first][0]])}"
    elif kind == "wrong_argument_turn_1" and turns[first]:
        script[first][0] = blocks([_wrong(turns[first][0])])
    elif kind in ("cap_hit", "cap_hit_last_turn") and turns[first]:
        at = last if kind == "cap_hit_last_turn" else first
        script[at] = [blocks([call]) for call in turns[at]] + [blocks([turns[at][-1]])] * 25
    return script

