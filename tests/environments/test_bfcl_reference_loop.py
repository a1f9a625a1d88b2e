"""BFCL's own inference loop is the reference: our player and bfcl_eval's ``inference_multi_turn_FC``, given the
same scripted answers on 10 tasks of each multi-turn category, must show the same chat, the same tools at every
model query, the same calls executed per turn, the same verdict, and our stored failed turn must be the first
turn at which bfcl's checker, run on the episode's first t turns, refuses it.

The scripts (``bfcl_reference_loop.SCRIPT_KINDS``, one kind per task) include answers whose arguments are not
JSON (the turn ends there), turns that hit the 21-answer cap (in a middle turn and in the last one), wrong
arguments in the first turn, a miss_func tool called before the turn that releases it, and answers that carry
``<think>`` blocks.
"""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

from bfcl_reference_loop import SCRIPT_KINDS, bfcl_entries, bfcl_run, our_run, script_for  # noqa: E402

from coevolve_engine.adapters.calls import parameter_order  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import MULTI_TURN_CATEGORIES, BFCLEnvironment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.specs import multi_turn_docs  # noqa: E402

TASKS_PER_CATEGORY = 10


@pytest.fixture(scope="module")
def bfcl() -> BFCLEnvironment:
    return BFCLEnvironment()


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_player_plays_as_bfcls_own_loop(bfcl, category):
    entries = bfcl_entries(category)
    tasks = list(bfcl.load_tasks(category=category, limit=TASKS_PER_CATEGORY + 1))[:TASKS_PER_CATEGORY]
    assert len(tasks) == TASKS_PER_CATEGORY
    differences, seen = [], {"valid": 0, "refused": 0, "refused_in_turn_1": 0, "refused_later": 0, "malformed": 0,
                             "cap": 0}
    for index, task in enumerate(tasks):
        spec = task["spec"]
        kind = SCRIPT_KINDS[index % len(SCRIPT_KINDS)]
        script = script_for(kind, spec["ground_truth"], parameter_order(multi_turn_docs(spec)),
                            spec.get("missed_function"))
        theirs = bfcl_run(entries[spec["bfcl_id"]], spec["ground_truth"], script)
        ours, rollout = our_run(bfcl, task, script)
        for field in ("messages", "tools_per_query", "calls_per_turn", "valid", "failed_turn"):
            if getattr(ours, field) != getattr(theirs, field):
                differences.append((spec["bfcl_id"], kind, field, getattr(ours, field), getattr(theirs, field)))
        seen["valid" if theirs.valid else "refused"] += 1
        if theirs.failed_turn is not None:
            seen["refused_in_turn_1" if theirs.failed_turn == 1 else "refused_later"] += 1
        seen["malformed"] += rollout.tool_errors > 0 and kind.startswith("malformed")
        seen["cap"] += rollout.stop == "max_model_calls"
    print(f"\n{category}: {seen}")
    assert differences == [], differences[:2]
    # the scripts did reach every rule: accepted and refused episodes, malformed answers, cap hits
    assert all(seen.values()), seen
