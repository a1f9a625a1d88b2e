"""BFCL tasks written by an LLM: the exploration episode around a seed task, and drafts turned into specs.

An exploration episode keeps the seed task's classes and initial state and replaces its turns with one
instruction, so the explorer acts in the same world with real, executed calls. A draft is what the
abstraction model writes: the user's turns, the ground-truth calls of each turn as Python call strings with
literal arguments, and the completion criterion in words. ``spec_from_draft`` sets the draft in the seed's
world; whether it is a valid task (the calls parse and name declared functions, they run without errors,
the ground truth reaches its own final state) is for validation to decide, not for this module.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

DRAFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["turns", "ground_truth", "completion_criterion"],
    "properties": {
        "turns": {
            "type": "array", "minItems": 1, "maxItems": 6,
            "items": {"type": "string", "minLength": 1},
            "description": "the user's message of each turn, stating every value the calls need",
        },
        "ground_truth": {
            "type": "array", "minItems": 1, "maxItems": 6,
            "items": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "description": "per turn, the calls that complete it, as Python call strings with literal arguments",
        },
        "completion_criterion": {
            "type": "string", "minLength": 1,
            "description": "what must be true when the task is done",
        },
    },
}


def exploration_spec(seed_spec: dict[str, Any], instruction: str) -> dict[str, Any]:
    """The seed's world (classes, initial state) with one turn carrying ``instruction`` and no ground truth."""
    spec = copy.deepcopy(seed_spec)
    spec.update({
        "turns": [[{"role": "user", "content": instruction}]],
        "ground_truth": [[]],
        "missed_function": {},
        "bfcl_id": f"explore-{seed_spec.get('bfcl_id', 'task')}",
    })
    return spec


def spec_from_draft(seed_spec: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """A multi-turn spec in the seed's world with the draft's turns and ground truth.

    A draft whose turns and ground truth differ in length is set as it is: the spec check then names the
    defect, and the candidate is rejected with it.
    """
    turns = [[{"role": "user", "content": text}] for text in draft["turns"]]
    truth = [list(calls) for calls in draft["ground_truth"]]
    digest = hashlib.sha256(json.dumps([draft["turns"], truth], sort_keys=True).encode()).hexdigest()[:12]
    spec = copy.deepcopy(seed_spec)
    spec.update({
        "category": seed_spec.get("category", "multi_turn_base"),
        "bfcl_id": f"syn-{digest}",
        "turns": turns,
        "ground_truth": truth,
        "missed_function": {},
        "excluded_function": [],
        "path": [],
    })
    return spec

