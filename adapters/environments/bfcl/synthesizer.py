"""The offline BFCL synthesizer: new multi-turn tasks from a pattern's tasks, without a model.

Registered as ``"offline:bfcl"`` in ``coevolve_engine.synthesis.candidates.SYNTHESIZERS``. The tasks that a
pattern's member trajectories attempted are the seeds; the pattern's dominant signal decides the mix of
operators (see ``task_edits`` and ``literal_edits`` for the edits themselves):

=============  =====================================================================================
forgetting     close variants of the forgotten task: one rename or renumber, sometimes on its first turns only
boundary       perturbed literals (two renames/renumbers), or the task spliced with another of the pattern
rare           turns of two tasks over overlapping API classes spliced into one unusual call sequence
=============  =====================================================================================

Every candidate's first user message differs from its parents' (a rename or renumber in it, or the first two
turns merged), since validation rejects a prompt that is a near-copy of an existing task's. Everything is
drawn from ``random.Random(f"{seed}:{pattern_id}:{attempt}")``: the same store, patterns and seed give the
same candidates. Candidates are only proposed; validation replays their ground truth.
"""

from __future__ import annotations

import json
import math
import random
from typing import TYPE_CHECKING, Any, Sequence

from coevolve_engine.adapters.environments.bfcl import literal_edits as literals
from coevolve_engine.adapters.environments.bfcl import task_edits as edits
from coevolve_engine.adapters.environments.bfcl.shipped import is_stateless
from coevolve_engine.adapters.environments.bfcl.specs import ENV_NAME, check_structure, first_user_message
from coevolve_engine.core.candidates import Candidate, FailurePattern, Synthesizer, quotas
from coevolve_engine.core.ids import spec_hash

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.store import Store

Spec = dict[str, Any]

#: Operator weights per dominant signal.
OPERATOR_MIX: dict[str, tuple[tuple[str, float], ...]] = {
    "forgetting": (("variant", 0.7), ("truncated_variant", 0.3)),
    "boundary": (("perturb", 0.6), ("splice", 0.4)),
    "rare": (("splice", 0.8), ("perturb", 0.2)),
}


class OfflineBFCLSynthesizer(Synthesizer):
    """Recombines and perturbs BFCL multi-turn tasks; needs bfcl-eval, no model."""

    name = "offline:bfcl"

    def __init__(self, *, attempts: int = 8, max_turns: int = 6, partners: int = 6) -> None:
        """attempts: tries per wanted candidate; max_turns: turns of a spliced task; partners: tasks tried
        as the second half of a splice."""
        self.attempts = attempts
        self.max_turns = max_turns
        self.partners = partners

    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int = 20,
                seed: int = 0) -> list[Candidate]:
        pool = _pool(store)
        run = _Run(self, pool, seed)
        plans = [(pattern, sound) for pattern in patterns
                 if (sound := [(tid, spec) for tid, spec in _seeds(pattern) if run.sound(tid, spec)])]
        shares = quotas([pattern.size for pattern, _ in plans], max_candidates)
        made: list[Candidate] = []
        attempt = {pattern.pattern_id: 0 for pattern, _ in plans}
        for (pattern, seeds), quota in zip(plans, shares):
            made += run.fill(pattern, seeds, quota, attempt)
        while len(made) < max_candidates:  # what one pattern could not fill, the others share
            before = len(made)
            for pattern, seeds in plans:
                if len(made) < max_candidates:
                    made += run.fill(pattern, seeds, 1, attempt)
            if len(made) == before:
                break
        return made


def _pool(store: "Store") -> dict[str, Spec]:
    """Every BFCL multi-turn training task in the store, by task id (sorted): the partners of splices.

    Eval tasks (split 'eval') are held out and never become a parent."""
    rows = store.execute(
        "SELECT task_id, spec FROM tasks WHERE env = $env AND split = 'train' "
        "AND json_extract_string(spec, '$.kind') = 'multi_turn' "
        "ORDER BY task_id", {"env": ENV_NAME}).fetchall()
    pool = {}
    for task_id, spec in rows:
        spec = json.loads(spec) if isinstance(spec, str) else spec
        if not check_structure(spec):
            pool[task_id] = spec
    return pool


