"""BFCL task specs: the JSON a task is stored as, how shipped entries become specs, and how specs are checked.

A spec carries everything needed to run and score its task; only the API classes' code and function docs
come from the installed bfcl-eval (pinned), looked up by class name.

Multi-turn spec (an episode with stateful API classes, scored on state and responses after every turn)::

    {"kind": "multi_turn", "category": "multi_turn_base", "bfcl_id": "multi_turn_base_0",
     "turns": [[{"role": "user", "content": "..."}], ...],   # one message list per turn; [] = held-out turn
     "involved_classes": ["GorillaFileSystem", "TwitterAPI"],
     "initial_config": {"GorillaFileSystem": {...}, ...},
     "long_context": false,                                   # bfcl's long_context scenario loading
     "missed_function": {"3": ["sort"]},                      # miss_func: tools held out until turn 3
     "excluded_function": ["cp"], "path": [...],              # kept from bfcl, informational
     "ground_truth": [["cd(folder='document')", ...], ...]}   # Python call strings, one list per turn

Single-turn spec (one turn, calls scored by bfcl's AST checker, nothing executed)::

    {"kind": "single_turn", "category": "simple_python", "bfcl_id": "simple_python_0",
     "turns": [[{"role": "user", "content": "..."}]],
     "functions": [{"name": "math.factorial", "description": "...", "parameters": {...}}],
     "ground_truth": [{"math.factorial": {"number": [5]}}]}   # acceptable values per parameter
"""

from __future__ import annotations

from typing import Any

from coevolve_engine.adapters.calls import CallParseError, parameter_order, parse_python_calls
from coevolve_engine.core.environment import ToolCall
from coevolve_engine.adapters.environments.bfcl.api_state import APIState, ScenarioLoadError
from coevolve_engine.adapters.environments.bfcl.shipped import (
    BFCL_VERSION,
    MULTI_TURN_CATEGORIES,
    MULTI_TURN_CLASSES,
    SINGLE_TURN_CATEGORIES,
    function_docs,
    task_file_name,
)

ENV_NAME = "bfcl"


def task_id_for(bfcl_id: str) -> str:
    """Our task id for a shipped BFCL entry."""
    return f"{ENV_NAME}/{bfcl_id}"


def task_record(entry: dict[str, Any], ground_truth: Any, category: str) -> dict[str, Any]:
    """A task record (task_id, env, prompt, spec, source) for one shipped entry and its answer."""
    if category in MULTI_TURN_CATEGORIES:
        spec = multi_turn_spec(entry, ground_truth, category)
    else:
        spec = single_turn_spec(entry, ground_truth, category)
    return {
        "task_id": task_id_for(entry["id"]),
        "env": ENV_NAME,
        "prompt": first_user_message(spec),
        "spec": spec,
        "source": f"bfcl-eval=={BFCL_VERSION}:{task_file_name(category)}",
    }


def multi_turn_spec(entry: dict[str, Any], ground_truth: list[list[str]], category: str) -> dict[str, Any]:
    return {
        "kind": "multi_turn",
        "category": category,
        "bfcl_id": entry["id"],
        "turns": entry["question"],
        "involved_classes": entry["involved_classes"],
        "initial_config": entry.get("initial_config", {}),
        # bfcl's rule: long-context loading for ids of the long_context (or composite) categories
        "long_context": "long_context" in category or "composite" in category,
        "missed_function": entry.get("missed_function", {}),
        "excluded_function": entry.get("excluded_function", []),
        "path": entry.get("path", []),
        "ground_truth": ground_truth,
    }


def single_turn_spec(entry: dict[str, Any], ground_truth: list[dict[str, Any]], category: str) -> dict[str, Any]:
    return {
        "kind": "single_turn",
        "category": category,
        "bfcl_id": entry["id"],
        "turns": entry["question"],
        "functions": entry["function"],
        "ground_truth": ground_truth,
    }


