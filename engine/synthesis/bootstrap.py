"""Bootstrapping D_0: tasks from an explorer acting freely in the environment, with no signal to guide it.

The paper's initial task set D_0 (N = 100) comes from an LLM exploring the environment with no guidance,
while the benchmark's official tasks are held out for evaluation. Here:

1. **Worlds.** ``Environment.exploration_worlds(n, seed)`` gives starting states built from the environment
   itself (for BFCL: the API classes' combinations with generated initial states), never an eval task's.
2. **Unguided exploration.** In each world the explorer model acts in a real episode under the prompt
   ``explore_unguided`` ("explore freely, pursue varied realistic user goals"): no pattern, no summary, no
   signal.
3. **Abstraction and validation** exactly as for signal-guided synthesis: the same ``abstract`` prompt and
   draft schema (``ExplorationSynthesizer.explore_and_abstract``), then ``validate_candidates`` (synthesis,
   schema, ground-truth replay, novelty, and the optional agent attempt and judge; each candidate's
   similarity to the eval tasks is recorded in ``candidates.eval_similarity``). Accepted candidates become
   tasks of split 'train'.

Held out means held out: a task whose first user message is an eval task's of the environment (compared
after folding case and spaces) is marked at once (``synthesis_error``), so validation rejects it with reason
``synthesis``; a world never is an eval task's state, by construction.

``UnguidedSynthesizer`` (registered as ``llm-unguided``, ``needs_patterns = False``) is the synthesizer; run
from a round with ``synthesize(store, synthesizer="llm-unguided", round=R, options={..., "env": "bfcl"})`` it
is also the paper's *random exploration* ablation. Its candidates have ``pattern_id`` and ``signal`` NULL and
provenance ``{"world", "world_id", "seed", "model", "explorer_model", "prompt_versions", ...}``.

The library entry point (the run loop calls it in round 0 when the store has no train tasks)::

    from coevolve_engine.core.endpoint import Endpoint
    explorer = Endpoint("hosted_vllm/Qwen/Qwen3-8B", api_base="http://127.0.0.1:8000/v1")
    synthesizer = UnguidedSynthesizer(store_path="coevolve.duckdb", model=explorer, env="bfcl")
    report = bootstrap("coevolve.duckdb", synthesizer=synthesizer, n=100)
    report.accepted_total      # D_0 tasks in the store (accepted llm-unguided candidates of the round)

It explores worlds ``0, 1, 2, ...`` of ``seed`` in batches, validating after each, until ``n`` candidates of
``env`` and ``round`` from ``llm-unguided`` are accepted or ``max_worlds`` (default ``3 * n``) worlds are
spent. It never accepts more than ``n``. It is resumable and idempotent: a world that already gave a task
(accepted or not) is skipped, pending candidates left by a killed run are validated first, and a rerun once
``n`` are accepted adds nothing. Every model call is logged (and cached) in ``llm_calls``. A world whose
exploration or abstraction gave no task is kept as a rejected candidate with the reason and tried again by the
next run; after ``MAX_FAILED_IN_A_ROW`` such worlds in a row (a server down) it stops with a CoevolveError.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.endpoint import call_options
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.models.embeddings import Embedder
from coevolve_engine.prompts import load_prompt
from coevolve_engine.core.registry import PluginContext
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store
from coevolve_engine.synthesis.candidates import Candidate, FailurePattern, spec_hash, write_candidates
from coevolve_engine.synthesis.llm_synthesizer import ExplorationFailed, ExplorationSynthesizer, check_kinds
from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.adapters.environments import Environment

NAME = "llm-unguided"
EXPLORE_PROMPT = "explore_unguided"
ABSTRACT_PROMPT = "abstract"
NO_PATTERN = "(none: unguided exploration, no failure pattern and no signal)"
#: the most worlds one bootstrap explores (they are built at once, before the first exploration: about 5 s and
#: 30 MB for BFCL at this size)
MAX_WORLDS = 30_000

#: The query that lists a store's D_0 (what the CLI prints at the end).
D0_QUERY = ("select verdict, reason, task_id, prompt from candidates where synthesizer = 'llm-unguided' "
            "order by created_at")


def describe_world(world: dict[str, Any], limit: int = 4000) -> str:
    """A world as the models read it: its fields without the empty ones, as JSON (cut at ``limit``)."""
    shown = {key: value for key, value in world.items() if value not in ([], {}, None, "")}
    text = json.dumps(shown, ensure_ascii=False, indent=1)
    return text if len(text) <= limit else text[:limit] + "\n..."


class UnguidedSynthesizer(ExplorationSynthesizer):
    """Explores generated worlds of ``env`` freely and abstracts tasks from each (see the module doc).

    Patterns are ignored; ``propose`` explores worlds ``0 .. ceil(max_candidates / tasks_per_world) - 1``
    of ``seed``. ``env`` names the environment (default: the environment of the patterns' tasks).
    """

    name = NAME
    needs_patterns = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: PluginContext) -> "UnguidedSynthesizer":
        """Built with the store the run reads and the run's environment, unless the options name others."""
        return cls(**{"store_path": context.store_path, "env": context.env, **call_options(options)})

    def __init__(self, *, env: str | None = None, tasks_per_world: int = 1, **exploration: Any) -> None:
        """``exploration``: the models and how they are called (``ExplorationSynthesizer``)."""
        if tasks_per_world < 1:
            raise ValueError(f"tasks_per_world must be >= 1, got {tasks_per_world}")
        super().__init__(**exploration)
        self.env = env
        self.tasks_per_world = tasks_per_world

    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int, seed: int,
                round: int | None = None) -> list[Candidate]:
        env = load_environment(self.env or _pattern_env(patterns))
        check_kinds(self.kinds, env.draft_kinds())
        worlds = _worlds(env, math.ceil(max_candidates / self.tasks_per_world), seed)
        held_out = eval_prompts(store, env.name)
        candidates: list[Candidate] = []
        for index, world in enumerate(worlds):
            wanted = min(self.tasks_per_world, max_candidates - len(candidates))
            if wanted <= 0:
                break
            candidates += hold_out(self.for_world(env, world, index=index, seed=seed, round=round)[:wanted], held_out)
        return candidates[:max_candidates]

    def for_world(self, env: "Environment", world: dict[str, Any], *, index: int, seed: int,
                  round: int | None) -> list[Candidate]:
        """The candidates of one world: up to ``tasks_per_world`` tasks, or one carrying why there are none."""
        explore_prompt, abstract_prompt = load_prompt(EXPLORE_PROMPT), load_prompt(ABSTRACT_PROMPT)
        world_id = world_name(env.name, seed, index)
        described = describe_world(world)
        provenance: dict[str, Any] = {
            "seed": seed, "world": index, "world_id": world_id, "world_hash": spec_hash(world)[:16],
            "parent_tasks": [], "model": self.client.model, "explorer_model": self.explorer.model,
            "prompt_versions": [explore_prompt.id, abstract_prompt.id],
        }
        values = {
            "world": described, "world_id": world_id, "min_calls": self.min_calls,
            "max_calls": self.max_explore_steps, "n_tasks": self.tasks_per_world,
            # the abstraction prompt's pattern fields, empty on purpose: nothing guides these tasks
            "summary": NO_PATTERN, "signal": "none", "focus_pattern": "(none)",
            "seed_task": f"(no seed task: the exploration started from {world_id}, this starting state)\n{described}",
        }

        def candidate(prompt: str, spec: dict[str, Any], task_provenance: dict[str, Any]) -> Candidate:
            return Candidate.create(round=round, pattern_id=None, signal=None, env=env.name, synthesizer=NAME,
                                    prompt=prompt, spec=spec, provenance=task_provenance)

        try:
            written = self.explore_and_abstract(
                env, world, label=f"explore/{world_id}", explore_prompt=explore_prompt,
                abstract_prompt=abstract_prompt, values=values, provenance=provenance, wanted=self.tasks_per_world,
                seed=seed)
        except ExplorationFailed as exc:
            spec = {"unwritten": True, "world_id": world_id, "stage": exc.stage, "error": exc.error}
            return [candidate("", spec, {**provenance, "synthesis_error": str(exc)})]
        return [candidate(task.prompt, task.spec, task.provenance) for task in written]


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def eval_prompts(store: Store, env: str) -> frozenset[str]:
    """The first user messages of ``env``'s eval tasks, case and spaces folded."""
    rows = store.execute("SELECT prompt FROM tasks WHERE env = $env AND split = 'eval' AND prompt IS NOT NULL",
                         {"env": env}).fetchall()
    return frozenset(_folded(prompt) for (prompt,) in rows)


