"""One LLM summary per failure pattern: what the flagged rollouts have in common and where to explore next.

    client = LLMClient("coevolve.duckdb", "openai/gpt-4o-mini")
    report = summarise_patterns("coevolve.duckdb", client=client)

For each pattern of the round (the latest round by default) that has no summary yet, the prompt
``prompts/summary.md`` is filled with the pattern's dominant signal, its signal counts, its representative
trajectory rendered as text and a few other members, and sent in ONE request (retried only when the answer
is not the schema, or the transport fails). The validated JSON object goes to ``failure_patterns.summary``;
when no acceptable answer comes, the reason goes to ``summary_error`` and the run moves on to the next pattern.
Each pattern is written in its own short transaction, and the store is not held during LLM calls.

A pattern with a ``summary_error`` has no summary, so a rerun tries it again; with the cache on, requests
already answered are replayed from ``llm_calls`` for free (``--no-cache`` asks the model anew).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.models.llm import LLMClient, LLMError, LLMUsage
from coevolve_engine.patterns.render import render_row, task_text
from coevolve_engine.patterns.write import record_summary
from coevolve_engine.prompts import load_prompt
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store

PROMPT_NAME = "summary"
PURPOSE = "summary"

_TEXT = {"type": "string", "minLength": 1}
_TEXTS = {"type": "array", "items": _TEXT}

SUMMARY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "failure pattern summary",
    "type": "object",
    "properties": {
        "summary": _TEXT,
        "failure_cause": _TEXT,
        "instability_pattern": _TEXT,
        "focus_pattern": {**_TEXTS, "minItems": 1},
        "exploration_objectives": {**_TEXTS, "minItems": 1},
        "do_not_repeat": _TEXTS,
    },
    "required": ["summary", "failure_cause", "instability_pattern", "focus_pattern", "exploration_objectives",
                 "do_not_repeat"],
    "additionalProperties": False,
}

SIGNAL_MEANINGS = {
    "forgetting": "the agent used to solve these tasks and fails them now",
    "boundary": "the agent's rollouts of these tasks sometimes succeed and sometimes fail",
    "rare": "the agent took tool-call sequences it rarely takes",
}

MAX_TRAJECTORY_CHARS = 6000


class SummaryError(CoevolveError):
    """Summaries were asked for patterns that do not exist."""


@dataclass
class PatternOutcome:
    """How one pattern went: ``summary`` when accepted, else ``error``; ``usage`` is what it cost."""

    pattern_id: str
    dominant_signal: str
    size: int
    summary: dict[str, Any] | None = None
    error: str | None = None
    usage: LLMUsage = field(default_factory=LLMUsage)

    @property
    def ok(self) -> bool:
        return self.summary is not None


@dataclass
class SummaryReport:
    """What ``summarise_patterns`` did. Each figure can be recomputed from failure_patterns and llm_calls."""

    round: int
    outcomes: list[PatternOutcome]
    already_summarised: int
    usage: LLMUsage
    seconds: float

    @property
    def summarised(self) -> int:
        return sum(outcome.ok for outcome in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(not outcome.ok for outcome in self.outcomes)

    @property
    def calls(self) -> int:
        """Requests that went to the model (transport and schema retries included)."""
        return self.usage.requests

    @property
    def cached_calls(self) -> int:
        return self.usage.cached

    @property
    def tokens(self) -> int:
        return self.usage.prompt_tokens + self.usage.completion_tokens

    @property
    def cost(self) -> float:
        return self.usage.cost


def summarise_patterns(
    store_path: str | os.PathLike[str],
    *,
    round: int | None = None,  # noqa: A002 - the domain's word
    client: LLMClient,
    max_members: int = 5,
    max_attempts: int = 3,
    wait: float = DEFAULT_WAIT_SECONDS,
    on_outcome: Callable[[PatternOutcome], None] | None = None,
) -> SummaryReport:
    """Summarise every pattern of ``round`` (default: the latest) that has no summary yet, one request each.

    max_members: other members shown besides the representative. max_attempts: answers per pattern before
    its ``summary_error`` is written. on_outcome: called after each pattern (for progress).
    """
    started = time.perf_counter()
    with Store(store_path, create=False, wait=wait) as store:  # a write open: applies pending migrations
        round = _pick_round(store, round)
        patterns = store.execute(
            "SELECT pattern_id, dominant_signal, size, summary IS NOT NULL AS done FROM failure_patterns "
            "WHERE round = $round ORDER BY cluster, pattern_id", {"round": round},
        ).fetchall()
    todo = [(pattern_id, signal, size) for pattern_id, signal, size, done in patterns if not done]
    outcomes: list[PatternOutcome] = []
    usage = LLMUsage()
    for pattern_id, signal, size in todo:
        with Store(store_path, read_only=True, wait=wait) as store:
            messages = summary_prompt(store, pattern_id, max_members=max_members)
        outcome = PatternOutcome(pattern_id, signal, size)
        try:
            result = client.complete(PURPOSE, load_prompt(PROMPT_NAME).id, messages, json_schema=SUMMARY_SCHEMA,
                                     max_attempts=max_attempts)
            outcome.summary, outcome.usage = result.data, result.usage
        except LLMError as exc:
            outcome.error, outcome.usage = str(exc), exc.usage
        _write(store_path, outcome, wait)
        usage.add(outcome.usage)
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    return SummaryReport(round, outcomes, len(patterns) - len(todo), usage, time.perf_counter() - started)


def _pick_round(store: Store, round: int | None) -> int:
    rounds = [row[0] for row in store.execute("SELECT DISTINCT round FROM failure_patterns ORDER BY round").fetchall()]
    if not rounds:
        raise SummaryError(f"store {store.path} has no failure patterns yet; find them first (they are written "
                           "to the failure_patterns table from the flagged trajectories)")
    if round is None:
        return rounds[-1]
    if round not in rounds:
        raise SummaryError(f"round {round} has no failure patterns; rounds with patterns: "
                           + ", ".join(map(str, rounds)))
    return round


def _write(store_path, outcome: PatternOutcome, wait: float) -> None:
    with Store(store_path, create=False, wait=wait) as store, store.transaction():
        if outcome.ok:
            record_summary(store, outcome.pattern_id, summary=outcome.summary)
        else:
            record_summary(store, outcome.pattern_id, error=outcome.error)


# -- the prompt --------------------------------------------------------------------------------------------

_MEMBER_SQL = """
SELECT m.trajectory_id, m.signals, m.distance, t.task_id, t.step, t.reward, t.success, t.action_pattern,
       t.actions, t.messages, t.meta, t.error, k.prompt
