"""The calc environment: one register ``x``, three one-argument tools, tasks scored on the state they leave.

Made to be learned by a tiny policy on a CPU: a prompt of one or two short sentences, or (``spec["turns"]``) two
or three user turns of one instruction each on the same register; three tools whose schemas render in a few dozen
tokens; and a score that needs no final answer. A task succeeds when the agent called exactly the task's chain of
tools, each in its turn, none failed, and ``x`` ends at the target; a failure names the first turn that went
wrong (``Score.failed_turn``).

Reward: 1 for a success, 0 for a failure (the paper's binary reward, the default). With the environment option
``partial_credit = true`` (``env_options = {partial_credit = true}``) a failure earns the fraction of the task
done right instead (``CalcEpisode.partial_fraction``): the share of the task's calls, counted from the first,
that called the right tool with the right result and, in a task of several user turns, sit in their own turn.
``success`` stays the whole task either way, so held-out success and the signals (which count ``success``) keep
their meaning; only the trainer's reward changes. A failure always earns less than 1. BFCL keeps the binary
reward.
"""

from __future__ import annotations

import copy
import random
from typing import Any, Iterator

from coevolve_engine.core.environment import (
    Environment,
    Episode,
    Observation,
    Score,
    SpecError,
    ToolCall,
)
from coevolve_engine.adapters.environments.calc import drafts
from coevolve_engine.adapters.environments.calc.tasks import (
    ENV_NAME,
    FULL_SPACE,
    LIMIT,
    SEED_SPACE,
    TOOLS,
    apply,
    check_spec,
    generate,
)

MAX_EPISODE_CALLS = 12
SPLITS = ("seed", "test", "full")
#: The held-out test set is generated from this seed unless another is asked for.
TEST_SEED = 20261130
DEFAULT_SIZES = {"seed": 200, "test": 300, "full": 200}

_DESCRIPTIONS = {"add": "x = x + n", "sub": "x = x - n", "mul": "x = x * n"}
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": name, "description": _DESCRIPTIONS[name],
        "parameters": {"type": "object", "properties": {"n": {"type": "integer", "description": "integer"}},
                       "required": ["n"]}}}
    for name in TOOLS
]