def hold_out(candidates: list[Candidate], prompts: frozenset[str]) -> list[Candidate]:
    """``candidates``, those whose prompt is an eval task's marked with a ``synthesis_error`` saying so."""
    return [replace(c, provenance={**c.provenance, "synthesis_error": "the task's first user message is an eval "
                                   "task's: eval tasks are held out"})
            if c.prompt and _folded(c.prompt) in prompts and not c.provenance.get("synthesis_error") else c
            for c in candidates]


def world_name(env: str, seed: int, index: int) -> str:
    """How a world is named in prompts and provenance: ``<env> world <seed>/<index>``."""
    return f"{env} world {seed}/{index}"


def _pattern_env(patterns: Sequence[FailurePattern]) -> str:
    for pattern in patterns:
        for task in pattern.tasks.values():
            if task.get("env"):
                return task["env"]
    raise CoevolveError(f"the {NAME} synthesizer needs an environment: pass env='bfcl' (or another) in its options")




def _worlds(env: "Environment", n: int, seed: int) -> list[dict[str, Any]]:
    try:
        return env.exploration_worlds(n, seed)
    except NotImplementedError as exc:
        raise CoevolveError(str(exc)) from exc


# -- bootstrap: D_0 until n are accepted ------------------------------------------------------------------

@dataclass
class BootstrapReport:
    """What one ``bootstrap`` call did. ``accepted_total`` counts the store's D_0 tasks of ``env`` and
    ``round`` (this call's and earlier runs'); the other counts are this call's."""

    env: str
    n: int
    round: int
    seed: int
    max_worlds: int
    explored: int = 0  # worlds explored by this call
    skipped: int = 0  # worlds an earlier run had explored already
    proposed: int = 0  # candidates this call stored
    accepted: int = 0  # of the candidates this call validated
    rejected: dict[str, int] = field(default_factory=dict)  # this call's rejections per failing check
    accepted_total: int = 0

    @property
    def done(self) -> bool:
        """Whether the store holds the ``n`` D_0 tasks asked for."""
        return self.accepted_total >= self.n


