"""Validation: the checks a candidate task must pass before it joins the task set.

``validate_candidates`` runs, for each pending candidate in the order it was proposed, these checks, and
stops at the first that fails; its name becomes the candidate's ``reason``:

1. ``kind`` (for a task written as one of the environment's kinds: provenance ``kind``): the spec keeps that
   kind's rules (``Environment.kind_problems``; for BFCL the way BFCL scores the category: a miss_func task
   calls no held-back function before its release turn and calls each in it, a miss_param task's turn that
   lacks the value has an empty ground truth and a later user turn gives the value, a long_context task's
   world reads the long-context setting).
2. ``schema``: the environment accepts the spec (``Environment.check_spec``).
3. ``contaminated`` (when the candidate's environment has eval tasks): the candidate is not a near copy of a
   held-out task: the similarity of its words to every eval task of its environment (the Jaccard index of their
   ``task_words``: masked words and keyed literals of every user turn, so other numbers, other names or reordered
   sentences do not hide a copy) must stay below ``contamination_threshold``. A refused candidate's detail names
   the nearest eval task and the similarity (see ``coevolve_engine.synthesis.contamination``).
4. ``ground_truth``: the environment's reference solution, replayed turn by turn in a fresh episode, gets no
   error observation and scores 1 (for BFCL: after every turn, state and responses match what the checker
   compares against). A solution that makes no call at all fails too: it would check nothing.
5. ``novelty``: the highest cosine similarity of the candidate's prompt embedding to the prompts of the
   environment's training tasks in the store and of the candidates accepted before it must stay below
   ``novelty_threshold``. The value is recorded in ``candidates.novelty`` whether or not it passes. Eval tasks
   (split 'eval') are held out and take no part: a candidate is never rejected for resembling one.
6. ``agent_attempt`` (when an agent is given): K rollouts; the success rate is recorded in
   ``candidates.success_rate``. By default it rejects nothing: the ground truth already proves the task
   solvable, and a task the agent fails is what the curriculum wants. With ``max_success_rate`` a candidate
   the agent solves more often is rejected as too easy (a GRPO group that always succeeds has zero
   advantage, so it teaches nothing). Rollouts cut short by faults outside the agent do not count; if all K
   are, validation stops with an error and the remaining candidates stay pending.
7. ``judge`` (when given): ``judge(candidate) -> (passed, detail)``, e.g. an LLM judge.

Every candidate's highest prompt similarity to its environment's eval tasks is measured too, whatever its
verdict, and recorded in ``candidates.eval_similarity`` (NULL when the environment has no eval tasks, or the
candidate no prompt): a measure, never a check (the paper bins synthesis by it).

A check that raises is a failed check with the exception as its detail: the candidate is rejected and the
run goes on. Each verdict is written in one transaction with, for an accepted candidate, its new row in
``tasks`` (source 'synthesized', meta = provenance and checks); every candidate stays in ``candidates``.
The store is held only while cheap checks run: it is closed while an agent plays, so readers get in.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from coevolve_engine.adapters.agents import run_rollouts
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.models.embeddings import Embedder, text_hash
from coevolve_engine.core.errors import CoevolveError, IngestError
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store
from coevolve_engine.synthesis import contamination
from coevolve_engine.synthesis.candidates import (
    Candidate,
    CandidateNotPending,
    pending_candidates,
    record_verdict,
)

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.adapters.agents import Agent
    from coevolve_engine.adapters.environments import Environment

#: reject a candidate whose prompt has a cosine similarity at least this high to a stored training task's
NOVELTY_THRESHOLD = 0.95
#: agent rollouts per candidate, when an agent attempts each
ATTEMPTS = 4
CHECKS = ("synthesis", "kind", "schema", contamination.CHECK, "ground_truth", "novelty", "agent_attempt", "judge")
Judge = Callable[[Candidate], "tuple[bool, str]"]


@dataclass(frozen=True)
class Check:
    """One check's outcome, as stored in ``candidates.checks``."""

    check: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Verdict:
    """What validation decided for one candidate."""

    candidate_id: str
    verdict: str  # 'accepted' or 'rejected'
    reason: str  # the first failing check, or 'accepted'
    checks: tuple[Check, ...]
    novelty: float | None = None
    success_rate: float | None = None
    task_id: str | None = None
    eval_similarity: float | None = None  # highest prompt similarity to the env's eval tasks (not a check)


