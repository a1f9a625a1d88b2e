"""A single-turn BFCL episode: the agent's calls are recorded, not run, and scored by bfcl's AST checker.

The agent sees the task's functions as OpenAI tools (dots in names become underscores) and answers with
calls. ``score`` hands every recorded call to ``bfcl_eval``'s ``ast_checker`` with the task's category
(simple, multiple, parallel, parallel_multiple) and a function-calling model configuration that applies the
same renaming, as the leaderboard does for function-calling models.
"""

from __future__ import annotations

import copy
from typing import Any

from coevolve_engine.core.environment import Episode, Observation, Score, ToolCall
from coevolve_engine.adapters.environments.bfcl.api_state import is_literal
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module
from coevolve_engine.adapters.environments.bfcl.tool_schemas import to_tool_schema, tool_name

#: A key of bfcl's MODEL_CONFIG_MAPPING whose config has ``underscore_to_dot`` set (an OpenAI FC model), so the
#: checker expects ``math_factorial`` for the function ``math.factorial``, matching the tools we show.
AST_CHECKER_MODEL = "gpt-4o-2024-11-20-FC"

RECORDED = "Call recorded. This task is scored on the calls themselves; no result is returned."


class SingleTurnEpisode(Episode):
    """One attempt at a single-turn BFCL task."""

    def __init__(self, task_id: str, spec: dict[str, Any]) -> None:
        self.task_id = task_id
        self._spec = spec
        self._messages = spec["turns"][0]
        self._tools = [to_tool_schema(doc) for doc in spec["functions"]]
        self._names = {schema["function"]["name"] for schema in self._tools}
        self._state = "before"  # before -> open -> done
        self._calls: list[ToolCall] = []
        self._refused: list[str] = []
        self.reply: str | None = None

    @property
    def calls(self) -> list[ToolCall]:
        """The calls the agent made, in order."""
        return list(self._calls)

    def system_prompt(self) -> str | None:
        system = [m["content"] for m in self._messages if m.get("role") == "system"]
        return "\n".join(system) if system else None

    def next_turn(self) -> str | None:
        if self._state == "before":
            self._state = "open"
            return "\n".join(m["content"] for m in self._messages if m.get("role") == "user")
        self._state = "done"
        return None

    def tools(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self._tools) if self._state == "open" else []

    def execute(self, call: ToolCall) -> Observation:
        if self._state != "open":
            return Observation("Error: no turn in progress", "no turn in progress; call next_turn() first")
        problem = self._problem(call)
        if problem is not None:
            self._refused.append(problem)
            return Observation(f"Error: {problem}", problem)
        self._calls.append(ToolCall(call.name, copy.deepcopy(call.arguments), call.call_id))
        return Observation(RECORDED)

    def end_turn(self, reply: str | None) -> None:
        if self._state == "open":
            self.reply = reply
            self._state = "done"

    def score(self) -> Score:
        if self._refused:
            return Score(0.0, False, f"invalid call: {self._refused[0]}")
        checker = bfcl_module("eval_checker.ast_eval.ast_checker")
        language = bfcl_module("constants.enums").Language.PYTHON
        model_output = [{call.name: copy.deepcopy(call.arguments)} for call in self._calls]
        try:
            verdict = checker.ast_checker(
                copy.deepcopy(self._spec["functions"]),
                model_output,
                copy.deepcopy(self._spec["ground_truth"]),
                language,
                self._spec["category"],
                AST_CHECKER_MODEL,
            )
        except Exception as exc:  # the checker choking on an odd answer is a failed answer
            return Score(0.0, False, f"the AST checker rejected the calls: {type(exc).__name__}: {exc}")
        if verdict["valid"]:
            return Score(1.0, True, f"{len(self._calls)} call(s) match the accepted answers")
        errors = "; ".join(str(error) for error in verdict.get("error", []))[:300]
        return Score(0.0, False, f"{verdict.get('error_type', 'ast_checker')}: {errors}")

    def _problem(self, call: ToolCall) -> str | None:
        if not isinstance(call.name, str) or call.name not in self._names:
            return f"unknown tool {call.name!r}; available: {', '.join(sorted(self._names))}"
        if not isinstance(call.arguments, dict) or not all(isinstance(k, str) for k in call.arguments):
            return f"{call.name}: arguments must be an object with string keys"
        if not is_literal(call.arguments):
            return f"{call.name}: arguments must be literals (numbers, strings, booleans, lists, objects)"
        return None


def reference_calls(spec: dict[str, Any]) -> list[ToolCall]:
    """One accepted answer built from the ground truth.

    A parameter whose acceptable values include bfcl's "may be left out" marker ``""`` is left out unless
    the function requires it; every other parameter takes its first acceptable value.
    """
    required = {
        doc["name"]: set((doc.get("parameters") or {}).get("required") or []) for doc in spec["functions"]
    }
    calls = []
    for expected in spec["ground_truth"]:
        (name, parameters), = expected.items()
        arguments = {}
        for parameter, options in parameters.items():
            value = _choose(options, parameter in required.get(name, set()))
            if value is not _OMITTED:
                arguments[parameter] = value
        calls.append(ToolCall(tool_name(name), arguments))
    return calls


_OMITTED = object()


def _choose(options: list[Any], required: bool = False) -> Any:
    """An acceptable value made concrete, or ``_OMITTED`` when leaving it out is accepted."""
    given = [option for option in options if option != ""]
    if not given or ("" in options and not required):
        return _OMITTED
    return _concrete(given[0])


def _concrete(value: Any) -> Any:
    """Nested dicts in answers list acceptable values per key too; choose one for each key."""
    if isinstance(value, dict):
        chosen = {
            key: _choose(options) if isinstance(options, list) else options for key, options in value.items()
        }
        return {key: item for key, item in chosen.items() if item is not _OMITTED}
    if isinstance(value, list):
        return [_concrete(item) for item in value]
    return value
