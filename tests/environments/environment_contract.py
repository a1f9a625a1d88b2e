"""The abstract test suite every environment must pass.

Subclass ``EnvironmentContract`` in a ``test_*.py`` module (its name starts with ``Test``; import it with
``from environment_contract import EnvironmentContract``, as pytest puts this folder on ``sys.path``) and
provide:

- ``environment``: a fixture returning the environment instance;
- ``sample_tasks``: a fixture returning a few task records (task_id, env, prompt, spec, source) that between
  them exercise the environment's kinds of task, each with a known-good solution;
- ``invalid_specs`` (optional): a fixture returning specs that look close to valid but are not.

The known-good solution of a task is ``solution(environment, task)``, by default the environment's
``reference_solution``; override it when the environment has none.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from coevolve_engine.core.environment import (
    Environment,
    Observation,
    Score,
    SpecError,
    ToolCall,
    replay,
)

OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

JUNK_SPECS: list[Any] = [None, 0, "spec", [], {}, {"kind": None}, {"kind": "no-such-kind"}, {"turns": "x"}]


def _garbage_calls(tool_name: str) -> list[tuple[ToolCall, bool]]:
    """Calls no agent should make, and whether each must come back with ``error`` set."""
    return [
        (ToolCall("", {}), True),
        (ToolCall("no_such_tool_anywhere", {}), True),
        (ToolCall("__import__", {"name": "os"}), True),
        (ToolCall("_private_method", {}), True),
        (ToolCall(None, None), True),  # type: ignore[arg-type]
        (ToolCall(tool_name, "not an object"), True),  # type: ignore[arg-type]
        (ToolCall(tool_name, {"value": object()}), True),
        (ToolCall(tool_name, {"value": lambda: 1}), True),
        (ToolCall(tool_name, {1: "non-string key"}), True),  # type: ignore[dict-item]
        (ToolCall(tool_name, {"no_such_parameter": 1}), False),
        (ToolCall(tool_name, {"value": "x" * 100_000}), False),
        (ToolCall(tool_name, {"value": [[[[[[[[[[[]]]]]]]]]]]}), False),
    ]


class EnvironmentContract:
    """Behaviour every ``Environment`` implementation must show."""

    def solution(self, environment: Environment, task: dict[str, Any]) -> list[list[ToolCall]]:
        solution = environment.reference_solution(task["spec"])
        assert solution is not None, "override solution() for an environment without reference solutions"
        return solution

    @pytest.fixture
    def invalid_specs(self) -> list[Any]:
        return []

    def test_sample_tasks_are_well_formed_records(self, environment, sample_tasks):
        assert sample_tasks, "the contract needs at least one sample task"
        for task in sample_tasks:
            assert {"task_id", "env", "prompt", "spec", "source"} <= set(task)
            assert task["env"] == environment.name
            assert isinstance(task["task_id"], str) and task["task_id"]
            assert isinstance(task["prompt"], str)
            assert json.loads(json.dumps(task["spec"])) == task["spec"], "specs are stored as JSON"
            assert environment.check_spec(task["spec"]) == []

    def test_known_good_solution_scores_one(self, environment, sample_tasks):
        for task in sample_tasks:
            score = replay(environment, task["task_id"], task["spec"], self.solution(environment, task))
            assert (score.reward, score.success) == (1.0, True), f"{task['task_id']}: {score.reason}"

    def test_episodes_are_independent(self, environment, sample_tasks):
        for task in sample_tasks:
            solution = self.solution(environment, task)
            first = environment.start(task["task_id"], task["spec"])
            second = environment.start(task["task_id"], task["spec"])
            turn = 0
            while (message := first.next_turn()) is not None:
                assert second.next_turn() == message
                for episode in (first, second):  # interleaved: shared state would double every effect
                    for call in solution[turn]:
                        episode.execute(call)
                    episode.end_turn(None)
                turn += 1
            assert second.next_turn() is None
            assert first.score().success and second.score().success, task["task_id"]

    def test_doing_nothing_does_not_succeed(self, environment, sample_tasks):
        for task in sample_tasks:
            if not any(self.solution(environment, task)):
                continue
            episode = environment.start(task["task_id"], task["spec"])
            while episode.next_turn() is not None:
                episode.end_turn(None)
            assert not episode.score().success, task["task_id"]

    def test_execute_never_raises_on_garbage(self, environment, sample_tasks):
        for task in sample_tasks:
            episode = environment.start(task["task_id"], task["spec"])
            before = episode.execute(ToolCall("no_such_tool_anywhere", {}))  # before any turn
            assert isinstance(before, Observation) and before.error
            assert episode.next_turn() is not None
            tools = episode.tools()
            name = tools[0]["function"]["name"] if tools else "anything"
            for call, must_fail in _garbage_calls(name):
                observation = episode.execute(call)
                assert isinstance(observation, Observation), call
                assert isinstance(observation.content, str)
                if must_fail:
                    assert observation.error, f"{task['task_id']}: {call!r} was not refused"
            episode.end_turn("done")
            score = episode.score()
            assert isinstance(score, Score) and 0.0 <= score.reward <= 1.0
            while episode.next_turn() is not None:
                episode.end_turn(None)
            after = episode.execute(ToolCall(name, {}))
            assert isinstance(after, Observation)

    def test_scores_are_in_unit_interval(self, environment, sample_tasks):
        for task in sample_tasks:
            solution = self.solution(environment, task)
            for played_turns in range(len(solution) + 1):
                episode = environment.start(task["task_id"], task["spec"])
                turn = 0
                while turn < played_turns and episode.next_turn() is not None:
                    for call in solution[turn]:
                        episode.execute(call)
                    episode.end_turn(None)
                    turn += 1
                score = episode.score()
                assert 0.0 <= score.reward <= 1.0
                assert isinstance(score.success, bool) and isinstance(score.reason, str) and score.reason

    def test_tools_are_openai_schemas(self, environment, sample_tasks):
        for task in sample_tasks:
            episode = environment.start(task["task_id"], task["spec"])
            while episode.next_turn() is not None:
                for tool in episode.tools():
                    assert tool["type"] == "function"
                    function = tool["function"]
                    assert OPENAI_TOOL_NAME.match(function["name"]), function["name"]
                    assert function["parameters"]["type"] == "object"
                    json.dumps(tool)
                episode.end_turn(None)
            assert episode.next_turn() is None

    def test_check_spec_rejects_junk(self, environment, invalid_specs):
        for spec in JUNK_SPECS + list(invalid_specs):
            problems = environment.check_spec(spec)
            assert problems and all(isinstance(p, str) for p in problems), spec
            with pytest.raises(SpecError):
                environment.start("junk", spec)