@dataclass
class ValidationReport:
    """Every verdict of one ``validate_candidates`` run, in order."""

    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return sum(v.verdict == "accepted" for v in self.verdicts)

    @property
    def rejected(self) -> int:
        return sum(v.verdict == "rejected" for v in self.verdicts)

    @property
    def by_reason(self) -> dict[str, int]:
        """Rejections per failing check."""
        return dict(Counter(v.reason for v in self.verdicts if v.verdict == "rejected"))


class AgentUnavailable(CoevolveError):
    """Every rollout of the validating agent was cut short by a fault outside the agent."""


@dataclass(frozen=True)
class ValidationOptions:
    """What validation checks and with what (see the module doc).

    novelty_threshold: a candidate whose prompt similarity to a training task or an earlier accepted one is at
        least this is refused as not ``novelty``.
    contamination_threshold: a candidate whose task_words similarity to an eval task of its environment is at
        least this is refused as ``contaminated``.
    agent, attempts, max_success_rate: the agent that attempts each candidate ``attempts`` times (None: no
        attempt), and the success rate above which a candidate is refused as too easy (None: none is).
    judge: the last check (None: no judge). embedder: the sentence embedder for novelty (default: the shipped
        all-MiniLM-L6-v2, cached in the store). concurrency: the agent's rollouts played at once.
    runnable_only: validation switched off (the paper's "without validation" ablation): only ``synthesis``
        (its synthesizer wrote a task), ``schema`` (the environment accepts its spec) and ``contaminated`` (it
        copies no held-out task: the ablation's held-out figure must not be inflated by one) run, so a candidate
        that is a runnable task is accepted; ground truth, novelty, agent attempt and judge do not run
        (``eval_similarity`` is still measured).
    """

    novelty_threshold: float = NOVELTY_THRESHOLD
    contamination_threshold: float = contamination.DEFAULT_THRESHOLD
    agent: "Agent | None" = None
    attempts: int = ATTEMPTS
    max_success_rate: float | None = None
    judge: Judge | None = None
    embedder: "Embedder | None" = None
    concurrency: int = 4
    runnable_only: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.novelty_threshold <= 1.0:
            raise CoevolveError(f"novelty_threshold must be in (0, 1], got {self.novelty_threshold}")
        if not 0.0 < self.contamination_threshold <= 1.0:
            raise CoevolveError(f"contamination_threshold must be in (0, 1], got {self.contamination_threshold}")
        if self.attempts < 1:
            raise CoevolveError(f"attempts (agent rollouts per candidate) must be >= 1, got {self.attempts}")
        if self.max_success_rate is not None and not 0.0 <= self.max_success_rate <= 1.0:
            raise CoevolveError(f"max_success_rate must be in [0, 1], got {self.max_success_rate}")


