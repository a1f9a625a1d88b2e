"""The counter environment: bring a counter from ``start`` to ``target`` with ``increment`` and ``decrement``.

A task spec is ``{"start": int, "target": int}``; an episode has one user turn; the reward is 1 when the counter
ends at the target, else 0. ``OfflineCounterSynthesizer`` proposes new targets around a failure pattern's tasks.
"""

from __future__ import annotations

import random
from typing import Any, Iterator, Sequence

from coevolve_engine.core.candidates import Candidate, FailurePattern, Synthesizer, quotas
from coevolve_engine.core.environment import Environment, Episode, Observation, Score, SpecError, ToolCall

TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name.capitalize()} the counter by a whole number.",
        "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}, "required": ["by"]}}}
    for name in ("increment", "decrement")
]


def prompt_of(spec: dict[str, Any]) -> str:
    return f"The counter shows {spec['start']}. Make it show {spec['target']}."


class CounterEpisode(Episode):
    def __init__(self, task_id: str, spec: dict[str, Any]) -> None:
        self.task_id, self.spec = task_id, spec
        self.value, self.turn = spec["start"], 0

    def next_turn(self) -> str | None:
        self.turn += 1
        return prompt_of(self.spec) if self.turn == 1 else None

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def execute(self, call: ToolCall) -> Observation:
        by = call.arguments.get("by")
        if call.name not in ("increment", "decrement"):
            return Observation("", error=f"unknown tool {call.name!r}")
        if not isinstance(by, int) or isinstance(by, bool):
            return Observation("", error="'by' must be a whole number")
        self.value += by if call.name == "increment" else -by
        return Observation(f"the counter shows {self.value}")

    def end_turn(self, reply: str | None) -> None:
        pass

    def score(self) -> Score:
        done = self.value == self.spec["target"]
        return Score(1.0 if done else 0.0, done, "at the target" if done else f"ended at {self.value}")


class CounterEnvironment(Environment):
    name = "counter"

    def check_spec(self, spec: dict[str, Any]) -> list[str]:
        return [f"{key!r} must be a whole number" for key in ("start", "target")
                if not isinstance(spec.get(key), int) or isinstance(spec.get(key), bool)]

    def start(self, task_id: str, spec: dict[str, Any]) -> Episode:
        problems = self.check_spec(spec)
        if problems:
            raise SpecError(task_id, problems)
        return CounterEpisode(task_id, spec)

    def load_tasks(self, **options: Any) -> Iterator[dict[str, Any]]:
        for i, (start, target) in enumerate([(0, 3), (5, 2), (10, 17), (4, -4), (7, 7), (1, 100)], start=1):
            spec = {"start": start, "target": target}
            yield {"task_id": f"counter-{i:03d}", "env": "counter", "prompt": prompt_of(spec), "spec": spec,
                   "source": "counter"}

    def reference_solution(self, spec: dict[str, Any]) -> list[list[ToolCall]] | None:
        gap = spec["target"] - spec["start"]
        if gap == 0:
            return [[]]
        return [[ToolCall("increment" if gap > 0 else "decrement", {"by": abs(gap)})]]


class OfflineCounterSynthesizer(Synthesizer):
    """New targets one or two moves away from each pattern's tasks; no model needed."""

    name = "offline:counter"

    def propose(self, store, patterns: Sequence[FailurePattern], *, max_candidates: int,
                seed: int) -> list[Candidate]:
        rng = random.Random(seed)
        candidates = []
        for pattern, quota in zip(patterns, quotas([p.size for p in patterns], max_candidates)):
            seeds = [pattern.tasks[t] for t in pattern.task_ids]
            for i in range(quota if seeds else 0):
                parent = seeds[i % len(seeds)]
                spec = {"start": parent["spec"]["start"],
                        "target": parent["spec"]["target"] + rng.choice([-2, -1, 1, 2]) * (1 + i)}
                candidates.append(Candidate.create(
                    round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal,
                    env="counter", synthesizer=self.name, prompt=prompt_of(spec), spec=spec,
                    provenance={"parent": parent["task_id"]}))
        return candidates