def _seeds(pattern: FailurePattern) -> list[tuple[str, Spec]]:
    """The pattern's BFCL multi-turn tasks, closest member first."""
    seeds = []
    for task_id in pattern.task_ids:
        task = pattern.tasks[task_id]
        spec = task.get("spec")
        if task.get("env") == ENV_NAME and isinstance(spec, dict) and spec.get("kind") == "multi_turn" \
                and not check_structure(spec):
            seeds.append((task_id, spec))
    return seeds


class _Run:
    """One ``propose`` call: the pool, what was made so far, and the operators."""

    def __init__(self, synthesizer: OfflineBFCLSynthesizer, pool: dict[str, Spec], seed: int) -> None:
        self.synthesizer = synthesizer
        self.pool = pool
        self.seed = seed
        self.prompts = {first_user_message(spec) for spec in pool.values()}
        self.specs: set[str] = set()
        self._used: dict[str, set[str]] = {}
        self._sound: dict[str, bool] = {}

    def fill(self, pattern: FailurePattern, seeds: list[tuple[str, Spec]], wanted: int,
             attempt: dict[str, int]) -> list[Candidate]:
        made: list[Candidate] = []
        for _ in range(wanted * self.synthesizer.attempts):
            if len(made) >= wanted:
                break
            n = attempt[pattern.pattern_id]
            attempt[pattern.pattern_id] += 1
            rng = random.Random(f"{self.seed}:{pattern.pattern_id}:{n}")
            task_id, spec = seeds[n % len(seeds)]
            candidate = self._make(pattern, seeds, task_id, spec, rng, n)
            if candidate is not None:
                made.append(candidate)
        return made

    def _make(self, pattern: FailurePattern, seeds: list[tuple[str, Spec]], task_id: str, spec: Spec,
              rng: random.Random, attempt: int) -> Candidate | None:
        mix = OPERATOR_MIX.get(pattern.dominant_signal, OPERATOR_MIX["boundary"])
        operator = rng.choices([name for name, _ in mix], weights=[weight for _, weight in mix])[0]
        parents, operations, strong = [task_id], [operator], []
        if operator == "splice":
            spliced = self._splice(pattern, seeds, task_id, spec, rng)
            if spliced is None:
                return None
            partner, edited, layout = spliced
            parents.append(partner)
            operations.append(f"layout {layout}")
            strong.append(True)  # two requests in one first message
            if rng.random() < 0.3:
                edited = _literal_edits(edited, rng, 1, operations, strong) or edited
        else:
            edited = spec
            if operator == "truncated_variant":
                turns = len(spec["turns"])
                kept = rng.randint(max(1, math.ceil(turns / 2)), turns - 1) if turns > 1 else turns
                edited = edits.truncate(spec, kept)
                if edited is None:
                    return None
                operations.append(f"truncate to {len(edited['turns'])} of {turns} turns")
            edited = _literal_edits(edited, rng, 2 if operator == "perturb" else 1, operations, strong)
            if edited is None:
                return None
        return self._candidate(pattern, edited, parents, operations, attempt, any(strong))

    def _splice(self, pattern: FailurePattern, seeds: list[tuple[str, Spec]], task_id: str, spec: Spec,
                rng: random.Random) -> tuple[str, Spec, str] | None:
        classes = set(spec["involved_classes"])
        others = [(tid, s) for tid, s in sorted(self.pool.items()) if tid != task_id]
        tiers = []
        if pattern.dominant_signal != "rare":
            tiers.append([(tid, s) for tid, s in seeds if tid != task_id])
        tiers += [
            [(tid, s) for tid, s in others if set(s["involved_classes"]) == classes],
            [(tid, s) for tid, s in others if set(s["involved_classes"]) & classes],
            others,
        ]
        for tier in tiers:
            compatible = [(tid, s) for tid, s in tier if self._compatible(task_id, spec, tid, s)]
            rng.shuffle(compatible)
            for partner, partner_spec in compatible[: self.synthesizer.partners]:
                result = edits.splice(spec, partner_spec, rng, self.synthesizer.max_turns)
                if result is not None:
                    return partner, result[0], result[1]
        return None

    def _used_classes(self, task_id: str, spec: Spec) -> set[str]:
        if task_id not in self._used:
            self._used[task_id] = edits.used_classes(spec)
        return self._used[task_id]

    def _compatible(self, task_id: str, spec: Spec, other_id: str, other: Spec) -> bool:
        """A quick look before splicing: no stateful class both call, a sound partner, and a first turn long
        enough to change the merged prompt's meaning (at least 0.6 of the seed's words)."""
        if not (edits.is_plain(spec) and edits.is_plain(other)):
            return False
        if edits.words(first_user_message(other)) < 0.6 * edits.words(first_user_message(spec)):
            return False
        shared = self._used_classes(task_id, spec) & self._used_classes(other_id, other)
        return all(is_stateless(name) for name in shared) and self.sound(other_id, other)

    def sound(self, task_id: str, spec: Spec) -> bool:
        """Whether the task's own ground truth replays without an error observation (a task whose state does
        not match its turns would pass its fault on to every variant)."""
        if task_id not in self._sound:
            try:
                self._sound[task_id] = not any(error for turn in edits.call_results(spec) for _, error in turn)
            except Exception:  # noqa: BLE001 - a config that does not load is not sound
                self._sound[task_id] = False
        return self._sound[task_id]

    def _candidate(self, pattern: FailurePattern, spec: Spec, parents: list[str], operations: list[str],
                   attempt: int, strong: bool) -> Candidate | None:
        """The finished candidate, or None when its prompt is not new or the same task was made already."""
        parent_prompts = {first_user_message(self.pool.get(p) or pattern.tasks[p]["spec"]) for p in parents}
        if not strong or first_user_message(spec) in parent_prompts | self.prompts:
            merged = edits.merge_first_turns(spec)
            if merged is None:
                return None
            spec = merged
            operations.append("merge first turns")
            if first_user_message(spec) in parent_prompts | self.prompts:
                return None
        spec = {**spec, "bfcl_id": None}
        digest = spec_hash(spec)[:12]
        if digest in self.specs:
            return None
        self.specs.add(digest)
        spec["bfcl_id"] = f"syn_{digest}"
        prompt = first_user_message(spec)
        self.prompts.add(prompt)
        return Candidate.create(
            round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal, env=ENV_NAME,
            synthesizer=OfflineBFCLSynthesizer.name, prompt=prompt, spec=spec,
            provenance={"synthesizer": OfflineBFCLSynthesizer.name, "seed": self.seed, "attempt": attempt,
                        "parents": parents, "operators": operations, "task_id": f"{ENV_NAME}-syn/{digest}"},
        )


