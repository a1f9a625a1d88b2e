"""An LLM judge for candidate tasks: a strict rubric (prompt ``judge``), one schema-validated call per candidate.

It is the last, optional validation check: ``validate_candidates(..., judge=LLMJudge(client, store_path))``
or ``coevolve-engine validate --judge-model MODEL``. The ground truth has already been executed when it runs,
so the judge only rules on what execution cannot see: whether the user's words and the calls agree, whether
every value is stated, whether the task is natural and about the pattern.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coevolve_engine.models.llm import LLMClient, LLMError
from coevolve_engine.prompts import load_prompt
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis.candidates import Candidate

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["pass", "reason"],
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1}},
}


def render_task(spec: dict[str, Any]) -> str:
    """The task's turns, each with its ground-truth calls, as text."""
    lines = []
    truth = spec.get("ground_truth") or []
    for index, turn in enumerate(spec.get("turns") or []):
        said = " ".join(str(m.get("content")) for m in turn if isinstance(m, dict) and m.get("role") == "user")
        lines.append(f"Turn {index + 1}. User: {said or '(no message)'}")
        calls = truth[index] if index < len(truth) and isinstance(truth[index], list) else []
        lines.extend(f"    {call}" for call in calls) if calls else lines.append("    (no calls)")
    return "\n".join(lines)


class LLMJudge:
    """Callable judge: ``judge(candidate) -> (passed, detail)``. A judge that gives no valid verdict rejects."""

    def __init__(self, client: LLMClient, store_path: str | Path) -> None:
        self.client = client
        self.store_path = store_path
        self.prompt = load_prompt("judge")

    def _pattern(self, candidate: Candidate) -> str:
        if candidate.pattern_id is None:
            return "(none: unguided)"
        with Store(self.store_path, read_only=True) as store:
            summary = store.scalar("SELECT summary FROM failure_patterns WHERE pattern_id = $p",
                                   {"p": candidate.pattern_id})
        described = json.loads(summary).get("summary") if isinstance(summary, str) else None
        return f"{candidate.pattern_id} ({candidate.signal}): {described or 'no summary'}"

    def __call__(self, candidate: Candidate) -> tuple[bool, str]:
        messages = self.prompt.render(
            pattern=self._pattern(candidate),
            criterion=candidate.provenance.get("completion_criterion") or "(not stated)",
            task=render_task(candidate.spec),
        )
        try:
            result = self.client.complete("judge", self.prompt.id, messages, json_schema=VERDICT_SCHEMA)
        except LLMError as exc:
            return False, f"no valid verdict from the judge: {exc}"
        verdict = result.data
        return bool(verdict["pass"]), f"{self.client.model}: {verdict['reason']}"
