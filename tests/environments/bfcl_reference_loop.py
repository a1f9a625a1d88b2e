"""BFCL's own multi-turn inference loop and our episode player, driven by the same scripted answers.

``bfcl_run`` drives ``inference_multi_turn_FC`` of bfcl_eval's OpenAI-compatible handler (the loop BFCL runs for
every FC model served behind an OpenAI-compatible API), its model query answered from a script instead of a
server, then scores the result as bfcl's evaluation does (``multi_turn_runner``: a force-terminated entry fails,
the others are decoded step by step and checked by ``multi_turn_checker``). ``our_run`` plays the same task
with our player, the answers parsed by the served-model path (``parse_completion``).

A script is one list of answers per user turn; an answer is ``(content, [(name, arguments text), ...])``. Each
loop takes the next answer of the turn it is in; a turn whose answers are used up answers "Done." (no calls),
so a loop that ended a turn early or late shows up as a difference in the messages.

bfcl's executor keeps instances in its module globals keyed by the model name and ``eval``s the call strings it
builds: each run here uses a model name of its own, and the globals it leaves are deleted afterwards.
"""

from __future__ import annotations

import ast
import copy
import itertools
import json
from dataclasses import dataclass
from typing import Any

from coevolve_engine.adapters.agents.base import Agent, ModelReply
from coevolve_engine.adapters.agents.litellm_agent import parse_completion
from coevolve_engine.adapters.agents.player import play_all, start_play
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module

Answer = tuple[str | None, list[tuple[str, str]]]
Script = list[list[Answer]]
DONE: Answer = ("Done.", [])

_run_ids = itertools.count()


