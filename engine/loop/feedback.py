"""The feedback phases: signals, patterns, synthesize, validate (a round has them unless
``synthesis.synthesizer = "none"``).

Each phase is a function ``(run, round, label) -> outputs``; ``patterns`` also has a ``commit`` step that the
ledger runs inside the transaction that marks it finished. Each has a ``describe_*`` function: one line on its
stored outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from coevolve_engine.adapters.agents import load_agent
from coevolve_engine.models.llm import LLMClient
from coevolve_engine.loop.config import ConfigError
from coevolve_engine.loop.context import RunContext, phase_label
from coevolve_engine.loop.ledger import round_steps
from coevolve_engine.loop.summary import ROUND_SIGNALS_SQL, pct, round_totals
from coevolve_engine.patterns import find_patterns
from coevolve_engine.patterns.find import PatternSelection, prepare_patterns
from coevolve_engine.patterns.select import select_flagged
from coevolve_engine.display.progress import advance
from coevolve_engine.core.store import Store
from coevolve_engine.signals.snapshot import signal_snapshot
from coevolve_engine.core.candidates import declares
from coevolve_engine.synthesis.candidates import SYNTHESIZERS, propose_candidates, write_candidates
from coevolve_engine.synthesis.judge import LLMJudge
from coevolve_engine.synthesis.summaries import summarise_patterns
from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates


def signals(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """What was flagged over the round's steps (forgetting, boundary, rare), counted."""
    first, last = round_steps(run, round_)
    params = run.config.signal_params()
    with run.store(read_only=True) as store, signal_snapshot(store, params):
        totals = round_totals(store, run.config, first, last)
        by_signal = store.execute(ROUND_SIGNALS_SQL, {**params.bind(), "first": first, "last": last}).fetchall()
    outputs = {"first_step": first, "last_step": last, **totals,
               "by_signal": {signal: {"trajectories": n, "tasks": tasks} for signal, n, tasks in by_signal}}
    if run.config.signals_used is not None:
        outputs["used"] = list(run.config.signals_used)  # all are counted; only these make patterns
    return outputs


def describe_signals(o: dict[str, Any]) -> str:
    flagged = ", ".join(f"{s} {v['trajectories']}" for s, v in o["by_signal"].items()) or "nothing"
    used = f" (patterns from {', '.join(o['used'])} only)" if o.get("used") else ""
    return f"{o['rollouts']} rollouts, success {pct(o['success_rate'])}; flagged: {flagged}{used}"


