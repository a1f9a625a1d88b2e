"""The record formats the store ingests: trajectory records and task records, one per line or row.

A field is one of a few kinds: ``str``, ``int``, ``number`` (int or float), ``bool``, ``list`` (a JSON
list) and ``object`` (a JSON object). Required fields must be present and non-null; every other field may
be absent or null. Unknown fields are refused, so a misspelt field never vanishes silently: put
anything extra under ``meta``.
"""

from __future__ import annotations

from dataclasses import dataclass


#: The largest step a trajectory may have: every integer up to it is exact in JSON readers that use doubles,
#: and the engine's step arithmetic (a run's next step, an offset) stays far inside the store's BIGINT.
MAX_STEP = 2**53 - 1

#: The largest round: the store keeps a round number as a 32-bit INTEGER.
MAX_ROUND = 2**31 - 1


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    required: bool
    help: str
    range: tuple[int, int] | None = None  # int fields: the inclusive bounds a value must lie in


TRAJECTORY_FIELDS: tuple[Field, ...] = (
    Field("task_id", "str", True, "the task attempted"),
    Field("step", "int", True, "training step (or round) that generated the rollout; orders history",
          range=(0, MAX_STEP)),
    Field("reward", "number", True, "terminal reward in [0, 1]"),
    Field("group_id", "str", False, "rollouts generated together (a GRPO group); default task_id@step"),
    Field("success", "bool", False, "whether it succeeded; default reward >= threshold (0.5)"),
    Field("actions", "list", False, 'tool calls in order, each {"name": str, "arguments": object}'),
    Field("messages", "list", False, "OpenAI-style chat messages"),
    Field("policy", "str", False, "checkpoint id of the policy"),
    Field("trajectory_id", "str", False, "unique id; default a hash of the record, so re-ingesting adds nothing"),
    Field("error", "str", False, "a fault outside the agent that cut it short; kept, but left out of signals"),
    Field("meta", "object", False, "anything else, as a JSON object"),
)

TASK_FIELDS: tuple[Field, ...] = (
    Field("task_id", "str", True, "unique id of the task"),
    Field("env", "str", False, "environment that runs it"),
    Field("prompt", "str", False, "the instruction shown to the agent"),
    Field("spec", "object", False, "environment-specific JSON object to start, run and score it"),
    Field("source", "str", False, "where it came from"),
    Field("split", "str", False, "'train' (default) or 'eval': an eval task is held out, never weighted or trained on"),
    Field("meta", "object", False, "anything else, as a JSON object"),
)

FIELDS = {"trajectories": TRAJECTORY_FIELDS, "tasks": TASK_FIELDS}

KIND_NAMES = {
    "str": "a string",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "list": "a list",
    "object": "an object",
}


def json_kind(value: object) -> str:
    """The record kind a parsed JSON value has ('null', 'bool', 'int', 'float', 'str', 'list', 'object')."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


def matches(kind: str, value: object) -> bool:
    """Whether a parsed JSON value is of the field kind ``kind``."""
    actual = json_kind(value)
    if kind == "number":
        return actual in ("int", "float")
    return actual == kind