FROM pattern_members m
LEFT JOIN trajectories t ON t.trajectory_id = m.trajectory_id
LEFT JOIN tasks k ON k.task_id = t.task_id
WHERE m.pattern_id = $pattern_id
ORDER BY m.trajectory_id = $representative DESC, m.distance NULLS LAST, m.trajectory_id
"""


def summary_prompt(store: Store, pattern_id: str, *, max_members: int = 5) -> list[dict[str, str]]:
    """The chat messages that ask for ``pattern_id``'s summary (what ``summarise_patterns`` sends)."""
    found = store.execute(
        "SELECT pattern_id, step, size, dominant_signal, signal_counts, representative_trajectory "
        "FROM failure_patterns WHERE pattern_id = $id", {"id": pattern_id},
    ).fetchall()
    if not found:
        raise SummaryError(f"no failure pattern {pattern_id!r} in {store.path}")
    _, step, size, signal, counts, representative = found[0]
    cursor = store.execute(_MEMBER_SQL, {"pattern_id": pattern_id, "representative": representative})
    columns = [d[0] for d in cursor.description]
    members = [dict(zip(columns, row)) for row in cursor.fetchall()]
    # a representative that is not among the members (or none given): the closest member stands in
    first = members[0] if members else None
    others = members[1:1 + max_members]
    counts = json.loads(counts) if isinstance(counts, str) else (counts or {})
    return load_prompt(PROMPT_NAME).render(
        pattern_id=pattern_id,
        size=size,
        step=step if step is not None else "unknown",
        dominant_signal=signal,
        signal_meaning=SIGNAL_MEANINGS.get(signal, "a signal of the engine"),
        signal_counts=", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        or "none recorded",
        representative=_render_trajectory(first) if first else "(the pattern has no members in the store)",
        other_members="\n".join(_member_line(m) for m in others) or "(none)",
    )


def _clip(text: Any, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 20] + f" [... {len(text) - limit + 20} more chars]"


def _outcome(row: dict[str, Any]) -> str:
    if row["task_id"] is None:
        return "not in the trajectories table"
    verdict = "" if row["success"] is None else (", succeeded" if row["success"] else ", failed")
    error = f", cut short: {_clip(row['error'], 200)}" if row["error"] else ""
    return f"step {row['step']}, reward {row['reward']:g}{verdict}{error}"


def _render_trajectory(row: dict[str, Any]) -> str:
    """A rollout as readable text: a line of ids, outcome and signals, then the patterns phase's rendering."""
    header = (f"trajectory {row['trajectory_id']} of task {row['task_id']} ({_outcome(row)}); "
              f"signals: {', '.join(row['signals'] or [])}")
    if row["task_id"] is None:
        return header
    return header + "\n" + render_row(row, max_chars=MAX_TRAJECTORY_CHARS)


def _member_line(row: dict[str, Any]) -> str:
    messages = json.loads(row["messages"]) if isinstance(row["messages"], str) else row["messages"]
    prompt = _clip(task_text(row["prompt"], messages if isinstance(messages, list) else None), 200)
    return (f"- task {row['task_id']} ({_outcome(row)}); signals: {', '.join(row['signals'] or [])}; "
            f"tool calls: {row['action_pattern'] or '(none)'}; task: {prompt or '(unknown)'}")
