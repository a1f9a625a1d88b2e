"""Literal edits of BFCL multi-turn specs: a name or a number changed consistently everywhere it occurs.

- ``rename``: one name (a file or directory, a person, a user handle, an id or token) replaced in the user
  turns, the initial configuration (keys and values) and the ground-truth call strings;
- ``renumber``: one number the user states and a ground-truth call takes, changed in both places (and in
  ground-truth text that quotes it); never an id, and never a value a computing call turns into another one
  (a unit conversion feeding a later call would go stale).

Names are matched as whole tokens (``final_report.pdf`` but not ``final_report.pdf.bak``), and a rename is
refused when the old name would survive in the user turns in another case. Both return a new spec (the input
is never changed), or None when the edit does not apply.
"""

from __future__ import annotations

import copy
import functools
import random
import re
from dataclasses import dataclass
from typing import Any

from coevolve_engine.core.environment import ToolCall
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module, function_docs
from coevolve_engine.adapters.environments.bfcl.task_edits import (
    Spec,
    calls_by_turn,
    finish,
    iter_strings,
    rewrite_calls,
    user_texts,
    walk_strings,
)

#: Filesystem calls that create a name (so a rename of it needs no initial state).
FS_CREATES = {"mkdir": ("dir_name",), "touch": ("file_name",), "cp": ("destination",), "mv": ("destination",),
              "echo": ("file_name",)}
#: Calls whose result a task typically feeds into a later call (and every MathAPI call): their arguments are
#: never renumbered.
COMPUTING = frozenset({"liter_to_gallon", "gallon_to_liter", "compute_exchange_rate", "estimate_distance",
                       "estimate_drive_feasibility_by_mileage"})


@functools.lru_cache(maxsize=1)
def computing_calls() -> frozenset[str]:
    return COMPUTING | {doc["name"] for doc in function_docs("MathAPI")}


FILE_STEMS = ("budget_summary", "meeting_notes", "q3_forecast", "draft_v2", "client_list", "research_log",
              "expense_report", "roadmap", "inventory", "release_notes", "todo_list", "project_plan",
              "survey_results", "invoice_2024", "lab_results", "travel_plan", "reading_list", "sales_data")
DIR_NAMES = ("ledgers", "projects", "backup", "drafts", "shared", "old_files", "notes", "photos", "invoices",
             "research", "personal", "work_files", "exports", "staging", "clients", "scratch")
PERSON_NAMES = ("Priya", "Mateo", "Amara", "Lukas", "Sofia", "Omar", "Hana", "Diego", "Ingrid", "Kwame",
                "Yuki", "Elena", "Tomas", "Leila", "Noah", "Zara")
HANDLES = ("data_wiz", "trail_blazer", "quiet_coder", "sunny_days", "chef_marco", "night_owl", "pixel_pusher",
           "green_thumb", "road_tripper", "book_worm")


# -- renaming -----------------------------------------------------------------------------------------------

def name_pattern(name: str, flags: int = 0) -> re.Pattern[str]:
    """``name`` as a whole token: not inside a longer word, path or file name."""
    return re.compile(r"(?<![\w.\-])" + re.escape(name) + r"(?![\w\-]|\.\w)", flags)


@dataclass(frozen=True)
class Rename:
    """A name the task uses that can be renamed consistently."""

    name: str
    kind: str  # 'file', 'dir', 'person', 'handle' or 'code'
    in_first_turn: bool