class CalcEpisode(Episode):
    """One attempt at one calc task: ``x`` starts at the task's start; every call is checked, then applied."""

    def __init__(self, task_id: str, spec: dict[str, Any], *, partial_credit: bool = False) -> None:
        self.task_id = task_id
        self.spec = spec
        self.partial_credit = partial_credit
        self.x = spec["start"]
        self.calls: list[str] = []  # tools applied, in order
        self.values: list[int] = []  # x after each applied call
        self.errors: list[str] = []  # refusals, in order
        self.replies: list[str | None] = []
        self.messages: list[str] = list(spec.get("turns") or [spec["prompt"]])
        self.turn = 0  # the current user turn, 1-based
        self.by_turn: list[tuple[list[str], int, int]] = []  # per finished turn: tools applied, refusals, x after
        self._marks = (0, 0)
        self._state = "before"  # before -> turn -> between -> turn ... -> done

    def next_turn(self) -> str | None:
        if self._state == "turn":  # the agent did not end its turn: end it without a reply
            self.end_turn(None)
        if self._state in ("before", "between") and self.turn < len(self.messages):
            self.turn += 1
            self._state = "turn"
            self._marks = (len(self.calls), len(self.errors))
            return self.messages[self.turn - 1]
        self._state = "done"
        return None

    def tools(self) -> list[dict[str, Any]]:
        return copy.deepcopy(TOOL_SCHEMAS)

    def execute(self, call: ToolCall) -> Observation:
        problem = self._refusal(call)
        if problem is not None:
            if self._state == "turn":
                self.errors.append(problem)
            return Observation(f"Error: {problem}", error=problem)
        x = apply(call.name, self.x, call.arguments["n"])
        self.x = x
        self.calls.append(call.name)
        self.values.append(x)
        return Observation(f"x={x}")

    def _refusal(self, call: ToolCall) -> str | None:
        """Why ``call`` is refused, or None when it runs."""
        if self._state != "turn":
            return "the episode is over" if self._state == "done" else "no turn in progress"
        if not isinstance(call.name, str) or call.name not in TOOLS:
            return f"unknown tool {call.name!r:.60} (tools: {', '.join(TOOLS)})"
        if not isinstance(call.arguments, dict):
            return f"arguments must be an object, got {type(call.arguments).__name__}"
        extra = [str(key)[:40] for key in call.arguments if key != "n"]
        if extra:
            return f"unknown argument(s) {extra} ({call.name} takes only n)"
        n = call.arguments.get("n")
        if not isinstance(n, int) or isinstance(n, bool):
            return f"n must be an integer, got {type(n).__name__}"
        if len(self.calls) + len(self.errors) >= MAX_EPISODE_CALLS:
            return f"more than {MAX_EPISODE_CALLS} calls"
        if abs(apply(call.name, self.x, n)) > LIMIT:
            return f"{call.name} {n} would take x out of -{LIMIT}..{LIMIT}"
        return None

    def end_turn(self, reply: str | None) -> None:
        if self._state == "turn":
            self.replies.append(reply)
            calls, errors = self._marks
            self.by_turn.append((self.calls[calls:], len(self.errors) - errors, self.x))
            self._state = "between" if self.turn < len(self.messages) else "done"

    def _failed_turn(self) -> int:
        """The first turn whose calls, refusals or resulting value differ from the task's (1 for one turn)."""
        if len(self.messages) == 1:
            return 1
        x = self.spec["start"]
        for index, step in enumerate(self.spec["steps"]):
            if index >= len(self.by_turn):
                return index + 1
            x = apply(step["op"], x, step["n"])
            calls, errors, after = self.by_turn[index]
            if errors or calls != [step["op"]] or after != x:
                return index + 1
        return len(self.messages)

    def score(self) -> Score:
        if self._state == "turn":
            self.end_turn(None)
        if self.spec["form"] == "explore":
            return Score(0.0, False, "exploration episode: nothing to score", failed_turn=1)
        chain = [step["op"] for step in self.spec["steps"]]
        target = self.spec["target"]
        failure = None
        if self.errors:
            failure = f"{len(self.errors)} call(s) refused, first: {self.errors[0]}"
        elif not self.calls:
            failure = f"no call made; want {'>'.join(chain)} to x={target}"
        elif self.calls != chain:
            failure = f"wrong chain: called {'>'.join(self.calls)}, want {'>'.join(chain)}"
        elif self.x != target:
            failure = f"wrong value: x={self.x}, want {target}"
        elif len(self.messages) > 1 and any(
                calls != [step["op"]] for (calls, _, _), step in zip(self.by_turn, self.spec["steps"])):
            failure = "right chain, but not one call in each turn"
        if failure is not None:
            reward = self.partial_fraction() if self.partial_credit else 0.0
            return Score(reward, False, failure + (f" (partial credit {reward:.2f})" if self.partial_credit else ""),
                         failed_turn=self._failed_turn())
        return Score(1.0, True, f"solved: {'>'.join(chain)} to x={target}")

    def partial_fraction(self) -> float:
        """The fraction of the task done right, for a failed episode, in [0, 1).

        One user turn: the longest run of calls, from the first, that match the task's chain in tool and in the
        value of ``x`` after the call, over the larger of the chain's length and the calls attempted (applied
        and refused), so extra or refused calls cost credit. Several user turns: the turns before the first that
        went wrong (``failed_turn``), over the number of turns. A failure never earns 1: it is capped at
        (n - 1) / n for a chain of n calls (an n-call task failed with every call right, e.g. by a refused extra
        call, earns what n - 1 right calls earn)."""
        steps = self.spec["steps"]
        if len(self.messages) > 1:
            right = self._failed_turn() - 1
            return min(right, len(steps) - 1) / len(steps)
        x, right = self.spec["start"], 0
        for step, called, value in zip(steps, self.calls, self.values):
            x = apply(step["op"], x, step["n"])
            if called != step["op"] or value != x:
                break
            right += 1
        attempted = max(len(steps), len(self.calls) + len(self.errors))
        return min(right / attempted, (len(steps) - 1) / len(steps))


