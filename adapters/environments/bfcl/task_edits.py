"""Structural edits of BFCL multi-turn specs, and what the edits read from a spec.

Each edit takes a spec and returns a new one (the input is never changed), or None when it does not apply:

- ``merge_first_turns``: the first turns asked in one message, their ground truths run in order;
- ``truncate``: the first n turns only (later turns may depend on earlier ones, never the reverse);
- ``splice``: the turns of two tasks in one task over the union of their classes. The first turns are
  merged, the rest interleaved with each task's own order kept. It applies only when the two tasks' states do
  not interfere: no stateful API class is called by both, and every ground-truth call returns what it
  returned in its own task (``call_results``).

``literal_edits`` changes names and numbers. Every edit ends with ``finish``, which recomputes ``path`` and
keeps only the file-system root that bfcl loads.
"""

from __future__ import annotations

import copy
import random
from typing import Any, Callable, Iterator

from coevolve_engine.adapters.calls import format_python_call, parameter_order, parse_python_calls
from coevolve_engine.core.environment import ToolCall
from coevolve_engine.adapters.environments.bfcl.api_state import APIState
from coevolve_engine.adapters.environments.bfcl.shipped import function_docs, is_stateless
from coevolve_engine.adapters.environments.bfcl.specs import ground_truth_calls, multi_turn_docs

Spec = dict[str, Any]

# -- reading a spec -------------------------------------------------------------------------------------

def user_texts(spec: Spec) -> list[str]:
    """One text per turn: its user messages joined."""
    return ["\n".join(m["content"] for m in turn if m.get("role") == "user") for turn in spec["turns"]]


def calls_by_turn(spec: Spec) -> list[list[ToolCall]]:
    return ground_truth_calls(spec)


def method_owners(classes: list[str]) -> dict[str, str]:
    """Tool name -> the declared class that serves it (a later class wins a shared name, as in APIState)."""
    return {doc["name"]: class_name for class_name in classes for doc in function_docs(class_name)}


def used_classes(spec: Spec, turns: int | None = None) -> set[str]:
    """The classes the ground truth of the first ``turns`` turns calls."""
    owners = method_owners(spec["involved_classes"])
    return {owners[call.name] for turn in calls_by_turn(spec)[:turns] for call in turn if call.name in owners}


def call_results(spec: Spec) -> list[list[tuple[str, str | None]]]:
    """(result, error) of every ground-truth call, replayed turn by turn on fresh instances."""
    state = APIState(spec["involved_classes"], spec.get("initial_config", {}), bool(spec.get("long_context")))
    results = []
    for turn in calls_by_turn(spec):
        outcomes = [state.call(call) for call in turn]
        results.append([(outcome.result, outcome.error) for outcome in outcomes])
    return results


def is_plain(spec: Spec) -> bool:
    """A spec every edit applies to: one user message per turn, no held-out functions."""
    return (spec.get("kind") == "multi_turn" and not spec.get("missed_function")
            and all(len(turn) == 1 and turn[0].get("role") == "user" for turn in spec["turns"]))


def walk_strings(value: Any, fn: Callable[[str], str], keys: bool) -> Any:
    """``value`` with ``fn`` applied to every string in it (and to dict keys when ``keys``)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [walk_strings(item, fn, keys) for item in value]
    if isinstance(value, dict):
        return {(fn(k) if keys and isinstance(k, str) else k): walk_strings(v, fn, keys) for k, v in value.items()}
    return value


def iter_strings(value: Any, keys: bool = True) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from iter_strings(item, keys)
    elif isinstance(value, dict):
        for key, item in value.items():
            if keys and isinstance(key, str):
                yield key
            yield from iter_strings(item, keys)


def rewrite_calls(spec: Spec, rewrite: Callable[[ToolCall], ToolCall]) -> list[list[str]]:
    """The ground truth with every call passed through ``rewrite``; untouched call strings are kept verbatim."""
    order = parameter_order(multi_turn_docs(spec))
    truth = []
    for turn in spec["ground_truth"]:
        texts = []
        for text in turn:
            calls = parse_python_calls(text, order)
            rewritten = [rewrite(call) for call in calls]
            if rewritten == calls:
                texts.append(text)
            else:
                texts.extend(format_python_call(call) for call in rewritten)
        truth.append(texts)
    return truth


def finish(spec: Spec) -> Spec:
    """Recompute ``path`` (the ground truth's Class.method in first-call order) after an edit, and keep only
    the file system's first root directory, the one bfcl loads (so the spec means the same even if a store
    sorts its keys)."""
    filesystem = spec.get("initial_config", {}).get("GorillaFileSystem")
    if isinstance(filesystem, dict) and isinstance(filesystem.get("root"), dict) and len(filesystem["root"]) > 1:
        first = next(iter(filesystem["root"]))
        filesystem["root"] = {first: filesystem["root"][first]}
    owners = method_owners(spec["involved_classes"])
    path: dict[str, None] = {}
    for turn in calls_by_turn(spec):
        for call in turn:
            path.setdefault(f"{owners.get(call.name, '?')}.{call.name}", None)
    spec["path"] = list(path)
    return spec


# -- structure ------------------------------------------------------------------------------------------

def _joined(first: str, second: str) -> str:
    first = first.rstrip()
    return f"{first}{'' if first.endswith(('.', '!', '?')) else '.'} {second.lstrip()}"


def words(text: str) -> int:
    return len(text.split())


def merge_first_turns(spec: Spec, min_added: float = 1.0, max_merged: int = 3) -> Spec | None:
    """The first turns asked as one message: the second, and more (up to ``max_merged`` in all) until the
    words added are at least ``min_added`` times the first turn's. None when the task runs out of turns."""
    if len(spec["turns"]) < 2 or not is_plain(spec):
        return None
    texts = user_texts(spec)
    merged = 1
    while merged < min(max_merged, len(texts)):
        merged += 1
        if sum(words(t) for t in texts[1:merged]) >= min_added * words(texts[0]):
            break
    else:
        return None
    edited = copy.deepcopy(spec)
    text = texts[0]
    for other in texts[1:merged]:
        text = _joined(text, other)
    edited["turns"] = [[{"role": "user", "content": text}]] + edited["turns"][merged:]
    edited["ground_truth"] = [[call for turn in spec["ground_truth"][:merged] for call in turn]] + \
        edited["ground_truth"][merged:]
    return finish(edited)