def _filesystem_names(config: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every file and directory name under the home directories, the home directory names)."""
    root = (config.get("GorillaFileSystem") or {}).get("root") or {}
    names: set[str] = set()

    def walk(contents: dict[str, Any]) -> None:
        for name, node in contents.items():
            names.add(name)
            if isinstance(node, dict) and isinstance(node.get("contents"), dict):
                walk(node["contents"])

    for home in root.values():
        if isinstance(home, dict) and isinstance(home.get("contents"), dict):
            walk(home["contents"])
    return names, set(root)


def _kind(value: str, fs_names: set[str], config_tokens: set[str]) -> str | None:
    if value in fs_names:
        if re.fullmatch(r"[\w\-]+\.[A-Za-z0-9]+", value):
            return "file"
        return "dir" if re.fullmatch(r"[\w\-]+", value) else None
    if value not in config_tokens:
        return None
    if re.fullmatch(r"[A-Z][a-z]{2,}", value):
        return "person"
    if re.fullmatch(r"[A-Za-z0-9_\-]{4,}", value) and re.search(r"\d", value):
        return "code"
    if re.fullmatch(r"[a-z][a-z]*_[a-z_]+", value):
        return "handle"
    return None


def renames(spec: Spec) -> list[Rename]:
    """The names of ``spec`` that ``rename`` can change, in order of first use in the ground truth.

    In a long-context task, bfcl pads every file's content except those of a fixed list of names: those
    keep their names, so that their content stays what the turns talk about.
    """
    config = spec.get("initial_config", {})
    fs_names, homes = _filesystem_names(config)
    if spec.get("long_context"):
        fs_names -= set(bfcl_module("eval_checker.multi_turn_eval.func_source_code.long_context").FILES_TAIL_USED)
    config_tokens = set(iter_strings({k: v for k, v in config.items() if k != "GorillaFileSystem"}))
    created: set[str] = set()
    texts = user_texts(spec)
    found: dict[str, Rename] = {}
    for turn in calls_by_turn(spec):
        for call in turn:
            for parameter in FS_CREATES.get(call.name, ()):
                if isinstance(call.arguments.get(parameter), str):
                    created.update(call.arguments[parameter].split("/"))
            for text in iter_strings(call.arguments, keys=False):
                for value in dict.fromkeys([text, *text.split("/")]):
                    if value in found or value in homes or len(value) < 3:
                        continue
                    kind = _kind(value, fs_names | created, config_tokens)
                    pattern = name_pattern(value)
                    if kind and any(pattern.search(t) for t in texts):
                        found[value] = Rename(value, kind, bool(pattern.search(texts[0])))
    return list(found.values())


def new_name(edit: Rename, rng: random.Random, taken: str) -> str | None:
    """A fresh name of the same kind that occurs nowhere in ``taken`` (lower-cased spec text)."""
    if edit.kind == "code":
        for _ in range(20):
            name = "".join(rng.choice("0123456789") if c.isdigit() else rng.choice("abcdefghijklmnopqrstuvwxyz")
                           if c.islower() else rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") if c.isupper() else c
                           for c in edit.name)
            if name != edit.name and name.lower() not in taken:
                return name
        return None
    if edit.kind == "file":
        stem, _, extension = edit.name.rpartition(".")
        pool = [f"{s}.{extension}" for s in FILE_STEMS]
    elif edit.kind == "dir":
        pool = [d.capitalize() if edit.name[0].isupper() else d for d in DIR_NAMES]
    else:
        pool = list(PERSON_NAMES if edit.kind == "person" else HANDLES)
    pool = [name for name in pool if name.lower() not in taken]
    return rng.choice(pool) if pool else None


def rename(spec: Spec, old: str, new: str) -> Spec | None:
    """``spec`` with the name ``old`` replaced by ``new`` in turns, initial state and ground truth."""
    pattern = name_pattern(old)

    def replace(text: str) -> str:
        return pattern.sub(new, text)

    edited = copy.deepcopy(spec)
    edited["turns"] = [[{**m, "content": replace(m["content"])} for m in turn] for turn in spec["turns"]]
    leftover = name_pattern(old, re.IGNORECASE)
    if any(leftover.search(text) for text in user_texts(edited)):
        return None  # the user also writes it another way (another case): we would leave it stale
    edited["initial_config"] = walk_strings(spec.get("initial_config", {}), replace, keys=True)
    edited["ground_truth"] = rewrite_calls(
        spec, lambda call: ToolCall(call.name, walk_strings(call.arguments, replace, keys=False)))
    return finish(edited)


# -- renumbering --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Renumber:
    """A number the user states that a ground-truth call takes as an argument."""

    value: int | float
    form: str  # how the user writes it: '100', '1,000', '15' (for 15.0), '2203.4'
    in_first_turn: bool


def number_pattern(form: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.,])" + re.escape(form) + r"(?![\w]|[.,]\d)")


def _forms(value: int | float) -> list[str]:
    if isinstance(value, float) and not value.is_integer():
        return [repr(value)]
    whole = int(value)
    return list(dict.fromkeys([str(whole), f"{whole:,}"] + ([repr(float(value))] if isinstance(value, float) else [])))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def renumbers(spec: Spec) -> list[Renumber]:
    """The numbers of ``spec`` that ``renumber`` can change."""
    texts = user_texts(spec)
    uses: dict[float, list[tuple[str, str]]] = {}
    for turn in calls_by_turn(spec):
        for call in turn:
            for parameter, value in call.arguments.items():
                if _is_number(value):
                    uses.setdefault(value, []).append((call.name, parameter))
    found = []
    for value, where in uses.items():
        if value <= 0 or any(name in computing_calls() or parameter.lower().endswith("id") for name, parameter in where):
            continue
        for form in _forms(value):
            pattern = number_pattern(form)
            if any(pattern.search(text) for text in texts):
                found.append(Renumber(value, form, bool(pattern.search(texts[0]))))
                break
    return found


def new_number(edit: Renumber, rng: random.Random, texts: list[str]) -> int | float | None:
    """A different positive value of the same kind, not already written anywhere in the turns."""
    value = edit.value
    whole = "." not in edit.form
    decimals = 0 if whole else len(edit.form.partition(".")[2])
    for _ in range(20):
        if whole and 1 <= value <= 5:
            candidate: float = rng.choice([x for x in range(1, 6) if x != value])
        else:
            # lower, not higher: a smaller quantity stays within the budgets and capacities of the state
            candidate = round(value * rng.uniform(0.4, 0.9), decimals)
            candidate = int(candidate) if whole else candidate
        if candidate > 0 and candidate != value and not any(
                number_pattern(form).search(t) for form in _forms(candidate) for t in texts):
            return float(candidate) if isinstance(value, float) else int(candidate)
    return None


def _render_like(form: str, value: int | float) -> str:
    if "," in form:
        return f"{int(value):,}"
    if "." in form:
        return f"{value:.{len(form.partition('.')[2])}f}"
    return str(int(value))


def renumber(spec: Spec, edit: Renumber, value: int | float) -> Spec:
    """``spec`` with the number ``edit.value`` set to ``value`` in the turns and the ground truth."""
    pattern = number_pattern(edit.form)
    written = _render_like(edit.form, value)

    def replace(text: str) -> str:
        return pattern.sub(written, text)

    def rewrite(call: ToolCall) -> ToolCall:
        arguments = {k: value if _is_number(v) and v == edit.value else walk_strings(v, replace, keys=False)
                     for k, v in call.arguments.items()}
        return ToolCall(call.name, arguments)

    edited = copy.deepcopy(spec)
    edited["turns"] = [[{**m, "content": replace(m["content"])} for m in turn] for turn in spec["turns"]]
    edited["ground_truth"] = rewrite_calls(spec, rewrite)
    return finish(edited)