def validate_candidates(
    store_path: str | os.PathLike[str] | None,
    *,
    round: int | None = None,
    env: "Environment | None" = None,
    options: ValidationOptions = ValidationOptions(),
    wait: float = DEFAULT_WAIT_SECONDS,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> ValidationReport:
    """Check every pending candidate (of ``round``, or all) and record its verdict; see the module doc.

    env: the environment for candidates of its name (others load theirs from the registry).
    options: what is checked and with what (``ValidationOptions``).
    on_verdict: called after each verdict is stored (progress).
    """
    session = _StoreSession(store_path, wait)
    report = ValidationReport()
    try:
        # read and embed without holding the store for writing (loading the model and embedding the prompts take
        # seconds): `query` gets through meanwhile; the new vectors are cached in a short write afterwards
        with Store(store_path, read_only=True, create=False, wait=wait) as reading:
            candidates = pending_candidates(reading, round)
            if not candidates:
                return report
            novelty = _Novelty(reading, candidates, options.embedder)
            held_out = contamination.HeldOutIndex(reading, candidates)
        if novelty.fresh:
            novelty.cache(session.store)
        checker = _Checker(env, novelty, options, session, held_out)
        for candidate in candidates:
            session.close()  # the checks need no store: each verdict holds it only while it is written
            verdict = checker.verdict(candidate)
            verdict = _record(session.store, candidate, verdict)
            if verdict is None:  # another validator decided it meanwhile
                continue
            if verdict.verdict == "accepted":
                novelty.accept(candidate)
            report.verdicts.append(verdict)
            if on_verdict is not None:
                on_verdict(verdict)
    finally:
        session.close()
    return report


class _StoreSession:
    """The store, opened on demand and closed while an agent plays."""

    def __init__(self, path: str | os.PathLike[str] | None, wait: float) -> None:
        self.path, self.wait = path, wait
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.path, create=False, wait=self.wait)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class _Novelty:
    """Prompt embeddings of the store's training tasks (per environment) and of the candidates accepted so far,
    against which novelty is measured; and, apart, those of the eval tasks, which only ``eval_similarity``
    looks at."""

    def __init__(self, store: Store, candidates: list[Candidate], embedder: "Embedder | None") -> None:
        if embedder is None:
            embedder = Embedder()
        envs = sorted({c.env for c in candidates})
        rows = store.execute(
            "SELECT env, prompt, split = 'eval' AS held_out FROM tasks "
            "WHERE list_contains($envs, env) AND prompt IS NOT NULL AND prompt <> '' ORDER BY task_id",
            {"envs": envs}).fetchall()
        texts = [prompt for _, prompt, _ in rows] + [c.prompt for c in candidates]
        # the store's cached vectors, and the model's for the rest (``cache`` stores those)
        self._embedder, known = embedder, embedder.cached(store, texts) if texts else {}
        self.fresh = embedder.compute([text for text in texts if text_hash(text) not in known])
        known.update(self.fresh)
        vectors = np.stack([known[text_hash(text)] for text in texts]) if texts else np.zeros((0, 0), np.float32)
        self._known: dict[str, list[np.ndarray]] = {name: [] for name in envs}
        self._held_out: dict[str, list[np.ndarray]] = {name: [] for name in envs}
        for (env, _, held_out), vector in zip(rows, vectors):
            (self._held_out if held_out else self._known)[env].append(vector)
        self._vectors = {c.candidate_id: vectors[len(rows) + i] for i, c in enumerate(candidates)}

    def cache(self, store: Store) -> None:
        """Keep the vectors the model computed in ``store``'s cache of embeddings."""
        self._embedder.save(store, self.fresh)

    def similarity(self, candidate: Candidate) -> float:
        """Highest cosine similarity of the candidate's prompt to the known (training and accepted) prompts of
        its environment; 0 when there is none."""
        return _highest(self._known.get(candidate.env), self._vectors[candidate.candidate_id]) or 0.0

    def eval_similarity(self, candidate: Candidate) -> float | None:
        """Highest cosine similarity of the candidate's prompt to its environment's eval task prompts; None when
        the environment has no eval task or the candidate no prompt."""
        if not candidate.prompt:
            return None
        value = _highest(self._held_out.get(candidate.env), self._vectors[candidate.candidate_id])
        return None if value is None else round(value, 6)

    def accept(self, candidate: Candidate) -> None:
        self._known.setdefault(candidate.env, []).append(self._vectors[candidate.candidate_id])


def _highest(known: list[np.ndarray] | None, vector: np.ndarray) -> float | None:
    """The largest dot product of ``vector`` with the (unit) vectors ``known``; None when there is none.

    Each dot product depends on its two vectors alone, to the last bit: the products of float32 components are
    exact in float64 and each row is summed on its own. (A float32 matrix-vector product gives a row other bits
    at another place among other rows: a validation resumed after a kill knows its earlier accepted tasks in
    task order, not in the order they were accepted, and must measure the same novelty.)"""
    if not known:
        return None
    rows = np.stack(known).astype(np.float64)
    return float(np.max((rows * np.asarray(vector, dtype=np.float64)).sum(axis=1)))


