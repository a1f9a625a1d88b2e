"""The phases of a round, declared once: name, when it runs, what runs it, and how its outputs read.

``run --help``, the run's progress lines, ``PHASES`` and the order the ledger resumes in all come from
``ROUND``. A phase's ``work`` returns its outputs; a phase whose writes must land together with its
'finished' mark names a ``commit`` step, which the ledger runs inside that transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from coevolve_engine.loop import evaluation, feedback, training
from coevolve_engine.loop.config import RunConfig
from coevolve_engine.loop.context import RunContext
from coevolve_engine.loop.ledger import Commit
from coevolve_engine.loop.summary import to_json


@dataclass(frozen=True)
class Phase:
    name: str
    help: str  # one line for `run --help`
    when: Callable[[RunConfig, int], bool]  # whether round R has this phase
    work: Callable[[RunContext, int, str], dict[str, Any]] | None  # (run, round, label) -> outputs
    describe: Callable[[dict[str, Any]], str]  # one line on the stored outputs
    commit: Commit | None = None  # writes that land with the 'finished' mark
    bar: str | None = None  # what the phase's progress bar counts (short phases show only their closing line)
    total: Callable[[RunContext], int | None] | None = None  # the bar's end, where known before the phase
    feedback: bool = False  # one of the phases a run without feedback leaves out


def _always(config: RunConfig, round_: int) -> bool:
    return True


def _with_feedback(config: RunConfig, round_: int) -> bool:
    return config.feedback


def _eval_round(config: RunConfig, round_: int) -> bool:
    """Every EVERY-th round, and always the first (with the starting policy) and the last: a run's held-out
    curve has its start and its end whatever EVERY is."""
    every = config.eval.every
    return every > 0 and (round_ in (0, config.rounds - 1) or (round_ + 1) % every == 0)


def _pending(run: RunContext) -> int | None:
    with run.store(read_only=True) as store:
        return store.scalar("SELECT count(*) FROM candidates WHERE verdict = 'pending'") or None


ROUND = (
    Phase("bootstrap", "(round 0, if bootstrap.n > 0) D_0: tasks from unguided LLM exploration, validated",
          when=lambda c, r: r == 0 and c.bootstrap.n > 0, work=training.bootstrap,
          describe=training.describe_bootstrap, bar="task", total=lambda run: run.config.bootstrap.n),
    Phase("weights", "the task distribution round R trains on (curriculum.strategy), from the store",
          when=_always, work=None, commit=training.weights, describe=training.describe_weights),
    Phase("warmup", "(round 0, if warmup.steps > 0) SFT of the policy on the store's successful rollouts",
          when=lambda c, r: r == 0 and c.warmup.steps > 0, work=training.warmup, describe=training.describe_warmup,
          bar="step", total=lambda run: run.config.warmup.steps),
    Phase("train", "F = trainer.steps_per_round steps; every rollout is written to the store with its step",
          when=_always, work=training.train, commit=training.commit_train, describe=training.describe_train,
          bar="step", total=lambda run: run.config.trainer.steps_per_round),
    Phase("eval", "(every eval.every rounds, the first and the last) the new checkpoint, greedy, on the eval tasks",
          when=_eval_round, work=evaluation.evaluate,
          describe=evaluation.describe_eval, bar="task"),
    Phase("signals", "forgetting, boundary and rare flags over the round's steps, counted",
          when=_with_feedback, work=feedback.signals, describe=feedback.describe_signals, feedback=True),
    Phase("patterns", "the round's flagged rollouts clustered into failure patterns",
          when=_with_feedback, work=feedback.embed_flagged, commit=feedback.patterns,
          describe=feedback.describe_patterns, bar="pattern", feedback=True),
    Phase("synthesize", "candidate tasks proposed around each pattern",
          when=_with_feedback, work=feedback.synthesize, commit=feedback.store_candidates,
          describe=feedback.describe_synthesize, bar="candidate", feedback=True),
    Phase("validate", "candidates checked; accepted ones become tasks, drawn from round R + 1 on",
          when=_with_feedback, work=feedback.validate, describe=feedback.describe_validate, bar="candidate",
          total=_pending, feedback=True),
)
BY_NAME = {phase.name: phase for phase in ROUND}
PHASES = tuple(BY_NAME)
FEEDBACK_PHASES = tuple(phase.name for phase in ROUND if phase.feedback)


def planned(config: RunConfig, round_: int) -> list[str]:
    """The phases round R runs under ``config``, in order."""
    return [phase.name for phase in ROUND if phase.when(config, round_)]


def describe(name: str, outputs: dict[str, Any]) -> str:
    """One line on what a phase produced (from its stored outputs)."""
    return BY_NAME[name].describe(outputs) if name in BY_NAME else to_json(outputs)


def help_text() -> str:
    """The phases as `run --help` lists them."""
    return "\n".join(f"  {phase.name:<11} {phase.help}" for phase in ROUND)