def first_user_message(spec: dict[str, Any]) -> str:
    for turn in spec.get("turns", []):
        for message in turn:
            if message.get("role") == "user":
                return message.get("content", "")
    return ""


def multi_turn_docs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The function docs of every declared class, in declaration order."""
    return [doc for class_name in spec["involved_classes"] for doc in function_docs(class_name)]


def ground_truth_calls(spec: dict[str, Any]) -> list[list[ToolCall]]:
    """A multi-turn spec's ground truth parsed into calls (positional arguments named from the docs)."""
    order = parameter_order(multi_turn_docs(spec))
    return [[call for text in turn for call in parse_python_calls(text, order)] for turn in spec["ground_truth"]]


def check_spec(spec: Any) -> list[str]:
    """Every defect that makes ``spec`` unusable as a BFCL task; empty when it is well-formed.

    On top of ``check_structure``, a multi-turn spec's initial configuration must load into its classes.
    """
    problems = check_structure(spec)
    if problems or spec["kind"] != "multi_turn":
        return problems
    try:
        APIState(spec["involved_classes"], spec.get("initial_config", {}), bool(spec.get("long_context")))
    except ScenarioLoadError as exc:
        return [str(exc)]
    return []


def check_structure(spec: Any) -> list[str]:
    """Defects of shape: missing or mistyped fields, unknown classes or functions, unparsable ground truth."""
    if not isinstance(spec, dict):
        return [f"spec must be a JSON object, got {type(spec).__name__}"]
    kind = spec.get("kind")
    if kind == "multi_turn":
        return _check_multi_turn(spec)
    if kind == "single_turn":
        return _check_single_turn(spec)
    return [f"spec 'kind' must be 'multi_turn' or 'single_turn', got {kind!r}"]


def _check_turns(spec: dict[str, Any], allow_empty_turns: bool) -> list[str]:
    turns = spec.get("turns")
    if not isinstance(turns, list) or not turns:
        return ["'turns' must be a non-empty list of message lists"]
    problems = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, list) or (not turn and not allow_empty_turns):
            problems.append(f"turns[{index}] must be a non-empty list of messages")
            continue
        for message in turn:
            if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                problems.append(f"turns[{index}] has a message without string 'role' and 'content'")
                break
    return problems


def _check_multi_turn(spec: dict[str, Any]) -> list[str]:
    problems = _check_turns(spec, allow_empty_turns=True)
    if not isinstance(spec.get("category"), str):
        problems.append("'category' must be a string")
    if not isinstance(spec.get("long_context", False), bool):
        problems.append("'long_context' must be true or false")
    classes = spec.get("involved_classes")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
        return problems + ["'involved_classes' must be a non-empty list of class names"]
    unknown = [c for c in classes if c not in MULTI_TURN_CLASSES]
    if unknown:
        return problems + [f"unknown API classes {unknown}; known: {', '.join(MULTI_TURN_CLASSES)}"]
    # bfcl itself ships configs for undeclared classes (multi_turn_*_96); those entries are simply unused.
    if not isinstance(spec.get("initial_config", {}), dict):
        problems.append("'initial_config' must be an object keyed by class name")
    names = {doc["name"] for doc in multi_turn_docs(spec)}
    problems += _check_missed_functions(spec, names)
    problems += _check_multi_turn_truth(spec, names)
    return problems


def _check_missed_functions(spec: dict[str, Any], names: set[str]) -> list[str]:
    missed = spec.get("missed_function", {})
    turns = spec.get("turns") if isinstance(spec.get("turns"), list) else []
    if not isinstance(missed, dict):
        return ["'missed_function' must map a turn index to a list of function names"]
    problems = []
    for turn, functions in missed.items():
        if not (isinstance(turn, str) and turn.isdigit() and int(turn) < len(turns)):
            problems.append(f"'missed_function' key {turn!r} is not a turn index")
        elif not isinstance(functions, list) or not all(isinstance(f, str) and f in names for f in functions):
            problems.append(f"'missed_function'[{turn}] must list functions of the declared classes")
    return problems


