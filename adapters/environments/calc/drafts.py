"""Calc tasks written by an LLM: the exploration episode around a seed task, and drafts turned into specs.

The draft has the same shape as BFCL's (so the shared ``abstract`` prompt fits it): one user turn, the
ground-truth calls of that turn as Python call strings (``add(n=4)``), and a completion criterion. The start
value is the one the turn states (``x is 5``), else the seed task's. The form is ``goal`` when the turn states
the result (``... so x is 14``), else ``steps``. A draft that does not parse is still turned into a spec, one
that ``check_spec`` rejects naming the defect, so the candidate is rejected with that reason instead of failing
the synthesis.
"""

from __future__ import annotations

import re
from typing import Any

from coevolve_engine.adapters.calls import CallParseError, parse_python_calls
from coevolve_engine.adapters.environments.calc.tasks import (
    KIND,
    MAX_CALLS,
    TOOLS,
    check_spec,
    run_steps,
    skill_of,
    stated_start,
)

DRAFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["turns", "ground_truth", "completion_criterion"],
    "properties": {
        "turns": {
            "type": "array", "minItems": 1, "maxItems": 1,
            "items": {"type": "string", "minLength": 1},
            "description": "the user's one message: 'x is <start>.' then the steps, e.g. "
                           "'x is 3. Add 4, then multiply by 2.' (or leave the last operand out and state the "
                           "result: '... multiply by a number so x is 14.')",
        },
        "ground_truth": {
            "type": "array", "minItems": 1, "maxItems": 1,
            "items": {"type": "array", "minItems": 1, "maxItems": MAX_CALLS,
                      "items": {"type": "string", "minLength": 1}},
            "description": "the calls that complete the turn, in order, e.g. [\"add(n=4)\", \"mul(n=2)\"]",
        },
        "completion_criterion": {
            "type": "string", "minLength": 1,
            "description": "what must be true when the task is done, e.g. 'x is 14'",
        },
    },
}

_ORDER = {tool: ["n"] for tool in TOOLS}
_X_IS = re.compile(r"\bx is (-?\d+)")


def exploration_spec(seed_spec: dict[str, Any], instruction: str) -> dict[str, Any]:
    """The seed's start value, one turn of ``instruction``, no steps and no target."""
    start = seed_spec.get("start") if isinstance(seed_spec, dict) else None
    start = start if isinstance(start, int) and not isinstance(start, bool) else 0
    return {"kind": KIND, "start": start, "steps": [], "target": None, "form": "explore",
            "prompt": f"x is {start}.\n\n{instruction}", "skill": {}}


def _steps(ground_truth: Any) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for turn in ground_truth if isinstance(ground_truth, list) else [ground_truth]:
        for text in turn if isinstance(turn, list) else [turn]:
            try:
                calls = parse_python_calls(text, _ORDER) if isinstance(text, str) else None
            except CallParseError as exc:
                calls, error = None, f"{text!r:.60}: {exc}"
            else:
                error = f"{text!r:.60} is not a call string"
            if not calls:
                steps.append({"unparsed": error})
                continue
            for call in calls:
                if set(call.arguments) == {"n"}:
                    steps.append({"op": call.name, "n": call.arguments["n"]})
                else:
                    steps.append({"unparsed": f"{text!r:.60} must pass exactly one argument n"})
    return steps


def spec_from_draft(seed_spec: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """A calc spec from the draft's turn and calls (see the module docstring)."""
    turns = draft.get("turns") if isinstance(draft.get("turns"), list) else []
    prompt = " ".join(str(turn) for turn in turns)
    steps = _steps(draft.get("ground_truth", []))
    start = stated_start(prompt)
    if start is None:
        seed_start = seed_spec.get("start") if isinstance(seed_spec, dict) else None
        start = seed_start if isinstance(seed_start, int) else 0
    spec: dict[str, Any] = {"kind": KIND, "start": start, "steps": steps, "target": None, "form": "steps",
                            "prompt": prompt, "skill": {}}
    if all(set(step) == {"op", "n"} and step["op"] in TOOLS and isinstance(step["n"], int) for step in steps):
        spec["target"] = run_steps(start, steps)
        values = [int(v) for v in _X_IS.findall(prompt)]
        if spec["target"] in (values[1:] if stated_start(prompt) is not None else values):
            spec["form"] = "goal"  # the turn states the result ("... so x is 14")
    problems = check_spec({**spec, "skill": None})
    if len(problems) == 1 and problems[0].startswith("skill must be"):
        spec["skill"] = skill_of(spec)
    return spec