def truncate(spec: Spec, turns: int) -> Spec | None:
    """The first ``turns`` turns; None unless that drops at least one."""
    if not 1 <= turns < len(spec["turns"]):
        return None
    edited = copy.deepcopy(spec)
    edited["turns"] = edited["turns"][:turns]
    edited["ground_truth"] = edited["ground_truth"][:turns]
    edited["missed_function"] = {k: v for k, v in spec.get("missed_function", {}).items() if int(k) < turns}
    return finish(edited)


def splice(first: Spec, second: Spec, rng: random.Random, max_turns: int = 6) -> tuple[Spec, str] | None:
    """The turns of two tasks in one, or None when their states would interfere.

    Returns the spec and a description of the turn order (``a0+b0 a1 b1 ...``).
    """
    if not (is_plain(first) and is_plain(second)) or bool(first.get("long_context")) != bool(
            second.get("long_context")):
        return None
    count_a, count_b = rng.randint(1, len(first["turns"])), rng.randint(1, len(second["turns"]))
    while count_a + count_b - 1 > max_turns:
        if count_a >= count_b:
            count_a -= 1
        else:
            count_b -= 1
    used_a, used_b = used_classes(first, count_a), used_classes(second, count_b)
    if any(not is_stateless(shared) for shared in used_a & used_b):
        return None  # each stateful class is driven by one of the two tasks only
    config_a, config_b = first.get("initial_config", {}), second.get("initial_config", {})
    classes = list(dict.fromkeys(first["involved_classes"] + second["involved_classes"]))
    config = {}
    for name in classes:
        if name in used_a:
            source = config_a
        elif name in used_b:
            source = config_b
        else:  # declared, never called: either state will do
            source = config_a if name in config_a else config_b
        if name in source:
            config[name] = copy.deepcopy(source[name])
    order = ["a"] * (count_a - 1) + ["b"] * (count_b - 1)
    rng.shuffle(order)
    texts_a, texts_b = user_texts(first), user_texts(second)
    turns = [_joined(texts_a[0], texts_b[0])]
    truth = [first["ground_truth"][0] + second["ground_truth"][0]]
    sources = [[("a", 0), ("b", 0)]]
    next_turn = {"a": 1, "b": 1}
    for label in order:
        index = next_turn[label]
        next_turn[label] += 1
        turns.append((texts_a if label == "a" else texts_b)[index])
        truth.append(list((first if label == "a" else second)["ground_truth"][index]))
        sources.append([(label, index)])
    spliced = finish({
        "kind": "multi_turn", "category": first["category"], "bfcl_id": None,
        "turns": [[{"role": "user", "content": text}] for text in turns],
        "involved_classes": classes, "initial_config": config, "long_context": bool(first.get("long_context")),
        "missed_function": {}, "excluded_function": sorted(set(first.get("excluded_function", []))
                                                           | set(second.get("excluded_function", []))),
        "path": [], "ground_truth": truth,
    })
    if not _results_kept(spliced, sources, {"a": first, "b": second}):
        return None
    layout = " ".join("+".join(f"{label}{index}" for label, index in turn) for turn in sources)
    return spliced, layout


def _results_kept(spliced: Spec, sources: list[list[tuple[str, int]]], parents: dict[str, Spec]) -> bool:
    """Whether every spliced call returns what it returned in its own task."""
    own = {label: call_results(spec) for label, spec in parents.items()}
    try:
        got = call_results(spliced)
    except Exception:  # noqa: BLE001 - a config that does not load interferes by definition
        return False
    for turn, parts in zip(got, sources):
        expected = [outcome for label, index in parts for outcome in own[label][index]]
        if turn != expected:
            return False
    return True