def embed_flagged(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """The patterns phase's first step: embed and cluster the round's flagged trajectories before the store is
    held for writing (the embedding model is loaded once per run); the commit step checks that the selection is
    still the same and writes the clusters."""
    # the round itself is checked by the commit step, which keeps patterns another command stored for it
    selection = dataclasses.replace(pattern_selection(run, round_, *round_steps(run, round_)), round=None)
    run.embedder, run.prepared = prepare_patterns(run.db, selection, embedder=run.embedder, wait=run.wait,
                                                  progress=lambda line: run.detail(label, line))
    return {}


def pattern_selection(run: RunContext, round_: int, first: int, last: int) -> PatternSelection:
    """What round ``round_``'s patterns are found from: what the run's signals flagged over the round's steps
    ``first`` .. ``last``, clustered with the run's settings and seed + round (the work and the commit of the
    patterns phase use the same)."""
    c = run.config
    return PatternSelection(round=round_, replace=True, step=last, first_step=first, params=c.signal_params(),
                            max_trajectories=c.patterns.max_trajectories, max_k=c.patterns.max_k,
                            seed=c.seed + round_, signals=c.signals_used)


def patterns(run: RunContext, round_: int, store: Store, outputs: dict[str, Any]) -> dict[str, Any]:
    """(commit) The round's flagged trajectories clustered into failure patterns, or the round's patterns stored
    by hand kept."""
    c, used = run.config, run.config.signals_used
    first, last = round_steps(run, round_, store)
    # this step writes with the phase's 'finished' mark, so an interrupted attempt left no pattern: patterns
    # the round already has were stored by another command (`coevolve-engine patterns`), and are kept as they
    # are, as the weights phase keeps a weight set stored by hand
    sizes = [size for (size,) in store.execute("SELECT size FROM failure_patterns WHERE round = $r ORDER BY cluster",
                                               {"r": round_}).fetchall()]
    if sizes:
        return {"kept": True, "patterns": len(sizes), "sizes": sizes}
    params = c.signal_params()
    flagged = select_flagged(store, last, params, limit=1, first_step=first, signals=used).flagged
    outputs = {"flagged": flagged, "patterns": 0}
    if used is not None:
        outputs["signals"] = list(used)  # flagged counts only trajectories carrying one of these
    if flagged:
        label = phase_label(round_, "patterns")
        report = find_patterns(store, pattern_selection(run, round_, first, last), embedder=run.embedder,
                               prepared=run.prepared, progress=lambda line: run.detail(label, line))
        outputs.update(patterns=report.k, clustered=report.clustered, silhouette=report.silhouette,
                       sizes=report.sizes, dominant={p.pattern_id: p.dominant_signal for p in report.patterns})
    return outputs


def describe_patterns(o: dict[str, Any]) -> str:
    if o.get("kept"):
        return f"kept the {o['patterns']} stored patterns of the round (sizes {o['sizes']})"
    by = f" by {', '.join(o['signals'])}" if o.get("signals") else ""
    if not o["patterns"]:
        return f"no trajectories flagged{by}, no patterns"
    return f"{o['flagged']} flagged{by} -> {o['patterns']} patterns (sizes {o['sizes']})"


def synthesize(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """(work) Candidate tasks proposed around each failure pattern (or by unguided exploration); the commit,
    ``store_candidates``, stores them as pending."""
    c = run.config.synthesis
    run.proposal = None
    synthesizer = SYNTHESIZERS.load(c.synthesizer)
    guided = declares(synthesizer, "needs_patterns")
    with run.store(read_only=True) as store:
        patterns = store.scalar("SELECT count(*) FROM failure_patterns WHERE round = $r", {"r": round_})
    if not patterns and guided:
        return {"patterns": 0, "proposed": 0, "added": 0, "skipped": "no failure patterns this round"}
    if declares(synthesizer, "reads_summaries") and run.config.models.summary.model:
        _summarise(run, round_, label)
    # an unguided synthesizer explores worlds drawn from its seed; SEED itself went to the bootstrap (D_0)
    seed = run.config.seed + round_ + (0 if guided else 1)
    what = f"for {patterns} patterns" if guided else "by unguided exploration (patterns are not used)"
    run.detail(label, f"{c.synthesizer}: up to {c.max_candidates} candidates {what}")
    with run.store() as store:
        run.proposal = propose_candidates(store, round=round_, synthesizer=c.synthesizer,
                                          max_candidates=c.max_candidates, seed=seed,
                                          options=synthesizer_options(run.config), context=run.plugins())
    return {"patterns": patterns}


def store_candidates(run: RunContext, round_: int, store: Store, outputs: dict[str, Any]) -> dict[str, Any]:
    """(commit) The proposed candidates stored as pending, with the phase's 'finished' mark: a run killed between
    proposing and finishing left none, so the resumed phase adds and reports what the uninterrupted one did."""
    proposal, run.proposal = run.proposal, None
    if proposal is None:  # skipped: no patterns this round
        return outputs
    report = proposal.report(write_candidates(store, proposal.candidates))
    pending = store.scalar("SELECT count(*) FROM candidates WHERE round = $r", {"r": round_})
    return {**outputs, "proposed": report.proposed, "added": report.added, "candidates": pending,
            "by_signal": dict(report.by_signal)}


def describe_synthesize(o: dict[str, Any]) -> str:
    if o.get("skipped"):
        return o["skipped"]
    return f"{o['proposed']} candidates proposed for {o['patterns']} patterns, {o['added']} new"


def _llm_client(run: RunContext, role: str) -> LLMClient:
    """An LLM client for the [models] role, logging its calls in the run's store."""
    return LLMClient(run.db, run.config.models.connect(role), wait=run.wait)


def _summarise(run: RunContext, round_: int, label: str) -> None:
    client = _llm_client(run, "summary")
    report = summarise_patterns(run.db, round=round_, client=client, wait=run.wait)
    run.detail(label, f"summarised {len(report.outcomes)} patterns with {client.model}")


def synthesizer_options(config) -> dict[str, Any]:
    """``synthesis.options`` as the synthesizer is built with them: one that explores (``explores``: llm,
    llm-unguided, a plugin built on theirs) also gets [models]' explorer and abstraction model, unless its options
    name them; one that writes kinds (``writes_kinds``) also gets ``synthesis.kinds``."""
    c = config.synthesis
    synthesizer = SYNTHESIZERS.load(c.synthesizer)
    kinds = {"kinds": c.kinds} if c.kinds and declares(synthesizer, "writes_kinds") else {}
    if not declares(synthesizer, "explores"):
        return {**kinds, **c.options}
    options = {**config.models.exploration(), **kinds, **c.options}
    if options["model"] is None:
        raise ConfigError(f"synthesis.synthesizer = {c.synthesizer} explores with [models]' explorer "
                          "and writes tasks with its abstraction model: set models.explorer.model (the abstraction "
                          "model defaults to it)")
    return options


def validate(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """Each pending candidate checked; accepted ones become tasks, drawn from round R + 1 on."""
    v, models = run.config.validation, run.config.models
    counter = {"n": 0, "accepted": 0}

    def on_verdict(verdict) -> None:
        counter["n"] += 1
        counter["accepted"] += verdict.verdict == "accepted"
        run.detail(label, f"{counter['n']}: {verdict.candidate_id} {verdict.verdict} ({verdict.reason})")
        advance(run.echo, done=counter["n"], accepted=counter["accepted"])

    if not v.enabled:
        options = ValidationOptions(runnable_only=True, contamination_threshold=v.contamination_threshold)
        validate_candidates(run.db, round=round_, env=run.environment, options=options, wait=run.wait,
                            on_verdict=on_verdict)
        return {**_verdicts(run, round_), "validation": "off: synthesis, schema and contamination checks only"}
    agent, judge = validation_agent(run), None
    if models.judge.model:
        judge = LLMJudge(_llm_client(run, "judge"), run.db)
    options = ValidationOptions(novelty_threshold=v.novelty_threshold,
                                contamination_threshold=v.contamination_threshold, agent=agent, attempts=v.attempts,
                                max_success_rate=v.max_success_rate if agent else None, judge=judge,
                                embedder=run.embedder)  # the model the patterns phase loaded, if it ran
    validate_candidates(run.db, round=round_, env=run.environment, options=options, wait=run.wait,
                        on_verdict=on_verdict)
    return _verdicts(run, round_)


def validation_agent(run: RunContext):
    """The agent that attempts each candidate (``models.agent``, sampling as ``[agent]`` says and
    playing as ``[episode]`` says), or None."""
    c = run.config
    if not c.models.agent.model:
        return None
    e = c.episode
    options = {**dataclasses.asdict(c.agent), "max_steps": e.max_steps,
               "max_model_calls_per_turn": e.max_model_calls_per_turn,
               "chat_template_kwargs": e.chat_template_kwargs or None}
    return load_agent(c.models.connect("agent"), options, run.plugins())


def _verdicts(run: RunContext, round_: int) -> dict[str, Any]:
    with run.store(read_only=True) as store:
        rows = store.execute("SELECT verdict, reason, count(*) FROM candidates WHERE round = $r "
                             "GROUP BY ALL ORDER BY ALL", {"r": round_}).fetchall()
    accepted = sum(n for verdict, _, n in rows if verdict == "accepted")
    return {"candidates": sum(n for *_, n in rows), "accepted": accepted,
            "rejected": {reason: n for verdict, reason, n in rows if verdict == "rejected"}}


def describe_validate(o: dict[str, Any]) -> str:
    rejected = ", ".join(f"{r} {n}" for r, n in o["rejected"].items())
    off = " (validation off: synthesis, schema and contamination checks only)" if o.get("validation") else ""
    return f"{o['accepted']} of {o['candidates']} accepted" + (f"; rejected: {rejected}" if rejected else "") + off