def _check_multi_turn_truth(spec: dict[str, Any], names: set[str]) -> list[str]:
    truth = spec.get("ground_truth")
    turns = spec.get("turns") if isinstance(spec.get("turns"), list) else []
    if not isinstance(truth, list) or len(truth) != len(turns):
        return ["'ground_truth' must hold one list of call strings per turn"]
    order = parameter_order(multi_turn_docs(spec))
    released_at = _release_turns(spec)
    problems = []
    for index, turn in enumerate(truth):
        if not isinstance(turn, list) or not all(isinstance(text, str) for text in turn):
            problems.append(f"ground_truth[{index}] must be a list of call strings")
            continue
        for text in turn:
            try:
                calls = parse_python_calls(text, order)
            except CallParseError as exc:
                problems.append(f"ground_truth[{index}]: {text!r}: {exc}")
                continue
            for call in calls:
                if call.name not in names:
                    problems.append(f"ground_truth[{index}]: {call.name!r} is not a function of the declared classes")
                elif released_at.get(call.name, 0) > index:
                    problems.append(
                        f"ground_truth[{index}] calls {call.name!r}, which is held out until turn "
                        f"{released_at[call.name]}: no agent can solve that turn"
                    )
    return problems


def _release_turns(spec: dict[str, Any]) -> dict[str, int]:
    """Held-out function name -> the turn that makes it available."""
    missed = spec.get("missed_function", {})
    if not isinstance(missed, dict):
        return {}
    return {
        name: int(turn)
        for turn, names in missed.items()
        if isinstance(turn, str) and turn.isdigit() and isinstance(names, list)
        for name in names if isinstance(name, str)
    }


def _check_single_turn(spec: dict[str, Any]) -> list[str]:
    problems = _check_turns(spec, allow_empty_turns=False)
    if isinstance(spec.get("turns"), list) and len(spec["turns"]) != 1:
        problems.append("a single-turn spec has exactly one turn")
    if spec.get("category") not in SINGLE_TURN_CATEGORIES:
        problems.append(f"'category' must be one of {', '.join(SINGLE_TURN_CATEGORIES)}")
    functions = spec.get("functions")
    if not isinstance(functions, list) or not functions:
        return problems + ["'functions' must be a non-empty list of function docs"]
    doc_problems = [f"functions[{index}]: {problem}" for index, doc in enumerate(functions)
                    if (problem := _function_doc_problem(doc))]
    if doc_problems:
        return problems + doc_problems
    names = {f["name"] for f in functions}
    truth = spec.get("ground_truth")
    if not isinstance(truth, list) or not truth:
        return problems + ["'ground_truth' must be a non-empty list of {function: {parameter: [values]}}"]
    for index, call in enumerate(truth):
        if not (isinstance(call, dict) and len(call) == 1):
            problems.append(f"ground_truth[{index}] must be one {{function: {{parameter: [values]}}}}")
            continue
        (name, parameters), = call.items()
        if name not in names:
            problems.append(f"ground_truth[{index}]: {name!r} is not among the task's functions")
        elif not isinstance(parameters, dict) or not all(isinstance(v, list) for v in parameters.values()):
            problems.append(f"ground_truth[{index}]: each parameter must list its acceptable values")
    return problems


def _function_doc_problem(doc: Any) -> str | None:
    """What is wrong with one BFCL function doc, or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
        return "a function doc needs a string 'name'"
    parameters = doc.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict):
        return f"{doc['name']}: 'parameters' must be an object with 'properties'"
    if not all(isinstance(schema, dict) for schema in parameters["properties"].values()):
        return f"{doc['name']}: every property must be a schema object"
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return f"{doc['name']}: 'required' must be a list of parameter names"
    return None