class _Checker:
    """Runs the checks of one candidate."""

    def __init__(self, env: "Environment | None", novelty: _Novelty, options: ValidationOptions,
                 session: _StoreSession, held_out: contamination.HeldOutIndex | None = None) -> None:
        self.environments: dict[str, Environment] = {env.name: env} if env is not None else {}
        self.novelty, self.options, self.session, self.held_out = novelty, options, session, held_out

    def environment(self, name: str) -> "Environment":
        if name not in self.environments:
            self.environments[name] = load_environment(name)
        return self.environments[name]

    def verdict(self, candidate: Candidate) -> Verdict:
        checks: list[Check] = []
        measured: dict[str, float | None] = {"novelty": None, "success_rate": None}
        steps: list[tuple[str, Callable[[], Check]]] = [
            ("synthesis", lambda: self._synthesis(candidate)),
        ]
        if "kind" in candidate.provenance:
            steps.append(("kind", lambda: self._kind(candidate)))
        steps.append(("schema", lambda: self._schema(candidate)))
        if self.held_out is not None and self.held_out.has_held_out(candidate.env):
            steps.append((contamination.CHECK, lambda: self._contaminated(candidate)))
        if not self.options.runnable_only:
            steps.append(("ground_truth", lambda: self._ground_truth(candidate)))
            steps.append(("novelty", lambda: self._novelty(candidate, measured)))
            if self.options.agent is not None:
                steps.append(("agent_attempt", lambda: self._agent_attempt(candidate, measured)))
            if self.options.judge is not None:
                steps.append(("judge", lambda: self._judge(candidate)))
        eval_similarity = self.novelty.eval_similarity(candidate)  # measured whatever the verdict
        for name, run in steps:
            try:
                check = run()
            except AgentUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - a check that breaks rejects its candidate, not the run
                check = Check(name, False, f"the check raised {type(exc).__name__}: {exc}")
            checks.append(check)
            if not check.passed:
                return Verdict(candidate.candidate_id, "rejected", name, tuple(checks), **measured,
                               eval_similarity=eval_similarity)
        return Verdict(candidate.candidate_id, "accepted", "accepted", tuple(checks), **measured,
                       task_id=candidate.task_id, eval_similarity=eval_similarity)

    def _synthesis(self, candidate: Candidate) -> Check:
        """A synthesizer that could not write a task (an LLM answer that was not the schema, an exploration
        cut short) still proposes a candidate carrying why, so the failure is kept with its reason."""
        error = candidate.provenance.get("synthesis_error")
        if error:
            return Check("synthesis", False, str(error))
        return Check("synthesis", True, f"written by {candidate.synthesizer}")

    def _kind(self, candidate: Candidate) -> Check:
        kind = candidate.provenance["kind"]
        problems = self.environment(candidate.env).kind_problems(candidate.spec)
        if problems:
            return Check("kind", False, f"{kind}: " + "; ".join(problems))
        return Check("kind", True, f"keeps the rules of a {kind} task")

    def _schema(self, candidate: Candidate) -> Check:
        if not isinstance(candidate.spec, dict):
            return Check("schema", False, f"spec must be a JSON object, got {type(candidate.spec).__name__}")
        problems = self.environment(candidate.env).check_spec(candidate.spec)
        if problems:
            return Check("schema", False, "; ".join(problems))
        return Check("schema", True, f"a well-formed {candidate.env} spec")

    def _contaminated(self, candidate: Candidate) -> Check:
        task_id, value = self.held_out.nearest(candidate)  # type: ignore[union-attr, misc]
        passed = value < self.options.contamination_threshold
        relation = "<" if passed else ">="
        return Check(contamination.CHECK, passed,
                     f"nearest held-out task {task_id}: similarity {value:.4f} {relation} "
                     f"{self.options.contamination_threshold:g} (task words: masked words and keyed literals of every "
                     "user turn)")

    def _ground_truth(self, candidate: Candidate) -> Check:
        environment = self.environment(candidate.env)
        solution = environment.reference_solution(candidate.spec)
        if solution is None:
            return Check("ground_truth", False, f"{candidate.env} gives no reference solution for this spec")
        if not any(solution):
            return Check("ground_truth", False, "the ground truth makes no call, so no turn would be checked")
        errors, turns, score = _replay(environment, candidate.task_id, candidate.spec, solution)
        problems = []
        if turns != len(solution):
            problems.append(f"the ground truth has {len(solution)} turns, the episode {turns}")
        if errors:
            problems.append(f"{len(errors)} call(s) failed: " + "; ".join(errors[:3]))
        if not score.success or score.reward < 1.0:
            problems.append(f"scored {score.reward:g}: {score.reason}")
        if problems:
            return Check("ground_truth", False, "; ".join(problems))
        calls = sum(len(turn) for turn in solution)
        return Check("ground_truth", True, f"{calls} calls over {turns} turns, no error, score 1: {score.reason}")

    def _novelty(self, candidate: Candidate, measured: dict[str, float | None]) -> Check:
        similarity = self.novelty.similarity(candidate)
        measured["novelty"] = round(similarity, 6)
        passed = similarity < self.options.novelty_threshold
        relation = "<" if passed else ">="
        threshold = self.options.novelty_threshold
        return Check("novelty", passed, f"highest prompt similarity {similarity:.4f} {relation} {threshold:g} "
                     "(training tasks and earlier accepted candidates; eval tasks are held out)")

    def _agent_attempt(self, candidate: Candidate, measured: dict[str, float | None]) -> Check:
        self.session.close()  # the agent may take minutes: let readers in meanwhile
        rollouts = run_rollouts(self.environment(candidate.env),
                                [{"task_id": candidate.task_id, "spec": candidate.spec}], self.options.agent,
                                group_size=self.options.attempts,
                                concurrency=min(self.options.attempts, self.options.concurrency))
        played = [r for r in rollouts if r.error is None]
        if not played:
            raise AgentUnavailable(
                f"every one of the {len(rollouts)} rollouts of candidate {candidate.candidate_id} was cut short "
                f"by a fault ({rollouts[0].error if rollouts else 'no rollout'}); the remaining candidates stay "
                "pending: fix the agent and run validate again")
        successes = sum(r.success for r in played)
        rate = successes / len(played)
        measured["success_rate"] = rate
        detail = f"{successes}/{len(played)} rollouts succeeded" + (
            f" ({len(rollouts) - len(played)} cut short by faults, not counted)" if len(played) < len(rollouts) else "")
        most = self.options.max_success_rate
        if most is not None and rate > most:
            return Check("agent_attempt", False, f"{detail}: {rate:.2f} > max {most:g}, too easy")
        return Check("agent_attempt", True, detail)

    def _judge(self, candidate: Candidate) -> Check:
        outcome = self.options.judge(candidate)  # type: ignore[misc]
        if not (isinstance(outcome, tuple) and len(outcome) == 2):
            raise TypeError(f"a judge must return (passed, detail), got {outcome!r:.200}")
        passed, detail = outcome
        return Check("judge", bool(passed), str(detail))