#: Renames that move a prompt's meaning (file and directory names, user handles); a changed number, id or
#: person's name barely moves its embedding, so a prompt changed only by those is merged with later turns.
STRONG_RENAMES = ("file", "dir", "handle")


def _literal_edits(spec: Spec, rng: random.Random, count: int, operations: list[str],
                   strong: list[bool]) -> Spec | None:
    """``spec`` with up to ``count`` renames or renumbers (the first one in the first turn when possible);
    None when none applies. Appends True to ``strong`` when a strong rename changed the first turn."""
    done = 0
    touched: set[Any] = set()
    for _ in range(count):
        options: list[Any] = [option for option in [*literals.renames(spec), *literals.renumbers(spec)]
                              if _key(option) not in touched]
        if not options:
            break
        first_turn = [option for option in options if option.in_first_turn]
        if done == 0 and first_turn and rng.random() < 0.8:
            options = first_turn
        rng.shuffle(options)
        for option in options:
            edited, description, new = _apply(spec, option, rng)
            if edited is not None:
                spec, done = edited, done + 1
                touched |= {_key(option), new}
                operations.append(description)
                if isinstance(option, literals.Rename) and option.kind in STRONG_RENAMES and option.in_first_turn:
                    strong.append(True)
                break
        else:
            break
    return spec if done else None


def _key(option: Any) -> Any:
    return option.name if isinstance(option, literals.Rename) else option.value


def _apply(spec: Spec, option: Any, rng: random.Random) -> tuple[Spec | None, str, Any]:
    if isinstance(option, literals.Rename):
        new = literals.new_name(option, rng, json.dumps(spec, ensure_ascii=False).lower())
        if new is None:
            return None, "", None
        return literals.rename(spec, option.name, new), f"rename {option.kind} {option.name!r} -> {new!r}", new
    value = literals.new_number(option, rng, edits.user_texts(spec))
    if value is None:
        return None, "", None
    return literals.renumber(spec, option, value), f"renumber {option.form} -> {value!r}", value