def completion(answer: Answer, turn: int, step: int) -> dict[str, Any]:
    """The chat completion a server would send for ``answer`` (ids made from the turn and the step)."""
    content, calls = answer
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call_{turn}_{step}_{i}", "type": "function",
                                  "function": {"name": name, "arguments": arguments}}
                                 for i, (name, arguments) in enumerate(calls)]
    return {"id": "scripted", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def answer_at(script: Script, turn: int, step: int) -> Answer:
    answers = script[turn] if turn < len(script) else []
    return answers[step] if step < len(answers) else DONE


def call_tuple(text: str) -> tuple[str, dict[str, Any]]:
    """A Python call string (keyword arguments of literals) as (name, arguments)."""
    call = ast.parse(text, mode="eval").body
    assert isinstance(call, ast.Call) and not call.args, text
    return ast.unparse(call.func), {k.arg: ast.literal_eval(k.value) for k in call.keywords}


@dataclass
class LoopRun:
    """What one loop did with a task: the chat (OpenAI messages), the tools of each model query, the calls
    executed per turn, the verdict, and the first turn the checker refuses (None: accepted)."""

    messages: list[dict[str, Any]]
    tools_per_query: list[list[str]]
    calls_per_turn: list[list[tuple[str, dict[str, Any]]]]
    valid: bool
    failed_turn: int | None


def _clean(message: Any) -> dict[str, Any]:
    """An OpenAI message (a dict or the SDK's object) as a plain dict without empty fields."""
    if hasattr(message, "model_dump"):
        message = message.model_dump(exclude_none=True)
    message = {key: value for key, value in message.items() if value is not None}
    if message.get("role") == "assistant" and message.get("tool_calls"):
        message["tool_calls"] = [{"id": c["id"], "type": c["type"], "function": {
            "name": c["function"]["name"], "arguments": c["function"]["arguments"]}} for c in message["tool_calls"]]
    return message


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def _forget(tag: str) -> None:
    executor = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    for name in [name for name in vars(executor) if name.startswith(tag)]:
        del vars(executor)[name]


def bfcl_checker_verdict(entry: dict[str, Any], decoded: list[list[list[str]]], truth: list[list[str]]) -> bool:
    """``multi_turn_checker`` on the decoded answers, in a namespace of its own."""
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
    tag = f"coevolve_check_{next(_run_ids)}"
    try:
        return bool(checker.multi_turn_checker(decoded, truth, entry, entry["id"].rsplit("_", 1)[0], tag)["valid"])
    finally:
        _forget(tag)


def first_refused_turn(entry: dict[str, Any], decoded: list[list[list[str]]], truth: list[list[str]]) -> int | None:
    """The first t (1-based) at which bfcl's checker, run on the first t turns, refuses the episode; a
    force-terminated episode (fewer turns than the ground truth) is refused at its last turn played."""
    for t in range(1, len(decoded) + 1):
        if not bfcl_checker_verdict(entry, decoded[:t], truth[:t]):
            return t
    return len(decoded) if len(decoded) < len(truth) else None


def bfcl_entries(category: str) -> dict[str, dict[str, Any]]:
    """bfcl's own test entries of a category (function docs populated as its generation does), by id."""
    utils = bfcl_module("utils")
    return {entry["id"]: entry for entry in utils.load_dataset_entry(category, include_language_specific_hint=False)}


def bfcl_run(entry: dict[str, Any], truth: list[list[str]], script: Script) -> LoopRun:
    """bfcl_eval's ``inference_multi_turn_FC`` on ``entry`` with scripted answers, then its evaluation."""
    base_handler = bfcl_module("model_handler.base_handler")
    openai_handler = bfcl_module("model_handler.api_inference.openai_completion")
    enums = bfcl_module("constants.enums")
    openai_types = __import__("openai.types.chat", fromlist=["ChatCompletion"])
    tools_per_query: list[list[str]] = []

    class ScriptedFCHandler(openai_handler.OpenAICompletionsHandler):
        def __init__(self, model_name: str) -> None:  # no client: the script answers
            base_handler.BaseHandler.__init__(self, model_name, 0.0, model_name, True)
            self.model_style = enums.ModelStyle.OPENAI_COMPLETIONS

        def _query_FC(self, inference_data: dict) -> tuple[Any, float]:
            messages = [_clean(m) for m in inference_data["message"]]
            users = [i for i, m in enumerate(messages) if m["role"] == "user"]
            turn, step = len(users) - 1, sum(m["role"] == "assistant" for m in messages[users[-1]:])
            tools_per_query.append(_tool_names(inference_data["tools"]))
            return openai_types.ChatCompletion.model_validate(
                completion(answer_at(script, turn, step), turn, step)), 0.0

    tag = f"coevolve_loop_{next(_run_ids)}"
    handler = ScriptedFCHandler(tag)
    entry = copy.deepcopy(entry)
    holder: dict[str, Any] = {}
    original = handler._add_assistant_message_FC

    def keep(inference_data: dict, model_response_data: dict) -> dict:
        holder["data"] = inference_data
        return original(inference_data, model_response_data)

    handler._add_assistant_message_FC = keep
    try:
        result, _ = handler.inference_multi_turn_FC(entry, include_input_log=False, exclude_state_log=True)
    finally:
        _forget(handler.model_name_underline_replaced)
    decoded, valid, failed = evaluate(handler, entry, result, truth)
    return LoopRun([_clean(m) for m in holder["data"]["message"]], tools_per_query,
                   [[call_tuple(text) for step in turn for text in step] for turn in decoded], valid, failed)


def evaluate(handler: Any, entry: dict[str, Any], result: list[list[Any]], truth: list[list[str]]
             ) -> tuple[list[list[list[str]]], bool, int | None]:
    """A loop's result scored as bfcl's ``multi_turn_runner`` scores it: each step decoded with the handler (what
    does not decode is ignored), a force-terminated entry (fewer turns than the ground truth) refused, the rest
    checked by ``multi_turn_checker``. Returns (the decoded steps per turn, the verdict, the first refused turn)."""
    decoded: list[list[list[str]]] = []
    for turn in result:
        steps = []
        for step in turn:
            try:
                calls = handler.decode_execute(step, has_tool_call_tag=False)
            except Exception:  # noqa: BLE001 - bfcl ignores what does not decode
                continue
            if not bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils").is_empty_execute_response(calls):
                steps.append(calls)
        decoded.append(steps)
    checked = {"id": entry["id"], "initial_config": entry["initial_config"],
               "involved_classes": entry["involved_classes"]}
    valid = len(result) == len(truth) and bfcl_checker_verdict(checked, decoded, truth)
    return decoded, valid, None if valid else first_refused_turn(checked, decoded, truth)


class ScriptedServedModel(Agent):
    """Our side: the same script, each answer parsed as a served model's completion."""

    policy = "scripted"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.tools_per_query: list[list[str]] = []

    def complete(self, messages, tools):  # pragma: no cover - respond is used
        raise NotImplementedError

    def respond(self, plays: list[Any]) -> list[Any]:
        replies = []
        for play in plays:
            turn, step = play.turn - 1, play.answers_this_turn
            self.tools_per_query.append(_tool_names(play.tools))
            replies.append(parse_completion(completion(answer_at(self.script, turn, step), turn, step)))
        return replies


def our_run(environment: Any, task: dict[str, Any], script: Script) -> tuple[LoopRun, Any]:
    """Our player on the task with the scripted answers; the run and the rollout."""
    agent = ScriptedServedModel(script)
    play = start_play(environment, task["task_id"], task["spec"], agent)
    episode = play.episode
    rollout = play_all([play], agent)[0]
    messages = [{key: value for key, value in message.items() if not (message["role"] == "tool" and key == "name")}
                for message in rollout.messages]
    calls = [[call_tuple(text) for text in turn] for turn in episode.calls_by_turn[:rollout.turns]]
    return LoopRun([_clean(m) for m in messages], agent.tools_per_query, calls, rollout.success,
                   rollout.failed_turn), rollout


# -- scripts ----------------------------------------------------------------------------------------------------

def _call(text: str, order: dict[str, list[str]]) -> tuple[str, str]:
    """A ground-truth call string as a (name, JSON arguments) tool call; positional arguments named."""
    call = ast.parse(text, mode="eval").body
    name = ast.unparse(call.func)
    arguments = {order[name][i]: ast.literal_eval(arg) for i, arg in enumerate(call.args)}
    arguments.update({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return name, json.dumps(arguments)


def _wrong(call: tuple[str, str]) -> tuple[str, str]:
    name, arguments = call
    values = json.loads(arguments)
    if not values:
        return name, json.dumps({"unexpected": "value"})
    key = sorted(values)[0]
    value = values[key]
    values[key] = (value + "_x") if isinstance(value, str) else (not value) if isinstance(value, bool) else \
        (value + 7) if isinstance(value, (int, float)) else "wrong"
    return name, json.dumps(values)


SCRIPT_KINDS = ("one_call_per_answer", "parallel_with_think", "malformed_first", "malformed_mid_turn",
                "wrong_argument_turn_1", "cap_hit", "cap_hit_last_turn", "think_then_stop",
                "held_out_called_early", "parallel_with_think")


def script_for(kind: str, truth: list[list[str]], order: dict[str, list[str]],
               held_out: dict[str, list[str]] | None = None) -> Script:
    """Scripted answers of one kind for a task whose ground truth is ``truth`` (``held_out``: its miss_func
    tools by the turn that releases them)."""
    turns = [[_call(text, order) for text in turn] for turn in truth]
    script: Script = []
    for index, calls in enumerate(turns):
        if kind == "parallel_with_think" and calls:
            answers = [(f"<think>\nturn {index}: all at once\n</think>\n\n", calls),
                       ("<think>\nok\n</think>\n\nDone.", [])]
        elif kind == "think_then_stop":
            answers = [(f"<think>\nturn {index}\n</think>\n\n", [call]) for call in calls] + \
                [("<think>\nnothing left\n</think>\n\nAll done.", [])]
        else:
            answers = [(None, [call]) for call in calls] + [("Done.", [])]
        script.append(answers)
    first = next((i for i, calls in enumerate(turns) if calls), 0)
    last = max((i for i, calls in enumerate(turns) if calls), default=0)
    if kind == "malformed_first":  # the turn ends at the undecodable answer: its other answers are never asked
        script[first].insert(0, (None, [(turns[first][0][0] if turns[first] else "ls", "{'not': json")]))
    elif kind == "malformed_mid_turn" and turns[last]:
        script[last].insert(len(turns[last]) // 2 + 1, ("<think>\nhm\n</think>\n\n",
                                                        [turns[last][0], (turns[last][0][0], "{")]))
    elif kind == "wrong_argument_turn_1" and turns[first]:
        script[first][0] = (None, [_wrong(turns[first][0])])
    elif kind == "held_out_called_early":  # a tool called before the turn that releases it (it runs in BFCL)
        names = {name for names in (held_out or {}).values() for name in names}
        early = next((call for calls in turns for call in calls if call[0] in names), None)
        if early is not None:
            script[0].insert(0, (None, [early]))
    elif kind in ("cap_hit", "cap_hit_last_turn") and turns[first]:
        at = last if kind == "cap_hit_last_turn" else first
        repeat = turns[at][-1]
        script[at] = [(None, [call]) for call in turns[at]] + [(None, [repeat])] * 25
    return script