def _replay(environment: "Environment", task_id: str, spec: dict[str, Any],
            solution: list[list[Any]]) -> tuple[list[str], int, Any]:
    """Play ``solution`` in a fresh episode: (error observations, turns played, score)."""
    episode = environment.start(task_id, spec)
    errors: list[str] = []
    turns = 0
    try:
        while episode.next_turn() is not None:
            for call in solution[turns] if turns < len(solution) else []:
                observation = episode.execute(call)
                if observation.error:
                    errors.append(f"turn {turns}: {call.name}: {observation.error}")
            episode.end_turn(None)
            turns += 1
        return errors, turns, episode.score()
    finally:
        episode.close()


def _record(store: Store, candidate: Candidate, verdict: Verdict) -> Verdict | None:
    """Write the verdict and, when accepted, the new task, in one transaction. A task the store refuses turns
    the verdict into a rejection (reason 'task_insert'), written on its own. None when the candidate was no
    longer pending."""
    checks = [asdict(check) for check in verdict.checks]
    try:
        with store.transaction() as con:
            record_verdict(con, candidate.candidate_id, verdict=verdict.verdict, reason=verdict.reason,
                           checks=checks, novelty=verdict.novelty, success_rate=verdict.success_rate,
                           task_id=verdict.task_id, eval_similarity=verdict.eval_similarity)
            if verdict.verdict == "accepted":
                _add_task(store, candidate, checks, verdict.eval_similarity)
        return verdict
    except CandidateNotPending:
        return None
    except IngestError as exc:
        failed = Check("task_insert", False, str(exc))
        verdict = Verdict(candidate.candidate_id, "rejected", "task_insert", verdict.checks + (failed,),
                          verdict.novelty, verdict.success_rate, eval_similarity=verdict.eval_similarity)
        with store.transaction() as con:
            record_verdict(con, candidate.candidate_id, verdict="rejected", reason="task_insert",
                           checks=[asdict(check) for check in verdict.checks], novelty=verdict.novelty,
                           success_rate=verdict.success_rate, eval_similarity=verdict.eval_similarity)
        return verdict


def _add_task(store: Store, candidate: Candidate, checks: list[dict[str, Any]],
              eval_similarity: float | None) -> None:
    """The accepted candidate as a row of ``tasks``, through the same checks as any ingested task."""
    meta = {**candidate.provenance, "candidate_id": candidate.candidate_id, "round": candidate.round,
            "pattern_id": candidate.pattern_id, "signal": candidate.signal, "synthesizer": candidate.synthesizer,
            "checks": checks, "eval_similarity": eval_similarity}
    record = {"task_id": candidate.task_id, "env": candidate.env, "prompt": candidate.prompt,
              "spec": candidate.spec, "source": "synthesized", "meta": meta}
    store.add_records("tasks", [record], label=f"candidate {candidate.candidate_id}")  # joins the verdict's transaction