Progress = Callable[[str], None]


def bootstrap(
    store_path: str | os.PathLike[str],
    *,
    synthesizer: UnguidedSynthesizer,
    n: int,
    seed: int = 0,
    round: int = 0,
    max_worlds: int | None = None,
    validation: ValidationOptions = ValidationOptions(),
    wait: float = DEFAULT_WAIT_SECONDS,
    progress: Progress | None = None,
) -> BootstrapReport:
    """Explore worlds of the synthesizer's environment with no guidance until ``n`` tasks are accepted into the
    store (see the module doc); returns what was done.

    synthesizer: the explorer and abstraction models, how they are called, and ``env``, the environment
    explored. seed: picks the worlds. round: the candidates' round (D_0 is round 0's). max_worlds: the budget
    of worlds to explore (default 3 * n). validation: what validation checks (``validate_candidates``; the
    shipped embedder when it names none). progress: called with one line of text per explored world and per
    batch.
    """
    env = synthesizer.env
    if not env:
        raise CoevolveError("bootstrap explores one environment: build its UnguidedSynthesizer with env=NAME")
    if n < 1:
        raise CoevolveError(f"n (tasks to accept) must be >= 1, got {n}")
    max_worlds = 3 * n if max_worlds is None else max_worlds
    if max_worlds < 1:
        raise CoevolveError(f"max_worlds must be >= 1, got {max_worlds}")
    if max_worlds > MAX_WORLDS:
        raise CoevolveError(f"max_worlds (--max-worlds; default 3 x n, --n) is {max_worlds:,}, more than "
                            f"{MAX_WORLDS:,}: the worlds are built before the first is explored; ask for fewer tasks "
                            "or worlds")
    logs = Path(synthesizer.client.store_path)
    if logs.resolve() != Path(store_path).resolve():
        raise CoevolveError(f"the synthesizer logs its model calls in {logs}, the bootstrap writes {store_path}: "
                            f"build it with store_path={str(store_path)!r}")
    environment = load_environment(env)
    check_kinds(synthesizer.kinds, environment.draft_kinds())
    if validation.embedder is None:  # one for every batch, so the model loads once
        validation = replace(validation, embedder=Embedder())
    run = _BootstrapRun(store_path, environment, synthesizer, _worlds(environment, max_worlds, seed), validation,
                        BootstrapReport(env=env, n=n, round=round, seed=seed, max_worlds=max_worlds),
                        progress or (lambda line: None), wait)
    return run.run()


#: Worlds in a row that give no written task (the model unreachable, never valid JSON) before bootstrap stops.
MAX_FAILED_IN_A_ROW = 3