class CalcEnvironment(Environment):
    """Procedural register-machine tasks for tiny tool-calling policies (see ``tasks`` for the skill space)."""

    name = ENV_NAME
    splits = SPLITS

    def __init__(self, *, partial_credit: bool = False) -> None:
        """partial_credit: a failed episode's reward is the fraction of the task done right
        (``CalcEpisode.partial_fraction``) instead of 0; success stays the whole task."""
        if not isinstance(partial_credit, bool):
            raise TypeError(f"partial_credit must be true or false, got {partial_credit!r}")
        self.partial_credit = partial_credit

    def check_spec(self, spec: dict[str, Any]) -> list[str]:
        return check_spec(spec)

    def start(self, task_id: str, spec: dict[str, Any]) -> Episode:
        problems = check_spec(spec)
        if problems:
            raise SpecError(task_id, problems)
        return CalcEpisode(task_id, copy.deepcopy(spec), partial_credit=self.partial_credit)

    def load_tasks(self, split: str | None = None, n: int | None = None, seed: int | None = None, *,
                   category: str | None = None, limit: int | None = None,
                   **options: Any) -> Iterator[dict[str, Any]]:
        """Task records of a split, deterministic in ``seed``.

        ``seed`` (the default; n=200, seed 0): one or two calls of any tool, small operands, no distractors, both
        forms.
        ``test`` (n=300, seed 20261130): the held-out set, balanced over every skill value.
        ``full`` (n=200, seed 0): drawn like ``test`` but from ``seed``, for curriculum benchmarks.
        Neither ``seed`` nor ``full`` shares a prompt with the test set of seed 20261130. ``category`` and
        ``limit`` are what ``coevolve-engine tasks import`` passes: another name for the split, and a cap on n.
        """
        if options:
            raise TypeError(f"unknown option(s) for calc load_tasks: {', '.join(sorted(options))}")
        if split is not None and category is not None and split != category:
            raise ValueError(f"split {split!r} and category {category!r} disagree; give one")
        split = split or category or "seed"
        if split not in SPLITS:
            raise ValueError(f"unknown calc split {split!r}; known: {', '.join(SPLITS)}")
        n = DEFAULT_SIZES[split] if n is None else n
        n = n if limit is None else min(n, limit)
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if seed is None:
            seed = TEST_SEED if split == "test" else 0
        if split == "test":
            specs = generate(FULL_SPACE, n, seed)
        else:
            held_out = {spec["prompt"] for spec in generate(FULL_SPACE, DEFAULT_SIZES["test"], TEST_SEED)}
            specs = generate(SEED_SPACE if split == "seed" else FULL_SPACE, n, seed, exclude=held_out)
        for index, spec in enumerate(specs):
            yield {"task_id": f"{ENV_NAME}/{split}-{seed}-{index:04d}", "env": ENV_NAME, "prompt": spec["prompt"],
                   "spec": spec, "source": f"{ENV_NAME}:{split}:seed={seed}",
                   "meta": {"split": split, "skill": spec["skill"]}}

    def reference_solution(self, spec: dict[str, Any]) -> list[list[ToolCall]] | None:
        """The task's chain with its operands: in one turn, or one call in each of its turns."""
        if not isinstance(spec, dict) or spec.get("form") == "explore" or check_spec(spec):
            return None
        calls = [ToolCall(step["op"], {"n": step["n"]}) for step in spec["steps"]]
        return [[call] for call in calls] if spec.get("turns") else [calls]

    def exploration_spec(self, seed_spec: dict[str, Any], instruction: str) -> dict[str, Any]:
        return drafts.exploration_spec(seed_spec, instruction)

    def exploration_worlds(self, n: int, seed: int) -> list[dict[str, Any]]:
        """Calc's world is its start value: ``n`` of them in -20..50, world ``i`` drawn from ``(seed, i)``."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return [{"kind": "calc", "start": random.Random(f"calc-world/{seed}/{index}").randint(-20, 50)}
                for index in range(n)]

    def draft_schema(self) -> dict[str, Any]:
        return drafts.DRAFT_SCHEMA

    def spec_from_draft(self, seed_spec: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
        return drafts.spec_from_draft(seed_spec, draft)
