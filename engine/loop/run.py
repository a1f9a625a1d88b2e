"""The co-evolution loop: rounds of weights -> train -> eval -> signals -> patterns -> synthesize -> validate.

One round (docs/architecture.md, "The round"):

    task distribution (weights, round R)
        -> the trainer trains F steps on weighted GRPO groups; every rollout goes to store.trajectories
        -> the checkpoint is evaluated on the held-out tasks
        -> SQL views flag forgetting / boundary / rare trajectories over the round's steps
        -> flagged trajectories are embedded and clustered into failure patterns
        -> candidate tasks are synthesized around each pattern
        -> each candidate is validated; accepted ones join the task set, weighted from round R + 1 on

The phases, when each runs and what it writes are the table ``phases.ROUND``. Each phase reads its inputs from
the store and writes its outputs there; the ledger (``ledger.Ledger``) records that it finished, in the same
transaction as the writes that must land with it (weights, patterns, the train phase's checkpoint).

How a killed run resumes: a rerun starts at the first unfinished phase, and nothing is lost or written twice.
``bootstrap`` keeps what an earlier attempt stored and adds only what is missing; ``train`` first removes the
rollouts an interrupted attempt wrote (the policy that wrote them died with the process) and trains again from
the round's starting checkpoint with the same seed; ``synthesize`` adds only candidates not yet stored;
``validate`` checks only pending candidates, each verdict committed with its task.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from coevolve_engine.core.lease import hold_lease
from coevolve_engine.loop.config import RunConfig
from coevolve_engine.loop.context import RunContext, RunError, phase_label
from coevolve_engine.loop.ledger import Ledger, warmup_checkpoint  # the latter: bench/curriculum_bench.py imports it here
from coevolve_engine.loop.phases import BY_NAME, FEEDBACK_PHASES, PHASES, describe, planned
from coevolve_engine.loop.preflight import check_plugins
from coevolve_engine.loop.summary import round_line
from coevolve_engine.display.progress import progress
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS

__all__ = ["FEEDBACK_PHASES", "PHASES", "PhaseResult", "RunError", "RunLoop", "RunReport", "warmup_checkpoint"]


@dataclass
class PhaseResult:
    round: int
    phase: str
    seconds: float
    outputs: dict[str, Any]
    resumed: bool = False  # an earlier attempt was interrupted


@dataclass
class RunReport:
    rounds: int  # rounds the store has finished
    done: list[PhaseResult] = field(default_factory=list)  # phases this call ran
    skipped: int = 0  # phases already finished before this call


class RunLoop:
    """Runs (or resumes) the loop on the store at ``db`` until ``config.rounds`` rounds are finished."""

    def __init__(self, db: str | Path, config: RunConfig, *, wait: float = DEFAULT_WAIT_SECONDS,
                 echo: Callable[[str], None] = print) -> None:
        config.check()
        self.config = config
        self.context = RunContext(Path(db), config, wait, echo)
        self.ledger = Ledger(self.context, self.phases)

    def phases(self, round_: int) -> list[str]:
        """The phases round R runs, in order."""
        return planned(self.config, round_)

    def remaining(self) -> list[tuple[int, str]]:
        """(round, phase) still to run, in order."""
        return self.ledger.remaining()

    def run(self) -> RunReport:
        """Check the whole configuration, take the store's lease, then run every unfinished phase in order."""
        run = self.context
        check_plugins(run)
        self.ledger.check_store()  # before the lease too: a refused run leaves the store's data as it was
        self.ledger.check_start_model()
        with hold_lease(run.db, "run", wait=run.wait, echo=run.echo):
            return self._rounds()

    def _rounds(self) -> RunReport:
        run, todo = self.context, self.remaining()
        total = sum(len(self.phases(r)) for r in range(self.config.rounds))
        report = RunReport(rounds=0, skipped=total - len(todo))
        if not todo:
            run.echo(f"all {self.config.rounds} rounds are finished in {run.db}; nothing to do "
                     "(raise `rounds` to run more)")
        elif report.skipped:
            r, p = todo[0]
            run.echo(f"resuming at round {r}, phase {p} ({report.skipped} of {total} phases already finished)")
        for round_, phase in todo:
            report.done.append(self._run_phase(round_, phase))
        with run.store(read_only=True) as store:
            report.rounds = store.scalar("SELECT count(*) FROM rounds WHERE status = 'finished'")
        return report

    def _run_phase(self, round_: int, name: str) -> PhaseResult:
        """Start the phase, do its work, finish it (with its commit step), and say what it produced."""
        run, phase = self.context, BY_NAME[name]
        resumed = self.ledger.start(round_, name)
        label = phase_label(round_, name)
        if resumed:
            run.echo(f"{label} resuming an interrupted attempt")
        started = time.perf_counter()
        bar = progress(run.echo, label, total=phase.total(run) if phase.total else None, unit=phase.bar) \
            if phase.bar else nullcontext()
        with bar:
            outputs = phase.work(run, round_, label) if phase.work else {}
            outputs, seconds = self.ledger.finish(round_, name, outputs, started, phase.commit)
        run.echo(f"{label} done in {seconds:.1f} s: {describe(name, outputs)}")
        if name == self.phases(round_)[-1]:
            with run.store(read_only=True) as store:
                run.echo(round_line(store, self.config, round_))
        return PhaseResult(round_, name, seconds, outputs, resumed)
