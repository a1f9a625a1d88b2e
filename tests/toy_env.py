"""A small deterministic environment for agent tests: a counter with notes.

Spec::

    {"turns": ["Add 2 to the counter.", "Now add 3."],   # one user message per turn
     "target": 5,                                        # success: counter == target after the last turn
     "start": 0,                                         # optional initial counter
     "fail_in": "execute"}                               # optional: that method raises (a broken env)

Tools: ``add(amount: int)``, ``read()``, ``note(text: str)``. Reward 1 on success, else 0.
"""

from __future__ import annotations

from typing import Any

from coevolve_engine.core.environment import Environment, Episode, Observation, Score, SpecError, ToolCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add an integer to the counter.",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "integer", "description": "how much to add"}},
                "required": ["amount"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read the counter.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "note",
            "description": "Write a note.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    },
]


class CounterEpisode(Episode):
    def __init__(self, task_id: str, spec: dict[str, Any]) -> None:
        self.task_id = task_id
        self.turns: list[str] = list(spec["turns"])
        self.target: int = spec["target"]
        self.counter: int = spec.get("start", 0)
        self.fail_in: str | None = spec.get("fail_in")
        self.notes: list[str] = []
        self.replies: list[str | None] = []
        self.turn = -1
        self.closed = False

    def _maybe_fail(self, method: str) -> None:
        if self.fail_in == method:
            raise RuntimeError(f"toy environment broke in {method}")

    def system_prompt(self) -> str | None:
        return "You operate a counter. Use the tools, then answer briefly."

    def next_turn(self) -> str | None:
        self._maybe_fail("next_turn")
        if self.turn >= 0 and len(self.replies) <= self.turn:
            self.replies.append(None)  # the driver moved on without end_turn
        self.turn += 1
        return self.turns[self.turn] if self.turn < len(self.turns) else None

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def execute(self, call: ToolCall) -> Observation:
        self._maybe_fail("execute")
        if call.name == "add":
            amount = call.arguments.get("amount")
            if set(call.arguments) != {"amount"} or not isinstance(amount, int) or isinstance(amount, bool):
                return Observation("", error=f"add takes one integer 'amount', got {call.arguments!r}")
            self.counter += amount
            return Observation(str(self.counter))
        if call.name == "read":
            if call.arguments:
                return Observation("", error=f"read takes no arguments, got {call.arguments!r}")
            return Observation(str(self.counter))
        if call.name == "note":
            text = call.arguments.get("text")
            if not isinstance(text, str):
                return Observation("", error="note takes one string 'text'")
            self.notes.append(text)
            return Observation("noted")
        return Observation("", error=f"unknown tool {call.name!r}; available: add, read, note")

    def end_turn(self, reply: str | None) -> None:
        self.replies.append(reply)

    def score(self) -> Score:
        self._maybe_fail("score")
        if len(self.replies) < len(self.turns):
            return Score(0.0, False, f"only {len(self.replies)} of {len(self.turns)} turns answered")
        if self.counter != self.target:
            return Score(0.0, False, f"counter is {self.counter}, expected {self.target}")
        return Score(1.0, True, f"counter reached {self.target}")

    def close(self) -> None:
        self.closed = True


class CounterEnvironment(Environment):
    name = "counter"

    def __init__(self) -> None:
        self.episodes: list[CounterEpisode] = []

    def check_spec(self, spec: dict[str, Any]) -> list[str]:
        problems = []
        turns = spec.get("turns")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            problems.append("'turns' must be a non-empty list of strings")
        if not isinstance(spec.get("target"), int):
            problems.append("'target' must be an integer")
        return problems

    def start(self, task_id: str, spec: dict[str, Any]) -> CounterEpisode:
        problems = self.check_spec(spec)
        if problems:
            raise SpecError(task_id, problems)
        episode = CounterEpisode(task_id, spec)
        self.episodes.append(episode)
        return episode


def counter_task(task_id: str, turns: list[str], target: int, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "env": "counter",
        "prompt": turns[0],
        "spec": {"turns": turns, "target": target, **extra},
    }
