"""A multi-turn BFCL episode: the agent works on its own API instances, checked turn by turn.

Scoring follows bfcl's ``multi_turn_checker`` rule for rule, on our instances instead of its executor's:
a second, independent ``APIState`` replays the ground truth in lockstep, and after every turn whose ground
truth is not empty

1. the agent must have made at least one call in that turn (``multi_turn:empty_turn_model_response``);
2. bfcl's ``state_checker`` compares every declared instance's public attributes with the ground truth's;
3. bfcl's ``response_checker`` requires every ground-truth result of the turn among the agent's results so far.

The first failing turn decides the verdict, and is the score's ``failed_turn`` (1-based): exactly the first t
at which bfcl's ``multi_turn_checker``, run on the episode's first t turns, refuses it. Turns whose ground
truth is empty (miss_param, miss_func) are not checked, but the agent's calls in them still change the state
that later turns are checked against.

A miss_func tool is shown from the turn that releases it, but a call to it runs in any turn, as in BFCL's
executor (every public method of the declared classes is callable there).
"""

from __future__ import annotations

import copy
from typing import Any

from coevolve_engine.adapters.calls import format_python_call
from coevolve_engine.core.environment import Episode, Observation, Score, ToolCall
from coevolve_engine.adapters.environments.bfcl.api_state import APIState, refusal
from coevolve_engine.adapters.environments.bfcl.shipped import added_functions_prompt, bfcl_module
from coevolve_engine.adapters.environments.bfcl.specs import ground_truth_calls, multi_turn_docs
from coevolve_engine.adapters.environments.bfcl.tool_schemas import to_tool_schema


class MultiTurnEpisode(Episode):
    """One attempt at a multi-turn BFCL task."""

    def __init__(self, task_id: str, spec: dict[str, Any]) -> None:
        self.task_id = task_id
        self._spec = spec
        classes, config = spec["involved_classes"], spec.get("initial_config", {})
        long_context = bool(spec.get("long_context", False))
        self._api = APIState(classes, config, long_context)
        self._truth = APIState(classes, config, long_context)
        self._truth_calls = ground_truth_calls(spec)
        self._docs = {doc["name"]: doc for doc in multi_turn_docs(spec)}
        held = {name for names in spec.get("missed_function", {}).values() for name in names}
        self._available = [name for name in self._docs if name not in held]
        self._schemas: dict[str, dict[str, Any]] = {}
        self._turn = -1
        self._open = False
        self._calls: list[list[str]] = []
        self._results: list[str] = []
        self._replies: list[str | None] = []
        self._failure: str | None = None
        self._failed_turn: int | None = None  # 1-based, the first turn the checks refused

    @property
    def calls_by_turn(self) -> list[list[str]]:
        """The agent's calls so far, one list of Python call strings per started turn."""
        return [list(turn) for turn in self._calls]

    def next_turn(self) -> str | None:
        if self._open:
            self.end_turn(None)
        turns = self._spec["turns"]
        if self._turn + 1 >= len(turns):
            return None
        self._turn += 1
        self._open = True
        self._calls.append([])
        released = self._spec.get("missed_function", {}).get(str(self._turn), [])
        self._available += [name for name in released if name not in self._available]
        messages = turns[self._turn]
        if released and not messages:
            return added_functions_prompt()
        return "\n".join(m["content"] for m in messages if m.get("role") == "user")

    def tools(self) -> list[dict[str, Any]]:
        for name in self._available:
            if name not in self._schemas:
                self._schemas[name] = to_tool_schema(self._docs[name])
        return copy.deepcopy([self._schemas[name] for name in self._available])

    def execute(self, call: ToolCall) -> Observation:
        if not self._open:
            outcome = refusal("no turn in progress; call next_turn() first")
            return Observation(outcome.result, outcome.error)
        self._calls[-1].append(_describe(call))
        outcome = self._api.call(call)
        self._results.append(outcome.result)
        return Observation(outcome.result, outcome.error)

    def end_turn(self, reply: str | None) -> None:
        if not self._open:
            return
        self._open = False
        self._replies.append(reply)
        if self._failure is None:
            self._failure = self._check_turn(self._turn)
            self._failed_turn = None if self._failure is None else self._turn + 1

    def score(self) -> Score:
        """The verdict so far; an open turn is ended first, and turns never started count as empty."""
        if self._open:
            self.end_turn(None)
        if self._failure is not None:
            return Score(0.0, False, self._failure, failed_turn=self._failed_turn)
        truth = self._spec["ground_truth"]
        for index in range(self._turn + 1, len(truth)):
            if truth[index]:
                return Score(0.0, False, f"turn {index}: not played (Model response list is empty for turn {index})",
                             failed_turn=index + 1)
        return Score(1.0, True, f"state and responses match the ground truth after each of {len(truth)} turns")

    def _check_turn(self, index: int) -> str | None:
        """bfcl's per-turn checks; a failure reason, or None when the turn passes or is not checked."""
        truth_results = [self._truth.call(call).result for call in self._truth_calls[index]]
        if not self._spec["ground_truth"][index]:
            return None
        if not self._calls[index]:
            return f"turn {index}: multi_turn:empty_turn_model_response: no call made"
        checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
        state = checker.state_checker(self._api.instances, self._truth.instances)
        if not state["valid"]:
            differing = ", ".join(sorted(state["details"]["differences"]))
            return f"turn {index}: {state['error_type']}: {state['error_message']} (differs in: {differing})"
        response = checker.response_checker(self._results, truth_results, index)
        if not response["valid"]:
            missing = "; ".join(_shorten(item) for item in response["details"]["missing_items"][:3])
            return f"turn {index}: {response['error_type']}: missing results: {missing}"
        return None


def _describe(call: ToolCall) -> str:
    try:
        return format_python_call(call)
    except Exception:  # a driver may hand us arguments that do not even print
        return f"{call.name!r}(<unprintable arguments>)"


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