class _BootstrapRun:
    """One ``bootstrap`` call: batches of worlds explored, then validated, until n are accepted."""

    def __init__(self, store_path: str | os.PathLike[str], environment: "Environment",
                 synthesizer: UnguidedSynthesizer, worlds: list[dict[str, Any]], validation: ValidationOptions,
                 report: BootstrapReport, say: Progress, wait: float) -> None:
        self.store_path, self.environment, self.synthesizer = store_path, environment, synthesizer
        self.worlds, self.validation, self.report, self.say = worlds, validation, report, say
        self.wait = wait
        self.failed_in_a_row = 0

    def store(self, **options: Any) -> Store:
        return Store(self.store_path, wait=self.wait, **options)

    def run(self) -> BootstrapReport:
        report = self.report
        with self.store() as store:  # a new store is created: bootstrapping may come first
            self.explored = _explored_worlds(store, report.env, report.round)
            self.held_out = eval_prompts(store, report.env)
            pending = _pending(store, report.round)
        if pending:
            self.say(f"validating {pending} pending candidate(s) left by an earlier run")
            self.validate()
        next_world = 0
        while True:
            with self.store(read_only=True) as store:
                report.accepted_total = _accepted(store, report.env, report.round)
            remaining = report.n - report.accepted_total
            if remaining <= 0 or next_world >= len(self.worlds):
                return report
            proposed, next_world = self.explore(next_world, remaining)
            if proposed:
                self.validate()
                with self.store(read_only=True) as store:
                    total = _accepted(store, report.env, report.round)
                self.say(f"accepted {report.accepted} so far in this run; {total} of {report.n} in the store")

    def explore(self, next_world: int, wanted: int) -> tuple[int, int]:
        """Explore worlds from ``next_world`` until ``wanted`` candidates are stored; (candidates, next world)."""
        report, proposed = self.report, 0
        while proposed < wanted and next_world < len(self.worlds):
            index, next_world = next_world, next_world + 1
            world_id = world_name(report.env, report.seed, index)
            if world_id in self.explored:
                report.skipped += 1
                continue
            made = self.synthesizer.for_world(self.environment, self.worlds[index], index=index, seed=report.seed,
                                              round=report.round)
            made = hold_out(made[: wanted - proposed], self.held_out)
            with self.store() as store:
                report.proposed += write_candidates(store, made)
            self.explored.add(world_id)
            report.explored += 1
            proposed += len(made)
            failed = next((c.provenance["synthesis_error"] for c in made if c.provenance.get("synthesis_error")), None)
            self.say(f"{world_id}: {len(made)} candidate(s)" + (f" ({failed})" if failed else ""))
            self.failed_in_a_row = self.failed_in_a_row + 1 if all(c.spec.get("unwritten") for c in made) else 0
            if self.failed_in_a_row >= MAX_FAILED_IN_A_ROW:
                raise CoevolveError(
                    f"{MAX_FAILED_IN_A_ROW} worlds in a row gave no task, the last because of {failed}; check the "
                    "models and their server, then run bootstrap again (it resumes, and retries those worlds)")
        return proposed, next_world

    def validate(self) -> None:
        verdicts = validate_candidates(self.store_path, round=self.report.round, env=self.environment,
                                       options=self.validation, wait=self.wait)
        self.report.accepted += verdicts.accepted
        for reason, count in verdicts.by_reason.items():
            self.report.rejected[reason] = self.report.rejected.get(reason, 0) + count


def _explored_worlds(store: Store, env: str, round: int) -> set[str]:
    """The worlds with a written candidate (a world whose exploration failed is tried again)."""
    rows = store.execute(
        "SELECT DISTINCT json_extract_string(provenance, '$.world_id') FROM candidates "
        "WHERE synthesizer = $synthesizer AND env = $env AND round = $round "
        "AND json_extract(spec, '$.unwritten') IS NULL",
        {"synthesizer": NAME, "env": env, "round": round}).fetchall()
    return {world for (world,) in rows if world}


def _pending(store: Store, round: int) -> int:
    return store.scalar("SELECT count(*) FROM candidates WHERE verdict = 'pending' AND round = $round",
                        {"round": round})


def _accepted(store: Store, env: str, round: int) -> int:
    return store.scalar(
        "SELECT count(*) FROM candidates WHERE synthesizer = $synthesizer AND env = $env AND round = $round "
        "AND verdict = 'accepted'", {"synthesizer": NAME, "env": env, "round": round})
