"""Systematic perturbations of BFCL multi-turn ground truths, and the two verdicts compared on them.

A *perturbation* turns a task's ground truth (one list of Python call strings per turn) into a plausible wrong
answer of one of four kinds: a wrong argument value, a dropped call, an extra state-changing call, and two
adjacent turns swapped. Choices are drawn from ``random.Random(task_id + kind)``, so runs are reproducible.

``our_verdict`` plays the calls through our environment; ``bfcl_verdict`` asks bfcl_eval's own
``multi_turn_checker``, under a model name used once and whose executor instances are deleted afterwards,
so no call sees state left by another.
"""

from __future__ import annotations

import ast
import itertools
import random
from typing import Any, Callable

from coevolve_engine.adapters.calls import parameter_order, parse_python_calls
from coevolve_engine.adapters.environments.bfcl.environment import BFCLEnvironment
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module
from coevolve_engine.adapters.environments.bfcl.specs import multi_turn_docs

Turns = list[list[str]]

#: One call per API class that changes its state (or, for the stateless MathAPI, only adds a result).
EXTRA_CALLS = {
    "GorillaFileSystem": "touch(file_name='coevolve_extra.txt')",
    "TwitterAPI": "post_tweet(content='coevolve extra tweet')",
    "MessageAPI": "add_contact(user_name='coevolve_extra')",
    "TicketAPI": "create_ticket(title='coevolve extra ticket')",
    "TradingBot": "add_to_watchlist(stock='ZETA')",
    "TravelAPI": (
        "authenticate_travel(client_id='extra', client_secret='extra', refresh_token='extra', "
        "grant_type='read_write', user_first_name='Extra', user_last_name='Call')"
    ),
    "VehicleControlAPI": "fillFuelTank(fuelAmount=1.0)",
    "MathAPI": "add(a=1, b=2)",
}


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "_x" if value else "x"
    if isinstance(value, (list, tuple)):
        return list(value)[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "coevolve_extra": 1}
    return "x"


def wrong_value(truth: Turns, rng: random.Random, spec: dict) -> Turns | None:
    """One argument of one call gets a different value."""
    sites = [(t, c) for t, turn in enumerate(truth) for c, text in enumerate(turn)
             if (node := ast.parse(text, mode="eval").body).args or node.keywords]
    if not sites:
        return None
    t, c = rng.choice(sites)
    call = ast.parse(truth[t][c], mode="eval").body
    slots = [("arg", i) for i in range(len(call.args))] + [("kw", i) for i in range(len(call.keywords))]
    kind, i = rng.choice(slots)
    node = call.args[i] if kind == "arg" else call.keywords[i].value
    new = ast.parse(repr(_changed(ast.literal_eval(node))), mode="eval").body
    if kind == "arg":
        call.args[i] = new
    else:
        call.keywords[i].value = new
    result = [list(turn) for turn in truth]
    result[t][c] = ast.unparse(call)
    return result


def dropped_call(truth: Turns, rng: random.Random, spec: dict) -> Turns | None:
    """One call is left out."""
    sites = [(t, c) for t, turn in enumerate(truth) for c in range(len(turn))]
    if not sites:
        return None
    t, c = rng.choice(sites)
    result = [list(turn) for turn in truth]
    del result[t][c]
    return result


def extra_call(truth: Turns, rng: random.Random, spec: dict) -> Turns | None:
    """A state-changing call of one declared class is added at the end of a non-empty turn.

    Only tools the agent has been shown by then are used: a miss_func tool called before its release turn
    is refused by our environment by design, while bfcl's executor runs it (see the divergence test).
    """
    released_at = {name: int(turn) for turn, names in spec.get("missed_function", {}).items() for name in names}
    sites = [
        (t, class_name)
        for t, turn in enumerate(truth) if turn
        for class_name in spec["involved_classes"]
        if released_at.get(EXTRA_CALLS[class_name].split("(")[0], 0) <= t
    ]
    if not sites:
        return None
    t, class_name = rng.choice(sites)
    result = [list(turn) for turn in truth]
    result[t].append(EXTRA_CALLS[class_name])
    return result


def swapped_turns(truth: Turns, rng: random.Random, spec: dict) -> Turns | None:
    """Two adjacent turns trade their calls."""
    pairs = [(t, t + 1) for t in range(len(truth) - 1) if truth[t] != truth[t + 1]]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    result = [list(turn) for turn in truth]
    result[a], result[b] = result[b], result[a]
    return result


PERTURBATIONS: dict[str, Callable[[Turns, random.Random, dict], Turns | None]] = {
    "wrong_value": wrong_value,
    "dropped_call": dropped_call,
    "extra_call": extra_call,
    "swapped_turns": swapped_turns,
}


def perturb(kind: str, spec: dict) -> Turns | None:
    """The ground truth of ``spec`` perturbed by ``kind``, or None when the kind does not apply."""
    rng = random.Random(f"{spec['bfcl_id']}:{kind}")
    return PERTURBATIONS[kind](spec["ground_truth"], rng, spec)


def our_verdict(environment: BFCLEnvironment, spec: dict, answer: Turns) -> bool:
    """Whether our environment accepts ``answer`` (call strings per turn) played turn by turn."""
    order = parameter_order(multi_turn_docs(spec))
    episode = environment.start(spec["bfcl_id"], spec)
    for turn in answer:
        assert episode.next_turn() is not None
        for text in turn:
            for call in parse_python_calls(text, order):
                episode.execute(call)
        episode.end_turn(None)
    return episode.score().success


_run_ids = itertools.count()


def bfcl_verdict(spec: dict, answer: Turns) -> bool:
    """bfcl_eval's own multi_turn_checker verdict on ``answer``, in a namespace used once then removed."""
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
    executor = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    tag = f"coevolve_agreement_{next(_run_ids)}"
    entry = {"id": spec["bfcl_id"], "initial_config": spec["initial_config"],
             "involved_classes": spec["involved_classes"]}
    model_result = [[[text] for text in turn] for turn in answer]
    try:
        return bool(checker.multi_turn_checker(
            model_result, spec["ground_truth"], entry, spec["category"], tag)["valid"])
    finally:
        for name in [name for name in vars(executor) if name.startswith(tag)]:
            del vars(executor)[name]
