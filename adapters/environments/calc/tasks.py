"""Calc tasks: the skill space, the spec, its checks, and the seeded generator.

A calc task is a register ``x`` with a start value and a chain of 1-5 tool calls (``add``, ``sub``, ``mul``,
each with one integer ``n``). The agent is scored on the state it leaves: the chain of tools it called and
the final value of ``x``. The prompt is one short sentence per fact, e.g. ::

    x is 3. Add 4, then multiply by 2.                    form "steps": every operand is stated
    y is 8. x is 3. Add 4, then multiply by a number so x is 14.   form "goal": the last operand is computed

A chain of two or three calls may also come as one user turn per call, all on the same register (``turns``)::

    x is 3. Add 4.          turn 1
    Multiply by 2.          turn 2: the agent sees its first turn and the results, then this

The spec then lists the user message of each turn in ``turns`` (one call each) and ``prompt`` is those messages
joined by newlines, so every check on the prompt reads the whole task.

The skill parameters of a task are derived from its spec (``skill_of``) and stored in ``spec["skill"]`` so
tasks can be grouped by skill in SQL (``json_extract_string(spec, '$.skill.calls')``):

- ``tools``: the distinct tools of the chain, in ``TOOLS`` order, joined by ``,`` (``add,mul``);
- ``chain``: the tools in call order, joined by ``>`` (``add>mul``);
- ``calls``: how many chained calls;
- ``operands``: ``small`` when the start and every operand are in -9..9, else ``large``;
- ``distractors``: how many numbers in the prompt are neither the start, an operand nor the goal's target;
- ``form``: ``steps`` or ``goal``;
- ``turns``: ``each`` when the task asks for one call per user turn (absent when it asks in one turn).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

ENV_NAME = "calc"
KIND = "calc"
TOOLS = ("add", "sub", "mul")
FORMS = ("steps", "goal")
MAX_CALLS = 5  # what a spec may hold; the generator uses up to 3
MAX_PROMPT_CHARS = 600
MAX_EXPLORE_PROMPT_CHARS = 20_000
LIMIT = 10**9  # |x| never leaves this range
SPEC_KEYS = ("kind", "start", "steps", "target", "form", "prompt", "skill", "turns")
TURNS = ("one", "each")

#: How each tool's step is written, with its operand stated and with it left for the agent.
PHRASES = {
    "add": ("add {n}", "add a number"),
    "sub": ("subtract {n}", "subtract a number"),
    "mul": ("multiply by {n}", "multiply by a number"),
}
DISTRACTOR_NAMES = ("y", "z", "w")
_NUMBER = re.compile(r"-?\d+")
_START = re.compile(r"(?:^|[.!?;:\n]\s*)x is (-?\d+)")  # a sentence of its own, not "so x is 14"


def apply(op: str, x: int, n: int) -> int:
    """x after one call."""
    return x + n if op == "add" else x - n if op == "sub" else x * n


def run_steps(start: int, steps: list[dict[str, Any]]) -> int:
    x = start
    for step in steps:
        x = apply(step["op"], x, step["n"])
    return x


def numbers_in(text: str) -> list[int]:
    return [int(token) for token in _NUMBER.findall(text)]


def stated_start(text: str) -> int | None:
    """The start value a prompt states in a sentence of its own (``x is 3.``), or None."""
    found = _START.search(text)
    return int(found.group(1)) if found else None


def skill_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The skill parameters of a well-formed task spec (see the module docstring)."""
    ops = [step["op"] for step in spec["steps"]]
    operands = [spec["start"], *(step["n"] for step in spec["steps"])]
    known = set(operands) | ({spec["target"]} if spec["form"] == "goal" else set())
    return {
        "tools": ",".join(tool for tool in TOOLS if tool in ops),
        "chain": ">".join(ops),
        "calls": len(ops),
        "operands": "small" if all(abs(v) <= 9 for v in operands) else "large",
        "distractors": sum(1 for value in numbers_in(spec["prompt"]) if value not in known),
        "form": spec["form"],
        **({"turns": "each"} if spec.get("turns") else {}),  # absent: one turn (as every stored task before)
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_spec(spec: Any) -> list[str]:
    """Every defect that makes ``spec`` unusable; empty when well-formed."""
    if not isinstance(spec, dict):
        return [f"a calc spec must be a JSON object, got {type(spec).__name__}"]
    if spec.get("kind") != KIND:
        return [f"kind must be {KIND!r}, got {spec.get('kind')!r}"]
    problems = [f"unknown key {key!r} (known: {', '.join(SPEC_KEYS)})" for key in spec if key not in SPEC_KEYS]
    start, steps, form, prompt = spec.get("start"), spec.get("steps"), spec.get("form"), spec.get("prompt")
    if not _is_int(start) or abs(start) > LIMIT:
        problems.append(f"start must be an integer in -{LIMIT}..{LIMIT}, got {start!r}")
    if form not in (*FORMS, "explore"):
        problems.append(f"form must be one of {', '.join(FORMS)} (or 'explore'), got {form!r}")
    limit = MAX_EXPLORE_PROMPT_CHARS if form == "explore" else MAX_PROMPT_CHARS
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > limit:
        problems.append(f"prompt must be a non-empty string of at most {limit} characters")
    if form == "explore":
        if steps != [] or spec.get("target") is not None:
            problems.append("an exploration spec has no steps and no target")
        return problems
    problems += _check_steps(steps)
    if problems:
        return problems
    x = start
    for index, step in enumerate(steps, 1):
        x = apply(step["op"], x, step["n"])
        if abs(x) > LIMIT:
            return [f"step {index} takes x out of -{LIMIT}..{LIMIT}"]
    if spec.get("target") != x:
        problems.append(f"target must be what the steps make of the start ({x}), got {spec.get('target')!r}")
    if stated_start(prompt) != start:
        problems.append(f"the prompt must state the start as 'x is {start}'")
    stated = numbers_in(prompt)
    if form == "steps":
        missing = [step["n"] for step in steps if step["n"] not in stated]
        if missing:
            problems.append(f"a 'steps' prompt must state every operand; {missing} not found")
    elif spec.get("target") not in stated:
        problems.append(f"a 'goal' prompt must state the target x is {spec.get('target')}")
    problems += _check_turns(spec)
    if not problems and spec.get("skill") != skill_of(spec):
        problems.append(f"skill must be {skill_of(spec)} (derived from the spec), got {spec.get('skill')!r}")
    return problems


def _check_turns(spec: dict[str, Any]) -> list[str]:
    """A task of one user turn per call: ``turns`` holds 2-3 messages, one per step, joined they are the prompt."""
    if "turns" not in spec:
        return []
    turns = spec["turns"]
    if not isinstance(turns, list) or not 2 <= len(turns) <= 3 or not all(isinstance(t, str) and t.strip()
                                                                            for t in turns):
        return [f"turns must be a list of 2 or 3 user messages, got {turns!r:.80}"]
    if len(turns) != len(spec["steps"]):
        return [f"turns must hold one message per step: {len(turns)} messages for {len(spec['steps'])} steps"]
    if "\n".join(turns) != spec["prompt"]:
        return ["the prompt must be the turns' messages joined by newlines"]
    return []


def _check_steps(steps: Any) -> list[str]:
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_CALLS:
        return [f"steps must be a list of 1 to {MAX_CALLS} calls, got {steps!r:.80}"]
    problems = []
    for index, step in enumerate(steps, 1):
        if not isinstance(step, dict) or set(step) != {"op", "n"}:
            detail = f": {step['unparsed']}" if isinstance(step, dict) and "unparsed" in step else ""
            problems.append(f"step {index} must be {{'op': tool, 'n': integer}}{detail}")
            continue
        op, n = step["op"], step["n"]
        if op not in TOOLS:
            problems.append(f"step {index}: unknown tool {op!r} (tools: {', '.join(TOOLS)})")
        elif not _is_int(n):
            problems.append(f"step {index}: n must be an integer, got {n!r}")
        elif op == "mul" and not 2 <= abs(n) <= 99 and n != -1:
            problems.append(f"step {index}: mul by {n} (a multiplier must be -1 or 2..99 in size)")
        elif op != "mul" and not 1 <= abs(n) <= 999:
            problems.append(f"step {index}: {op} {n} (an operand must be 1..999 in size: 0 changes nothing)")
    return problems


# -- generation ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SkillSpace:
    """The skill values a task set draws from (each task: one value per parameter)."""

    tools: tuple[str, ...] = TOOLS
    calls: tuple[int, ...] = (1, 2, 3)
    operands: tuple[str, ...] = ("small", "large")
    distractors: tuple[int, ...] = (0, 1, 2)
    forms: tuple[str, ...] = FORMS
    turns: tuple[str, ...] = TURNS  # "each" applies to chains of 2 or more calls; a single call is one turn


#: The seed split: chains of one or two calls of any tool, small operands, no distractors, both forms. What it
#: lacks (large operands, distractors, three calls) is one move of offline:calc away from it, so a curriculum
#: can reach the held-out skills; a seed of single add/sub calls left a tiny policy at ~2% held-out.
SEED_SPACE = SkillSpace(tools=TOOLS, calls=(1, 2), operands=("small",), distractors=(0,))
#: The held-out split covers every skill value.
FULL_SPACE = SkillSpace()


@dataclass(frozen=True)
class Cell:
    """One point of the skill space: a chain of tools and the other parameters."""

    chain: tuple[str, ...]
    operands: str
    distractors: int
    form: str
    turns: str = "one"


def _operand(op: str, size: str, rng: random.Random) -> int:
    if op == "mul":
        return rng.randint(2, 9)  # multipliers stay small so values stay short
    return rng.randint(1, 9) if size == "small" else rng.randint(10, 99)


def make_spec(cell: Cell, rng: random.Random) -> dict[str, Any]:
    """A task of ``cell`` with operands, start and distractors drawn from ``rng``."""
    if cell.operands == "large" and all(op == "mul" for op in cell.chain):
        start = rng.randint(10, 99)  # only the start can be large in a chain of multiplications
    else:
        start = rng.randint(1, 9) if cell.operands == "small" else rng.randint(1, 99)
    steps = [{"op": op, "n": _operand(op, cell.operands, rng)} for op in cell.chain]
    if cell.operands == "large" and start < 10 and not any(s["n"] >= 10 for s in steps):
        start = rng.randint(10, 99)
    target = run_steps(start, steps)
    used = {start, target, *(step["n"] for step in steps)}
    low, high = (1, 9) if cell.operands == "small" else (10, 99)
    pool = [v for v in range(low, high + 1) if v not in used] or [v for v in range(100, 200) if v not in used]
    values = rng.sample(pool, cell.distractors)
    facts = [f"x is {start}."]
    for name, value in zip(DISTRACTOR_NAMES, values):
        facts.insert(rng.randint(0, len(facts)), f"{name} is {value}.")
    phrases = [PHRASES[s["op"]][0].format(n=s["n"]) for s in steps]
    if cell.form == "goal":
        phrases[-1] = PHRASES[steps[-1]["op"]][1]
    goal = f" so x is {target}." if cell.form == "goal" else "."
    spec: dict[str, Any] = {"kind": KIND, "start": start, "steps": steps, "target": target, "form": cell.form}
    if cell.turns == "each" and len(steps) > 1:  # one user turn per call, the facts in the first
        turns = [phrase[0].upper() + phrase[1:] + "." for phrase in phrases]
        turns[-1] = turns[-1][:-1] + goal
        turns[0] = " ".join([*facts, turns[0]])
        spec.update(prompt="\n".join(turns), turns=turns)
    else:
        sentence = ", then ".join(phrases)
        spec["prompt"] = " ".join([*facts, sentence[0].upper() + sentence[1:] + goal])
    spec["skill"] = skill_of(spec)
    return spec


def random_cell(space: SkillSpace, rng: random.Random, index: int | None = None) -> Cell:
    """A cell of ``space``; with ``index``, calls, operands, distractors, form and turns cycle so every value of
    each is equally represented (turns last, so the other parameters cycle as before), and the tools of the chain
    are drawn."""
    if index is None:
        calls, operands = rng.choice(space.calls), rng.choice(space.operands)
        distractors, form = rng.choice(space.distractors), rng.choice(space.forms)
    else:
        sizes = [len(space.calls), len(space.operands), len(space.distractors), len(space.forms), len(space.turns)]
        digits, rest = [], index
        for size in sizes:
            digits.append(rest % size)
            rest //= size
        calls, operands = space.calls[digits[0]], space.operands[digits[1]]
        distractors, form = space.distractors[digits[2]], space.forms[digits[3]]
    turns = space.turns[digits[4]] if index is not None else "one"
    chain = tuple(rng.choice(space.tools) for _ in range(calls))
    return Cell(chain, operands, distractors, form, turns if calls > 1 else "one")


def generate(space: SkillSpace, n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
    """``n`` distinct specs of ``space`` (balanced over its values), none with a prompt in ``exclude``."""
    rng = random.Random(f"calc:{seed}")
    specs: list[dict[str, Any]] = []
    prompts = set(exclude)
    index = 0
    while len(specs) < n:
        if index > 50 * n + 1000:
            raise ValueError(f"the skill space {space} holds fewer than {n} distinct tasks")
        spec = make_spec(random_cell(space, rng, index), rng)
        index += 1
        if spec["prompt"] not in prompts:
            prompts.add(spec["prompt"])
            specs.append(spec)
    return specs
