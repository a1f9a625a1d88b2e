"""The offline calc synthesizer: new tasks near a failure pattern's skill parameters, without a model.

Registered as ``"offline:calc"`` in ``coevolve_engine.synthesis.candidates.SYNTHESIZERS``. The calc tasks that
a pattern's member trajectories attempted are the seeds; each candidate takes a seed's skill cell (its chain
of tools, operand size, distractors and form), moves it, and draws a fresh task of the moved cell. How far it
moves depends on the pattern's dominant signal:

=============  ==========================================================================================
forgetting     no move: fresh numbers in the forgotten task's own cell (reinforce the skill)
boundary       one move of one parameter by one notch (a call more or fewer, one tool swapped, operand size,
               one distractor more or fewer, the other form, one turn or one per call): tasks just around
               where the agent wavers
rare           two moves, each towards the value the store's calc tasks hold least (rarely exercised skills)
=============  ==========================================================================================

Stepping stones (``stepping_stones = true``, the default) steer the moves by what the policy's own recent
training rollouts show (never the held-out evaluations; the last ``window`` steps of ``scored_trajectories`` on
calc training tasks):

- a boundary move goes preferably to a neighbouring cell where the policy has *partial* success. Each move's
  weight is multiplied by ``0.1 + 4 * r * (1 - p)`` (``frontier``), p the success rate and r the mean reward of
  the rollouts in the moved cell (cells keyed by calls, operand size, distractors and turns); a cell with fewer
  than 8 such rollouts counts 1. With the binary reward r = p and the factor is 0.1 + 4 p(1 - p), largest at
  p = 0.5; with calc's partial credit a cell the policy never solves whole but half does (r > 0, p = 0) is a
  stepping stone too; a cell solved (p = 1) or hopeless (r = 0) weighs 0.1.
- a rare move that brings in a tool weighs ``1 / (1 + u * N)``, u the share of the policy's recent calls that
  went to that tool and N the training tasks, instead of ``1 / (1 + tasks holding the tool)`` (an appended call
  counts as the rarer of its tool and its chain length): the tools the policy under-uses, not only those the
  task set lacks.
- forgetting stays in the forgotten task's own cell.

Without rollouts in the store (or ``stepping_stones = false``) every factor is 1 and the moves are as above.

``keep`` names parameters no move may change (``keep = ["calls", "turns"]``: every candidate has its seed's
number of calls and user turns, so the task set keeps the mix of the tasks it grows from; moving a 3-call task
otherwise often drops a call or joins its turns into one, and the synthesized tasks lean to fewer turns). A seed
whose every move is kept gives no candidate. The default keeps nothing.

Moves stay inside ``FULL_SPACE`` (the held-out test set's space), or inside the narrower ``space`` the
synthesizer is given (``[synthesis.options] space = {forms = ["steps"]}``: a seed outside it is first moved
into it, e.g. a 'goal' task to its 'steps' twin). A candidate's prompt is new: never one of a
calc task in the store nor of an earlier candidate. Everything is drawn from
``random.Random(f"{seed}:{pattern_id}:{attempt}")``: the same store, patterns and seed give the same candidates.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from coevolve_engine.adapters.environments.calc.tasks import (
    ENV_NAME,
    FULL_SPACE,
    Cell,
    SkillSpace,
    check_spec,
    make_spec,
)
from coevolve_engine.core.candidates import Candidate, FailurePattern, Synthesizer, quotas
from coevolve_engine.core.ids import spec_hash

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.store import Store

NAME = "offline:calc"
#: How many moves away from the seed's cell, per dominant signal.
MOVES = {"forgetting": 0, "boundary": 1, "rare": 2}
PARAMETERS = ("calls", "tool", "operands", "distractors", "form")
#: What a move may change (``neighbours``), and so what ``keep`` may name.
MOVE_PARAMETERS = (*PARAMETERS, "turns")


def cell_of(spec: dict[str, Any]) -> Cell:
    skill = spec["skill"]
    return Cell(tuple(skill["chain"].split(">")), skill["operands"], skill["distractors"], skill["form"],
                skill.get("turns", "one"))


def skill_space(values: Mapping[str, Any] | None) -> SkillSpace:
    """``FULL_SPACE`` narrowed to ``values`` (SkillSpace fields: tools, calls, operands, distractors, forms); each
    value must be a non-empty subset of ``FULL_SPACE``'s."""
    if not values:
        return FULL_SPACE
    known = {field.name for field in fields(SkillSpace)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown skill parameter(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    narrowed = {}
    for name, chosen in values.items():
        allowed = getattr(FULL_SPACE, name)
        chosen = tuple(chosen) if isinstance(chosen, (list, tuple)) else (chosen,)
        if not chosen or any(value not in allowed for value in chosen):
            raise ValueError(f"space.{name} must be a non-empty subset of {list(allowed)}, got {list(chosen)}")
        narrowed[name] = tuple(value for value in allowed if value in chosen)
    return replace(FULL_SPACE, **narrowed)


def project(cell: Cell, space: SkillSpace) -> Cell:
    """``cell`` moved into ``space``: operands, distractors and form outside it to the nearest value inside, a
    tool outside it to the space's first tool (the number of calls is left to the moves)."""
    chain = tuple(tool if tool in space.tools else space.tools[0] for tool in cell.chain)
    operands = cell.operands if cell.operands in space.operands else space.operands[0]
    distractors = min(space.distractors, key=lambda count: (abs(count - cell.distractors), count))
    form = cell.form if cell.form in space.forms else space.forms[0]
    turns = cell.turns if cell.turns in space.turns else space.turns[0]
    return Cell(chain, operands, distractors, form, turns)


def neighbours(cell: Cell, space: SkillSpace = FULL_SPACE) -> list[tuple[str, str, Any, Cell]]:
    """Every cell one move from ``cell`` inside ``space``: (parameter, description, new value, cell)."""
    out = []
    chain = cell.chain
    if len(chain) + 1 in space.calls:
        for tool in space.tools:
            out.append(("calls", f"append {tool}", len(chain) + 1, Cell(chain + (tool,), *_rest(cell))))
    if len(chain) - 1 in space.calls:
        for index in range(len(chain)):
            shorter = chain[:index] + chain[index + 1:]
            out.append(("calls", f"drop call {index + 1} ({chain[index]})", len(shorter), Cell(shorter, *_rest(cell))))
    for index, old in enumerate(chain):
        for tool in space.tools:
            if tool != old:
                swapped = chain[:index] + (tool,) + chain[index + 1:]
                out.append(("tool", f"call {index + 1}: {old} -> {tool}", tool, Cell(swapped, *_rest(cell))))
    for size in space.operands:
        if size != cell.operands:
            out.append(("operands", f"operands {cell.operands} -> {size}", size,
                        Cell(chain, size, cell.distractors, cell.form, cell.turns)))
    for count in (cell.distractors - 1, cell.distractors + 1):
        if count in space.distractors:
            out.append(("distractors", f"distractors {cell.distractors} -> {count}", count,
                        Cell(chain, cell.operands, count, cell.form, cell.turns)))
    for form in space.forms:
        if form != cell.form:
            out.append(("form", f"form {cell.form} -> {form}", form,
                        Cell(chain, cell.operands, cell.distractors, form, cell.turns)))
    if len(chain) > 1:
        for turns in space.turns:
            if turns != cell.turns:
                out.append(("turns", f"turns {cell.turns} -> {turns}", turns,
                            Cell(chain, cell.operands, cell.distractors, cell.form, turns)))
    return out


def _rest(cell: Cell) -> tuple[str, int, str, str]:
    return cell.operands, cell.distractors, cell.form, cell.turns


class OfflineCalcSynthesizer(Synthesizer):
    """Moves a pattern's tasks through the calc skill space; no model."""

    name = NAME

    def __init__(self, *, attempts: int = 8, space: Mapping[str, Any] | None = None,
                 stepping_stones: bool = True, window: int = 50, keep: Sequence[str] = ()) -> None:
        """attempts: tries per wanted candidate before a pattern gives up. space: the skill values candidates
        may take (``skill_space``; default ``FULL_SPACE``), e.g. ``{"forms": ["steps"]}`` when the policy is
        not meant to learn the 'goal' form. stepping_stones: steer boundary moves towards cells of partial
        success and rare moves towards the tools the policy under-uses (module docstring). window: how many
        of the latest training steps' rollouts the stepping stones read. keep: parameters no move may change
        (``MOVE_PARAMETERS``; e.g. ["calls", "turns"] keeps the seeds' mix of calls and user turns)."""
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        if window < 1:
            raise ValueError(f"window must be >= 1 step, got {window}")
        self.attempts = attempts
        self.space = skill_space(space)
        self.stepping_stones = stepping_stones
        self.window = window
        keep = [keep] if isinstance(keep, str) else list(keep)
        if unknown := sorted(set(keep) - set(MOVE_PARAMETERS)):
            raise ValueError(f"keep: unknown parameter(s) {', '.join(map(str, unknown))} (a move changes one of "
                             f"{', '.join(MOVE_PARAMETERS)})")
        self.keep = frozenset(keep)

    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int = 20,
                seed: int = 0) -> list[Candidate]:
        pool = _pool(store)
        run = _Run(pool, seed, self.attempts, self.space, self.keep)
        if self.stepping_stones:
            run.outcomes, run.tool_use = policy_outcomes(store, self.window)
        plans = [(pattern, seeds) for pattern in patterns if (seeds := _seeds(pattern))]
        made: list[Candidate] = []
        for (pattern, seeds), quota in zip(plans, quotas([p.size for p, _ in plans], max_candidates)):
            made += run.fill(pattern, seeds, quota)
        while len(made) < max_candidates:  # what one pattern could not fill, the others share
            before = len(made)
            for pattern, seeds in plans:
                if len(made) < max_candidates:
                    made += run.fill(pattern, seeds, 1)
            if len(made) == before:
                break
        return made


def _pool(store: "Store") -> list[dict[str, Any]]:
    """The specs of every calc training task in the store (sorted by task id); eval tasks are held out and
    shape neither the duplicate check nor the skill counts."""
    rows = store.execute("SELECT spec FROM tasks WHERE env = $env AND split = 'train' ORDER BY task_id",
                         {"env": ENV_NAME}).fetchall()
    return [json.loads(spec) if isinstance(spec, str) else spec for (spec,) in rows]


def outcome_key(cell: Cell) -> tuple[int, str, int, str]:
    """A cell's key for the policy's outcomes: calls, operand size, distractors, turns (the tools are left out: a
    window of rollouts holds too few per chain)."""
    return len(cell.chain), cell.operands, cell.distractors, cell.turns if len(cell.chain) > 1 else "one"


#: Fewer rollouts than this in a cell: its outcome is unknown (factor 1).
MIN_OUTCOME_ROLLOUTS = 8


def frontier(rollouts: int, p: float, r: float) -> float:
    """How much a boundary move towards a cell is preferred: 0.1 + 4 r (1 - p), p the cell's success rate and r
    its mean reward (1 when the cell has fewer than ``MIN_OUTCOME_ROLLOUTS`` rollouts)."""
    if rollouts < MIN_OUTCOME_ROLLOUTS:
        return 1.0
    return 0.1 + 4.0 * r * (1.0 - p)


def policy_outcomes(store: "Store", window: int) -> tuple[dict[tuple, tuple[int, float, float]], Counter[str]]:
    """The policy's scored rollouts on calc training tasks over the last ``window`` steps: per outcome key
    (rollouts, success rate, mean reward; the success rate where no rollout has a reward), and how many of its
    calls went to each tool."""
    rows = store.execute(
        """
        WITH recent AS (
            SELECT r.success, r.reward, r.action_pattern, t.spec
            FROM scored_trajectories AS r JOIN tasks AS t USING (task_id)
            WHERE t.env = $env AND t.split = 'train' AND r.success IS NOT NULL  -- an unscored rollout says nothing
              AND r.step > (SELECT max(step) FROM scored_trajectories) - $window
        )
        SELECT CAST(json_extract(spec, '$.skill.calls') AS INTEGER) AS calls,
               json_extract_string(spec, '$.skill.operands') AS operands,
               CAST(json_extract(spec, '$.skill.distractors') AS INTEGER) AS distractors,
               coalesce(json_extract_string(spec, '$.skill.turns'), 'one') AS turns,
               count(*), avg(CAST(success AS INTEGER)), coalesce(avg(reward), avg(CAST(success AS INTEGER)))
        FROM recent GROUP BY ALL
        """, {"env": ENV_NAME, "window": window}).fetchall()
    outcomes = {(calls, operands, distractors, turns if calls > 1 else "one"): (n, float(p), float(r))
                for calls, operands, distractors, turns, n, p, r in rows if calls is not None}
    patterns = store.execute(
        """
        SELECT r.action_pattern, count(*) FROM scored_trajectories AS r JOIN tasks AS t USING (task_id)
        WHERE t.env = $env AND t.split = 'train' AND r.action_pattern IS NOT NULL AND r.action_pattern <> ''
          AND r.step > (SELECT max(step) FROM scored_trajectories) - $window
        GROUP BY ALL
        """, {"env": ENV_NAME, "window": window}).fetchall()
    tool_use: Counter[str] = Counter()
    for pattern, count in patterns:
        for tool in pattern.split(">"):
            tool_use[tool] += count
    return outcomes, tool_use


def _seeds(pattern: FailurePattern) -> list[tuple[str, dict[str, Any]]]:
    """The pattern's well-formed calc tasks, closest member first."""
    seeds = []
    for task_id in pattern.task_ids:
        task = pattern.tasks[task_id]
        spec = task.get("spec")
        if task.get("env") == ENV_NAME and isinstance(spec, dict) and spec.get("form") != "explore" \
                and not check_spec(spec):
            seeds.append((task_id, spec))
    return seeds


class _Run:
    """One ``propose`` call: the store's calc tasks, how often each skill value occurs, what was made."""

    def __init__(self, pool: list[dict[str, Any]], seed: int, attempts: int, space: SkillSpace = FULL_SPACE,
                 keep: frozenset[str] = frozenset()) -> None:
        self.seed = seed
        self.keep = keep
        self.attempts = attempts
        self.space = space
        self.prompts = {spec.get("prompt") for spec in pool if isinstance(spec, dict)}
        self.counts: Counter[tuple[str, Any]] = Counter()
        for spec in pool:
            skill = spec.get("skill") if isinstance(spec, dict) else None
            if isinstance(skill, dict) and isinstance(skill.get("chain"), str):
                for parameter in ("calls", "operands", "distractors", "form"):
                    self.counts[(parameter, skill.get(parameter))] += 1
                for tool in set(skill["chain"].split(">")):
                    self.counts[("tool", tool)] += 1
        self.attempt: Counter[str] = Counter()
        self.pool_size = len(pool)
        self.outcomes: dict[tuple, tuple[int, float, float]] = {}  # stepping stones: the policy's outcomes
        self.tool_use: Counter[str] = Counter()  # stepping stones: the policy's calls per tool

    def fill(self, pattern: FailurePattern, seeds: list[tuple[str, dict[str, Any]]], wanted: int) -> list[Candidate]:
        made: list[Candidate] = []
        for _ in range(wanted * self.attempts):
            if len(made) >= wanted:
                break
            n = self.attempt[pattern.pattern_id]
            self.attempt[pattern.pattern_id] += 1
            rng = random.Random(f"{self.seed}:{pattern.pattern_id}:{n}")
            task_id, spec = seeds[n % len(seeds)]
            candidate = self._make(pattern, task_id, spec, rng, n)
            if candidate is not None:
                made.append(candidate)
        return made

    def _move(self, cell: Cell, rng: random.Random, rare: bool) -> tuple[Cell, str] | None:
        options = [option for option in neighbours(cell, self.space) if option[0] not in self.keep]
        if not options:
            return None
        if rare:  # towards what the store holds least of (the tools: what the policy calls least, if known)
            weights = [1.0 / (1 + self._rare_count(parameter, description, value, moved))
                       for parameter, description, value, moved in options]
        else:  # every parameter equally likely, whatever its number of moves; then towards partial success
            per = Counter(parameter for parameter, _, _, _ in options)
            weights = [1.0 / per[parameter] * frontier(*self.outcomes.get(outcome_key(moved), (0, 0.0, 0.0)))
                       for parameter, _, _, moved in options]
        _, description, _, moved = rng.choices(options, weights=weights)[0]
        return moved, description

    def _rare_count(self, parameter: str, description: str, value: Any, moved: Cell) -> float:
        """How much of ``value`` there is already: tasks holding it, or, for a move that brings in a tool when
        the policy's calls are known, the tool's share of those calls scaled to the training tasks."""
        total = sum(self.tool_use.values())
        tool = value if parameter == "tool" else moved.chain[-1] if description.startswith("append") else None
        if tool is None or not total:
            return self.counts[(parameter, value)]
        used = self.tool_use[tool] / total * self.pool_size
        # an appended call brings in a tool and a longer chain: it counts as rare as the rarer of the two
        return min(used, self.counts[(parameter, value)]) if parameter == "calls" else used

    def _make(self, pattern: FailurePattern, task_id: str, spec: dict[str, Any], rng: random.Random,
              attempt: int) -> Candidate | None:
        cell, moves = cell_of(spec), []
        if self.space != FULL_SPACE and project(cell, self.space) != cell:
            cell = project(cell, self.space)
            moves.append("into the synthesizer's space")
        for _ in range(MOVES.get(pattern.dominant_signal, 1)):
            moved = self._move(cell, rng, rare=pattern.dominant_signal == "rare")
            if moved is None:
                return None
            cell, description = moved
            moves.append(description)
        new = make_spec(cell, rng)
        if new["prompt"] in self.prompts:
            return None
        self.prompts.add(new["prompt"])
        digest = spec_hash(new)[:12]
        return Candidate.create(
            round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal, env=ENV_NAME,
            synthesizer=NAME, prompt=new["prompt"], spec=new,
            provenance={"synthesizer": NAME, "seed": self.seed, "attempt": attempt, "parents": [task_id],
                        "moves": moves or ["none: fresh numbers, same skill"], "skill": new["skill"],
                        "task_id": f"{ENV_NAME}-syn/{digest}"},
        )
