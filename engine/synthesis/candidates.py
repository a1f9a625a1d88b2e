"""Candidate tasks: what a synthesizer proposes for a round's failure patterns, and how it is stored.

A *synthesizer* reads the failure patterns of a round (rows of ``failure_patterns`` with their member
trajectories and the tasks those trajectories attempted) and proposes ``Candidate`` tasks. Candidates are
written to the ``candidates`` table as ``pending``; validation (``coevolve_engine.synthesis.validation``)
later gives each one its verdict, and an accepted candidate becomes a row of ``tasks``. Every candidate stays
in the table whatever its verdict.

Synthesizers form a registry like environments and agents; third parties add theirs through the
``coevolve_engine.synthesizers`` entry-point group::

    [project.entry-points."coevolve_engine.synthesizers"]
    mysynth = "mypackage.synth:MySynthesizer"

    synthesizer = load_synthesizer("offline:bfcl")
    candidates = synthesizer.propose(store, load_patterns(store, round=1), max_candidates=20, seed=0)
    write_candidates(store, candidates)
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Sequence

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.candidates import (  # the contract synthesizers build on
    Candidate,
    FailurePattern,
    PatternMember,
    Synthesizer,
    declares,
    quotas,
)
from coevolve_engine.core.ids import canonical_json, spec_hash, spec_json, synthesized_task_id
from coevolve_engine.core.registry import PluginContext, Registry

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from coevolve_engine.core.store import Store

VERDICTS = ("pending", "accepted", "rejected")

SYNTHESIZERS = Registry(
    "synthesizer", entry_point_group="coevolve_engine.synthesizers",
    unknown_hint=("A synthesizer implements coevolve_engine.core.candidates.Synthesizer and comes from a package "
                  "that declares it in the entry-point group coevolve_engine.synthesizers, by convention as "
                  "offline:ENV beside its environment; see docs/environments.md"))
SYNTHESIZERS.register(
    "offline:bfcl",
    "coevolve_engine.adapters.environments.bfcl.synthesizer:OfflineBFCLSynthesizer",
    install_hint="pip install 'coevolve-engine[bfcl]' && pip install --no-deps bfcl-eval==2026.3.23",
    description="new BFCL multi-turn tasks by recombining and perturbing the pattern's tasks; no model needed",
)
SYNTHESIZERS.register(
    "offline:calc",
    "coevolve_engine.adapters.environments.calc.synthesizer:OfflineCalcSynthesizer",
    install_hint="pip install coevolve-engine",
    description="new calc tasks one or two skill moves from the pattern's tasks (by its signal); no model needed",
)
SYNTHESIZERS.register(
    "llm",
    "coevolve_engine.synthesis.llm_synthesizer:LLMSynthesizer",
    install_hint="pip install 'coevolve-engine[agents]'",
    requires=("litellm",),
    description="an explorer model acts in the environment around each pattern; a model abstracts tasks from it",
)
SYNTHESIZERS.register(
    "llm-unguided",
    "coevolve_engine.synthesis.bootstrap:UnguidedSynthesizer",
    install_hint="pip install 'coevolve-engine[agents]'",
    requires=("litellm",),
    description="an explorer model acts freely in generated worlds of the environment, no pattern or signal "
                "(D_0 bootstrapping; the 'random exploration' ablation)",
)


def _json_value(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else text


def latest_pattern_round(store: "Store") -> int | None:
    """The latest round that has failure patterns, or None."""
    return store.scalar("SELECT max(round) FROM failure_patterns")


def load_patterns(store: "Store", round: int | None = None) -> list[FailurePattern]:
    """The failure patterns of ``round`` (default: the latest round that has any), largest first."""
    if round is None:
        round = latest_pattern_round(store)
        if round is None:
            return []
    rows = store.execute(
        "SELECT pattern_id, round, step, size, dominant_signal, signal_counts, representative_trajectory, summary "
        "FROM failure_patterns WHERE round = $round ORDER BY size DESC, pattern_id",
        {"round": round},
    ).fetchall()
    members = store.execute(
        "SELECT m.pattern_id, m.trajectory_id, t.task_id, m.signals, m.distance "
        "FROM pattern_members AS m JOIN failure_patterns AS p USING (pattern_id) "
        "LEFT JOIN (SELECT DISTINCT trajectory_id, task_id FROM trajectories) AS t USING (trajectory_id) "
        "WHERE p.round = $round ORDER BY m.pattern_id, m.distance NULLS LAST, m.trajectory_id",
        {"round": round},
    ).fetchall()
    by_pattern: dict[str, list[PatternMember]] = {}
    for pattern_id, trajectory_id, task_id, signals, distance in members:
        by_pattern.setdefault(pattern_id, []).append(
            PatternMember(trajectory_id, task_id, tuple(signals or ()), distance))
    task_ids = sorted({m.task_id for ms in by_pattern.values() for m in ms if m.task_id is not None})
    tasks = {
        task_id: {"task_id": task_id, "env": env, "prompt": prompt, "spec": _json_value(spec), "source": source,
                  "meta": _json_value(meta)}
        for task_id, env, prompt, spec, source, meta in store.execute(
            "SELECT task_id, env, prompt, spec, source, meta FROM tasks WHERE list_contains($ids, task_id) "
            "ORDER BY task_id", {"ids": task_ids}).fetchall()
    }
    patterns = []
    for pattern_id, round_, step, size, signal, counts, representative, summary in rows:
        own = tuple(by_pattern.get(pattern_id, ()))
        patterns.append(FailurePattern(
            pattern_id, round_, step, size, signal, _json_value(counts) or {}, representative,
            _json_value(summary), own,
            {m.task_id: tasks[m.task_id] for m in own if m.task_id in tasks},
        ))
    return patterns


def load_synthesizer(name: str, **options: Any) -> Synthesizer:
    """An instance of the synthesizer registered as ``name``, built with ``options``."""
    return SYNTHESIZERS.build(name, options)


# -- the candidates table -----------------------------------------------------------------------------------

def write_candidates(store: "Store", candidates: Iterable[Candidate]) -> int:
    """Store ``candidates`` as pending, in one transaction; returns how many were new.

    A candidate already in the table (same id) is left as it is, verdict included. ``created_at`` grows by a
    microsecond per candidate, so ordering by it gives the order they were proposed in.
    """
    rows = list(candidates)
    with store.transaction() as con:
        before = con.execute("SELECT count(*) FROM candidates").fetchall()[0][0]
        for index, candidate in enumerate(rows):
            con.execute(
                "INSERT INTO candidates (candidate_id, round, pattern_id, signal, env, synthesizer, prompt, spec, "
                "verdict, provenance, created_at) VALUES ($id, $round, $pattern, $signal, $env, $synthesizer, "
                "$prompt, CAST($spec AS JSON), 'pending', CAST($provenance AS JSON), "
                "CAST(current_timestamp AS TIMESTAMP) + to_microseconds($index)) "
                "ON CONFLICT (candidate_id) DO NOTHING",
                {"id": candidate.candidate_id, "round": candidate.round, "pattern": candidate.pattern_id,
                 "signal": candidate.signal, "env": candidate.env, "synthesizer": candidate.synthesizer,
                 "prompt": candidate.prompt, "spec": spec_json(candidate.spec),
                 "provenance": canonical_json(candidate.provenance), "index": index},
            )
        return con.execute("SELECT count(*) FROM candidates").fetchall()[0][0] - before


def pending_candidates(store: "Store", round: int | None = None) -> list[Candidate]:
    """Pending candidates (of ``round``, or all), in the order they were proposed."""
    rows = store.execute(
        "SELECT candidate_id, round, pattern_id, signal, env, synthesizer, prompt, spec, provenance "
        "FROM candidates WHERE verdict = 'pending' AND ($round IS NULL OR round = $round) "
        "ORDER BY created_at, candidate_id",
        {"round": round},
    ).fetchall()
    return [Candidate(cid, rnd, pattern, signal, env, synthesizer, prompt or "", _json_value(spec),
                      _json_value(provenance) or {})
            for cid, rnd, pattern, signal, env, synthesizer, prompt, spec, provenance in rows]


def record_verdict(con: "duckdb.DuckDBPyConnection", candidate_id: str, *, verdict: str, reason: str,
                   checks: Sequence[Mapping[str, Any]], novelty: float | None = None,
                   success_rate: float | None = None, task_id: str | None = None,
                   eval_similarity: float | None = None) -> None:
    """Give a pending candidate its verdict (with the checks' figures); call inside the transaction that also adds
    its task. This module is the only writer of ``candidates``.

    Raises CoevolveError when the candidate is not pending (another validator got there first), so that
    transaction rolls back.
    """
    if verdict not in VERDICTS[1:]:
        raise ValueError(f"verdict must be 'accepted' or 'rejected', got {verdict!r}")
    updated = con.execute(
        "UPDATE candidates SET verdict = $verdict, reason = $reason, checks = CAST($checks AS JSON), "
        "novelty = $novelty, success_rate = $success_rate, task_id = $task_id, eval_similarity = $eval_similarity "
        "WHERE candidate_id = $id AND verdict = 'pending' RETURNING candidate_id",
        {"verdict": verdict, "reason": reason, "checks": canonical_json(list(checks)), "novelty": novelty,
         "success_rate": success_rate, "task_id": task_id, "eval_similarity": eval_similarity, "id": candidate_id},
    ).fetchall()
    if not updated:
        raise CandidateNotPending(f"candidate {candidate_id!r} is not pending (already validated, or unknown)")


class CandidateNotPending(CoevolveError):
    """A verdict for a candidate that already has one (another validator got there first)."""


# -- one synthesis phase ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SynthesisReport:
    """What one ``synthesize`` call proposed and stored."""

    round: int
    synthesizer: str
    patterns: int
    proposed: int
    added: int
    by_signal: dict[str, int]


#: the most candidates one synthesize call proposes (a synthesizer may plan all of them, or a world for each,
#: before proposing the first)
MAX_CANDIDATES = 10_000


def offline_synthesizer(env: str) -> str:
    """The name of environment ``env``'s own offline synthesizer, by the convention a built-in or a plugin
    registers it under beside its environment: ``offline:ENV``."""
    return f"offline:{env}"


def default_synthesizer(store: "Store", round: int | None = None) -> str:
    """The offline synthesizer of the environment of the tasks in ``round``'s failure patterns (default: the
    latest round with patterns; the most common environment there): ``offline:ENV``, as a built-in or a plugin
    registers it beside its environment."""
    if round is None:
        round = latest_pattern_round(store)
    env = store.scalar(
        "SELECT k.env FROM pattern_members AS m JOIN failure_patterns AS p USING (pattern_id) "
        "JOIN trajectories AS t USING (trajectory_id) JOIN tasks AS k USING (task_id) "
        "WHERE p.round = $round AND k.env IS NOT NULL GROUP BY k.env ORDER BY count(*) DESC, k.env LIMIT 1",
        {"round": round})
    if env is None:
        env = store.scalar("SELECT env FROM tasks WHERE env IS NOT NULL GROUP BY env "
                           "ORDER BY count(*) DESC, env LIMIT 1")
    if env is None:
        raise CoevolveError("no task in the store names its environment (tasks.env), so there is no default "
                            "synthesizer: pass --synthesizer (offline:bfcl, offline:calc, llm, ...)")
    name = offline_synthesizer(env)
    if name not in SYNTHESIZERS.entries:
        raise CoevolveError(
            f"the tasks are of environment {env!r}, which registers no offline synthesizer ({name} in the "
            f"entry-point group coevolve_engine.synthesizers); pass --synthesizer llm --model M to write tasks "
            f"with a model, or see docs/environments.md for adding one. Known: {', '.join(SYNTHESIZERS.names())}")
    return name


@dataclass(frozen=True)
class Proposal:
    """What a synthesizer proposed for one round, not stored yet (``synthesize`` stores it)."""

    round: int
    synthesizer: str
    patterns: int
    candidates: list[Candidate]

    def report(self, added: int) -> SynthesisReport:
        by_signal: dict[str, int] = {}
        for candidate in self.candidates:
            by_signal[candidate.signal or "-"] = by_signal.get(candidate.signal or "-", 0) + 1
        return SynthesisReport(self.round, self.synthesizer, self.patterns, len(self.candidates), added, by_signal)


def synthesize(store: "Store", *, round: int | None = None, synthesizer: str | None = None,
               max_candidates: int = 20, seed: int = 0, options: Mapping[str, Any] | None = None,
               context: PluginContext | None = None) -> SynthesisReport:
    """Propose candidates for the failure patterns of ``round`` (default: the latest) and store them as pending.

    A synthesizer that does not need patterns (``needs_patterns = False``, e.g. ``llm-unguided``) runs without
    them: its candidates belong to ``round`` (default: the latest round with patterns, else 0).

    Proposing is deterministic in ``seed``, and a candidate already stored is not added again, so running the
    same call twice adds nothing the second time. The synthesizer is built from ``options`` and ``context``
    (``SYNTHESIZERS.build``); without one, it is the offline synthesizer of the tasks' own environment
    (``default_synthesizer``). ``propose_candidates`` followed by ``write_candidates`` is the same in two steps.
    """
    proposal = propose_candidates(store, round=round, synthesizer=synthesizer, max_candidates=max_candidates,
                                  seed=seed, options=options, context=context)
    return proposal.report(write_candidates(store, proposal.candidates))


def propose_candidates(store: "Store", *, round: int | None = None, synthesizer: str | None = None,
                       max_candidates: int = 20, seed: int = 0, options: Mapping[str, Any] | None = None,
                       context: PluginContext | None = None) -> Proposal:
    """What ``synthesize`` would store, without storing it (a run writes it with its phase's 'finished' mark)."""
    if not 1 <= max_candidates <= MAX_CANDIDATES:
        raise CoevolveError(f"max_candidates must be in [1, {MAX_CANDIDATES:,}], got {max_candidates:,}")
    synthesizer = synthesizer or default_synthesizer(store, round)
    guided = declares(SYNTHESIZERS.load(synthesizer), "needs_patterns")
    if round is None:
        round = latest_pattern_round(store)
        if round is None and guided:
            raise CoevolveError("the store has no failure patterns yet: cluster the flagged trajectories first")
        round = 0 if round is None else round
    patterns = load_patterns(store, round)
    if not patterns and guided:
        rounds = [r for (r,) in store.execute("SELECT DISTINCT round FROM failure_patterns ORDER BY round").fetchall()]
        raise CoevolveError(f"no failure patterns in round {round}; rounds with patterns: "
                            f"{', '.join(map(str, rounds)) or '(none)'}")
    proposer = SYNTHESIZERS.build(synthesizer, options, context)
    if guided:
        candidates = proposer.propose(store, patterns, max_candidates=max_candidates, seed=seed)
    else:  # unguided: patterns are ignored, the round names its candidates
        candidates = proposer.propose(store, patterns, max_candidates=max_candidates, seed=seed, round=round)
    return Proposal(round, synthesizer, len(patterns), list(candidates))
