"""BFCL tasks written by an LLM: the exploration episode around a seed task, and drafts turned into specs.

An exploration episode keeps the seed task's classes and initial state and replaces its turns with one
instruction, so the explorer acts in the same world with real, executed calls. A draft is what the
abstraction model writes: the user's turns, the ground-truth calls of each turn as Python call strings with
literal arguments, and the completion criterion in words. ``spec_from_draft`` sets the draft in the seed's
world; whether it is a valid task (the calls parse and name declared functions, they run without errors,
the ground truth reaches its own final state) is for validation to decide, not for this module.

A draft is of one of BFCL's four multi-turn kinds (``KINDS``), written as BFCL's dataset writes that category:

- ``base``: every turn states what its calls need.
- ``miss_func``: ``missed_function`` maps a release turn (its index, as a string) to the functions held back
  until then; the release turn has no user message (``""``: BFCL's loop then says "I have updated some more
  functions you can choose from"), and the turn that asked for the held-back work has an empty ground truth.
- ``miss_param``: ``missed_parameter`` ``{"turn", "parameter", "value"}`` names the turn whose request lacks a
  value the calls need; that turn's ground truth is empty and a later user turn gives the value.
- ``long_context``: the world is loaded with BFCL's long-context setting (``long_context: true``: the API
  classes hold and return far more data), as BFCL loads its ``multi_turn_long_context`` category.

``kind_problems`` holds a written task to its kind's rules, the way BFCL scores that category.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from coevolve_engine.adapters.environments.bfcl.api_state import APIState
from coevolve_engine.adapters.environments.bfcl.specs import ground_truth_calls

KINDS = ("base", "miss_func", "miss_param", "long_context")

#: What the abstraction model is told for each kind (the prompt's $kinds).
KIND_INSTRUCTIONS: dict[str, str] = {
    "base": "every turn's user message states every value its calls need.",
    "miss_func": "hold one function the task needs back until a later turn, as BFCL's miss_func category does: "
                 "the user asks for work that needs it in turn k, whose ground truth is [] (the agent cannot do it "
                 "yet); turn k+1 is the release turn: its user message is \"\" and its ground truth calls the "
                 "held-back function; \"missed_function\": {\"<k+1>\": [\"<function name>\"]} (0-based turn "
                 "index as a string). No turn before the release turn may call it.",
    "miss_param": "leave one needed value out, as BFCL's miss_param category does: in turn k the user asks "
                  "without giving a value a call needs, so turn k's ground truth is []; a later user turn gives the "
                  "value and its ground truth makes the calls; \"missed_parameter\": {\"turn\": k, \"parameter\": "
                  "\"<parameter name>\", \"value\": \"<the value as the later turn says it>\"} (0-based turn).",
    "long_context": "a task whose results are long: it is played with BFCL's long-context setting (the tools "
                    "hold and return much more data), so prefer calls that list, search or read.",
}

DRAFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["turns", "ground_truth", "completion_criterion"],
    "properties": {
        "kind": {"type": "string", "enum": list(KINDS),
                 "description": "the task's kind (default: the kind asked for)"},
        "turns": {
            "type": "array", "minItems": 1, "maxItems": 6,
            "items": {"type": "string"},
            "description": "the user's message of each turn, stating every value the calls need (\"\" only for "
                           "a miss_func release turn)",
        },
        "ground_truth": {
            "type": "array", "minItems": 1, "maxItems": 6,
            "items": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "description": "per turn, the calls that complete it, as Python call strings with literal arguments",
        },
        "missed_function": {
            "type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
            "description": "miss_func: release turn index (a string) -> the functions held back until then",
        },
        "missed_parameter": {
            "type": "object",
            "description": "miss_param: {turn, parameter, value}: the turn lacking a value, and the value given later",
        },
        "completion_criterion": {
            "type": "string", "minLength": 1,
            "description": "what must be true when the task is done",
        },
    },
}


class DraftError(ValueError):
    """A draft whose fields cannot make a task; the message names the field."""


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


def draft_kind(draft: dict[str, Any], asked: str = "base") -> str:
    """The kind a draft is written as: its ``kind`` field, else the kind it was asked for."""
    kind = draft.get("kind", asked)
    if kind not in KINDS:
        raise DraftError(f"field 'kind': {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def spec_from_draft(seed_spec: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """A multi-turn spec in the seed's world with the draft's turns, ground truth and kind.

    A draft whose turns and ground truth differ in length is set as it is: the spec check then names the
    defect, and the candidate is rejected with it. Fields that contradict the kind raise ``DraftError``.
    """
    kind = draft_kind(draft)
    missed = _missed_function(draft, kind)
    parameter = _missed_parameter(draft, kind)
    # BFCL's release turn carries no user message: "" there becomes the empty turn BFCL's dataset writes
    turns = [[] if text == "" and str(index) in missed else [{"role": "user", "content": text}]
             for index, text in enumerate(draft["turns"])]
    truth = [list(calls) for calls in draft["ground_truth"]]
    shape = [draft["turns"], truth] + ([missed] if missed else []) + ([parameter] if parameter else []) \
        + (["long_context"] if kind == "long_context" else [])
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]
    spec = copy.deepcopy(seed_spec)
    spec.update({
        "category": f"multi_turn_{kind}",
        "bfcl_id": f"syn-{digest}",
        "turns": turns,
        "ground_truth": truth,
        "long_context": kind == "long_context",
        "missed_function": missed,
        "excluded_function": [],
        "path": [],
    })
    spec.pop("missed_parameter", None)
    if parameter:
        spec["missed_parameter"] = parameter
    return spec


def _missed_function(draft: dict[str, Any], kind: str) -> dict[str, list[str]]:
    missed = draft.get("missed_function") or {}
    if kind != "miss_func":
        if missed:
            raise DraftError(f"field 'missed_function': only a miss_func draft holds functions back, this one is "
                             f"{kind}")
        return {}
    if not isinstance(missed, dict) or not missed:
        raise DraftError("field 'missed_function': a miss_func draft maps a release turn to the functions it "
                         "releases, e.g. {\"2\": [\"sort\"]}")
    for turn, names in missed.items():
        if not (isinstance(turn, str) and turn.isdigit()):
            raise DraftError(f"field 'missed_function': key {turn!r} is not a turn index (\"0\", \"1\", ...)")
        if not (isinstance(names, list) and names and all(isinstance(n, str) and n for n in names)):
            raise DraftError(f"field 'missed_function'[{turn!r}]: must list one or more function names")
    return {str(int(turn)): list(names) for turn, names in missed.items()}


def _missed_parameter(draft: dict[str, Any], kind: str) -> dict[str, Any] | None:
    parameter = draft.get("missed_parameter")
    if kind != "miss_param":
        if parameter:
            raise DraftError(f"field 'missed_parameter': only a miss_param draft leaves a value out, this one is "
                             f"{kind}")
        return None
    if not isinstance(parameter, dict):
        raise DraftError("field 'missed_parameter': a miss_param draft names {\"turn\": k, \"parameter\": NAME, "
                         "\"value\": VALUE}")
    turn, name, value = parameter.get("turn"), parameter.get("parameter"), parameter.get("value")
    if type(turn) is not int or turn < 0:
        raise DraftError(f"field 'missed_parameter.turn': must be a turn index (0, 1, ...), got {turn!r}")
    if not (isinstance(name, str) and name):
        raise DraftError(f"field 'missed_parameter.parameter': must be a parameter name, got {name!r}")
    if not (isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip()):
        raise DraftError(f"field 'missed_parameter.value': must be the value as a user says it, got {value!r}")
    return {"turn": turn, "parameter": name, "value": value}


# -- the rules of each kind, as BFCL scores that category --------------------------------------------------

def written_kind(spec: dict[str, Any]) -> str:
    """The kind a written spec is of, from its category (``multi_turn_<kind>``)."""
    category = str(spec.get("category", ""))
    kind = category.removeprefix("multi_turn_")
    return kind if kind in KINDS else "base"


def kind_problems(spec: dict[str, Any]) -> list[str]:
    """Why a written multi-turn spec breaks its kind's rules (empty when it keeps them).

    - Every turn but a miss_func release turn has a user message; a release turn has none (BFCL's loop asserts
      "Holdout turn should not have user message").
    - miss_func: no ground truth calls a held-back function before its release turn, and the release turn's
      ground truth calls each function it releases (BFCL scores that turn on the state those calls make).
    - miss_param: the turn lacking the value has an empty ground truth (BFCL's checker skips it), its user
      message does not state the value, a later user turn does, and a call of the ground truth after the
      turn passes that value as the named parameter.
    - long_context: some declared class reads BFCL's long-context setting (loading the world with it changes
      the instance); else the task would be a base task under another name.
    """
    if not _shaped(spec):
        return []  # not a multi-turn spec the kind rules can read: the schema check names what is wrong
    kind = written_kind(spec)
    turns = spec["turns"]
    missed = spec.get("missed_function") or {}
    problems = [f"turn {index} has no user message and releases no function" for index, turn in enumerate(turns)
                if not _user_text(turn) and str(index) not in missed]
    problems += [f"turn {turn} releases {', '.join(names)} but has a user message; BFCL's release turn has none"
                 for turn, names in missed.items() if int(turn) < len(turns) and _user_text(turns[int(turn)])]
    try:
        calls = ground_truth_calls(spec)
    except Exception as exc:  # noqa: BLE001 - the schema check names unparsable calls
        return problems + [f"the ground truth does not parse: {exc}"]
    if kind == "miss_func":
        if not missed:
            problems.append("a miss_func task holds no function back ('missed_function' is empty)")
        for turn, names in sorted(missed.items(), key=lambda item: int(item[0])):
            release = int(turn)
            if release == 0:
                problems.append(f"turn 0 releases {', '.join(names)}: nothing is held back before the first turn")
            for name in names:
                early = [index for index in range(min(release, len(calls)))
                         if any(call.name == name for call in calls[index])]
                if early:
                    problems.append(f"{name} is held back until turn {release} but the ground truth calls it in "
                                    f"turn {early[0]}")
                if release < len(calls) and not any(call.name == name for call in calls[release]):
                    problems.append(f"turn {release} releases {name} but its ground truth does not call it")
    elif missed:
        problems.append(f"a {kind} task holds functions back ('missed_function' is for miss_func)")
    if kind == "miss_param":
        problems += _miss_param_problems(spec, calls)
    if kind == "long_context" and not spec.get("long_context"):
        problems.append("a long_context task must be played with long_context = true")
    if kind == "long_context" and spec.get("long_context") and not _reads_long_context(spec):
        problems.append(f"none of {', '.join(spec['involved_classes'])} reads BFCL's long-context setting "
                        "(loading the world with it changes nothing)")
    return problems


def _shaped(spec: Any) -> bool:
    """Whether ``spec`` has the fields the kind rules read, of the right types."""
    turns, truth, missed = spec.get("turns"), spec.get("ground_truth"), spec.get("missed_function", {})
    return (isinstance(turns, list) and all(isinstance(t, list) and all(isinstance(m, dict) for m in t) for t in turns)
            and isinstance(truth, list) and len(truth) == len(turns)
            and all(isinstance(t, list) and all(isinstance(c, str) for c in t) for t in truth)
            and isinstance(spec.get("involved_classes"), list) and isinstance(missed, dict)
            and all(isinstance(k, str) and k.isdigit() and isinstance(v, list) for k, v in missed.items()))


def _user_text(turn: list[dict[str, Any]]) -> str:
    return "\n".join(m.get("content", "") for m in turn if m.get("role") == "user").strip()


def _mentions(text: str, value: Any) -> bool:
    pattern = r"(?<![\w.])" + re.escape(str(value).strip().casefold()) + r"(?![\w])"
    return re.search(pattern, text.casefold()) is not None


def _miss_param_problems(spec: dict[str, Any], calls: list[list[Any]]) -> list[str]:
    parameter = spec.get("missed_parameter")
    if not isinstance(parameter, dict):
        return ["a miss_param task names the missing value in 'missed_parameter' {turn, parameter, value}"]
    turn, name, value = parameter["turn"], parameter["parameter"], parameter["value"]
    if turn >= len(spec["turns"]) - 1:
        return [f"missed_parameter.turn {turn} has no later turn to give the value in"]
    problems = []
    if spec["ground_truth"][turn]:
        problems.append(f"turn {turn} lacks {name} but its ground truth is not empty (BFCL's is [] there)")
    if _mentions(_user_text(spec["turns"][turn]), value):
        problems.append(f"turn {turn} is to lack {name} but its user message states {value!r}")
    later = [index for index in range(turn + 1, len(spec["turns"]))
             if _mentions(_user_text(spec["turns"][index]), value)]
    if not later:
        problems.append(f"no user turn after turn {turn} gives {name} = {value!r}")
    used = any(call.name and _same(call.arguments.get(name), value)
               for index in range(turn + 1, len(calls)) for call in calls[index] if name in call.arguments)
    if not used:
        problems.append(f"no ground-truth call after turn {turn} passes {name} = {value!r}")
    return problems


def _same(argument: Any, value: Any) -> bool:
    if isinstance(argument, (int, float)) and not isinstance(argument, bool):
        try:
            return float(argument) == float(value)
        except (TypeError, ValueError):
            return False
    return str(argument).strip().casefold() == str(value).strip().casefold()


def _reads_long_context(spec: dict[str, Any]) -> bool:
    config = spec.get("initial_config", {})
    short, long = APIState(spec["involved_classes"], config, False), APIState(spec["involved_classes"], config, True)
    return any(repr(vars(short.instances[name])) != repr(vars(long.instances[name])) for name in short.instances)
