"""Our BFCL multi-turn verdicts against bfcl_eval's own ``multi_turn_checker``.

1. Every shipped multi-turn ground truth, played through our environment, scores 1.
2. Four kinds of perturbation of every ground truth (a wrong argument value, a dropped call, an extra
   state-changing call, two adjacent turns swapped), in all four categories: our verdict must equal bfcl's on
   every one. bfcl's checker runs its own executor; each of its runs uses a model name of its own, and the
   instances it leaves in its module globals are deleted afterwards.
3. Model answers that try ``__import__``, a private method, a method of an undeclared class or non-literal
   arguments get an error observation and change nothing.

The whole file takes about 20 s on two cores; run with ``-s`` to see the counts.
"""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

from bfcl_perturbations import PERTURBATIONS, bfcl_verdict, our_verdict, perturb  # noqa: E402

from coevolve_engine.adapters.calls import CallParseError, parse_tool_calls  # noqa: E402
from coevolve_engine.core.environment import replay  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import MULTI_TURN_CATEGORIES, BFCLEnvironment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module  # noqa: E402


@pytest.fixture(scope="module")
def bfcl() -> BFCLEnvironment:
    return BFCLEnvironment()


@pytest.fixture(scope="module")
def multi_turn_specs(bfcl) -> dict[str, list[dict]]:
    """Category -> the specs of its loadable shipped tasks."""
    return {category: [task["spec"] for task in bfcl.load_tasks(category=category)]
            for category in MULTI_TURN_CATEGORIES}


def test_every_shipped_ground_truth_scores_1(bfcl, multi_turn_specs):
    failures, played = [], 0
    for specs in multi_turn_specs.values():
        for spec in specs:
            score = replay(bfcl, spec["bfcl_id"], spec, bfcl.reference_solution(spec))
            played += 1
            if (score.reward, score.success) != (1.0, True):
                failures.append((spec["bfcl_id"], score.reason))
    print(f"\nground truths: {played - len(failures)}/{played} score 1 "
          "(multi_turn_miss_func_49 is not loadable: its ground truth uses a held-out tool)")
    assert played == 799 and failures == []


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_perturbed_ground_truths_get_bfcls_verdict(bfcl, multi_turn_specs, category, record_property):
    counts = {kind: {"compared": 0, "rejected": 0} for kind in ["ground_truth", *PERTURBATIONS]}
    disagreements = []
    for spec in multi_turn_specs[category]:
        for kind in counts:
            answer = spec["ground_truth"] if kind == "ground_truth" else perturb(kind, spec)
            if answer is None:  # e.g. no two distinct adjacent turns to swap
                continue
            ours, theirs = our_verdict(bfcl, spec, answer), bfcl_verdict(spec, answer)
            counts[kind]["compared"] += 1
            counts[kind]["rejected"] += not theirs
            if ours != theirs:
                disagreements.append((spec["bfcl_id"], kind, f"ours={ours}", f"bfcl={theirs}"))
    print(f"\n{category}: {counts}; disagreements: {len(disagreements)}")
    record_property("agreement_counts", counts)
    assert disagreements == []
    assert counts["ground_truth"]["rejected"] == 0
    for kind in PERTURBATIONS:
        assert counts[kind]["compared"] >= 190, (kind, counts[kind])
        assert counts[kind]["rejected"] > 0, f"{kind} never produced a wrong answer in {category}"


def test_bfcl_checker_runs_leave_no_instances_behind(multi_turn_specs):
    executor = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    names_before = set(vars(executor))
    spec = multi_turn_specs["multi_turn_base"][0]
    assert bfcl_verdict(spec, spec["ground_truth"]) and bfcl_verdict(spec, spec["ground_truth"])
    assert set(vars(executor)) == names_before


def test_a_held_out_tool_called_early_runs_as_in_bfcls_executor(bfcl, multi_turn_specs):
    """A miss_func tool is shown from the turn that releases it, but runs when called earlier, as in BFCL."""
    spec = next(s for s in multi_turn_specs["multi_turn_miss_func"] if s["bfcl_id"] == "multi_turn_miss_func_10")
    assert spec["missed_function"] == {"3": ["touch", "echo"]}
    answer = copy.deepcopy(spec["ground_truth"])
    answer[1].append("touch(file_name='coevolve_extra.txt')")
    episode = bfcl.start("t", spec)
    episode.next_turn()
    episode.end_turn(None)
    episode.next_turn()
    assert episode.execute(parse_tool_calls(answer[1][-1])[0]).error is None
    assert our_verdict(bfcl, spec, answer) is False  # it ran, so the state differs from the ground truth's
    assert bfcl_verdict(spec, answer) is False  # as bfcl's executor runs it


FORBIDDEN_ANSWERS = [
    "__import__('os').system('touch /tmp/pwned')",
    "[cd(folder='document'), __import__('os')]",
    "_load_scenario(scenario={}, long_context=False)",
    '{"name": "_load_scenario", "arguments": {"scenario": {}}}',
    "<tool_call>{\"name\": \"__init__\", \"arguments\": {}}</tool_call>",
    "place_order(order_type='Buy', symbol='AAPL', price=1.0, amount=1)",  # TradingBot is not declared
    '{"name": "send_message", "arguments": {"receiver_id": "USR002", "message": "hi"}}',  # nor MessageAPI
    "mkdir(dir_name=open('/etc/passwd').read())",
    "mkdir(dir_name=lambda: 'x')",
    "mkdir(dir_name=[c for c in 'abc'])",
    "mkdir(dir_name=f'{folder}')",
    "mkdir(dir_name=folder)",
    "os.system('ls')",
]


@pytest.mark.parametrize("answer", FORBIDDEN_ANSWERS)
def test_forbidden_model_answers_execute_nothing(bfcl, multi_turn_specs, answer):
    spec = multi_turn_specs["multi_turn_base"][0]  # GorillaFileSystem and TwitterAPI
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
    episode, untouched = bfcl.start("t", spec), bfcl.start("u", spec)
    episode.next_turn()
    untouched.next_turn()
    try:
        calls = parse_tool_calls(answer, episode.tools())
    except CallParseError:
        calls = []  # refused before anything could run
    for call in calls:
        observation = episode.execute(call)
        assert observation.error, (answer, observation)
        assert observation.content.startswith("Error during execution: ")
    assert checker.state_checker(episode._api.instances, untouched._api.instances)["valid"]
