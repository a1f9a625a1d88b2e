"""The store contract: where every rollout a trainer (or an agent job) generates is written.

A ``TrajectorySink`` receives rollouts in whole GRPO groups; ``StoreSink`` writes them to a store, each group
(or each training step's groups) in one transaction. The engine, the adapters and the trainers all meet here.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import Store

if TYPE_CHECKING:
    from coevolve_engine.core.rollout import Rollout


class TrajectorySink(ABC):
    """Receives every rollout a trainer generated, in whole groups: one at a time (``write_group``) or a
    training step's groups together (``write_groups``, which a trainer should prefer: a store sink writes them
    in one unit of work)."""

    groups: int = 0
    rollouts: int = 0
    #: seconds this sink spent writing to the store (the loop counts them as feedback work, not training)
    store_seconds: float = 0.0

    @abstractmethod
    def write_group(self, rollouts: Sequence["Rollout"], *, step: int, group_id: str) -> None:
        """Keep one group: the K rollouts of one task generated together at training ``step``."""

    def write_groups(self, groups: Sequence[tuple[str, Sequence["Rollout"]]], *, step: int) -> None:
        """Keep the groups ``(group_id, rollouts)`` of one training ``step``; by default one by one."""
        for group_id, rollouts in groups:
            self.write_group(rollouts, step=step, group_id=group_id)

    def flush(self) -> None:
        """Write anything the sink still holds; a trainer calls it when its training ends (default: nothing)."""


def group_records(rollouts: Sequence["Rollout"], *, step: int, group_id: str) -> list[dict[str, Any]]:
    """The store's trajectory records of one group, ids ``group_id#k`` so a rewrite adds nothing."""
    records = []
    for k, rollout in enumerate(sorted(rollouts, key=lambda r: r.sample_index)):
        record = rollout.to_record(step=step, group_id=group_id)
        record["trajectory_id"] = f"{group_id}#{k}"
        records.append(record)
    return records


class StoreSink(TrajectorySink):
    """Writes each group, or each step's groups, in one transaction through a store opened only for that
    write: readers can query the store between two writes (waiting at most one write), and an interrupted run
    keeps every write it finished.

    ``steps_per_write`` > 1 keeps that many training steps' groups in memory and writes them in one unit of
    work (a store open costs tens of milliseconds: with fast steps, one write per step is a real share of
    training); ``flush()`` writes what is kept, and a trainer calls it when its training ends."""

    def __init__(self, db: str | Path, *, wait: float = DEFAULT_WAIT_SECONDS, label: str = "trainer group",
                 steps_per_write: int = 1) -> None:
        if steps_per_write < 1:
            raise ValueError(f"steps_per_write must be at least 1, got {steps_per_write}")
        self.db = Path(db)
        self.wait = wait
        self.label = label  # names the write in the ingests table: '<label> <group_id>', '<label> step <n>' or
        # '<label> steps <first>-<last>'
        self.steps_per_write = steps_per_write
        self.groups = 0
        self.rollouts = 0
        self.store_seconds = 0.0
        self.writes = 0  # units of work (store opens) so far
        self._kept: list[tuple[int, Sequence[tuple[str, Sequence["Rollout"]]]]] = []  # (step, groups) not written

    @property
    def pending(self) -> int:
        """Training steps whose groups are kept, not yet written."""
        return len(self._kept)

    def write_group(self, rollouts: Sequence["Rollout"], *, step: int, group_id: str) -> None:
        self.flush()
        self._write([(step, [(group_id, rollouts)])], name=group_id)

    def write_groups(self, groups: Sequence[tuple[str, Sequence["Rollout"]]], *, step: int) -> None:
        if not groups:
            return
        if self.steps_per_write > 1:
            self._kept.append((step, list(groups)))
            if len(self._kept) >= self.steps_per_write:
                self.flush()
        elif len(groups) == 1:  # named as before, so a store written group by group reads the same
            self.write_group(groups[0][1], step=step, group_id=groups[0][0])
        else:
            self._write([(step, groups)], name=f"step {step}")

    def flush(self) -> None:
        """Write the kept steps' groups, in one unit of work."""
        if not self._kept:
            return
        kept, steps = self._kept, [step for step, _ in self._kept]
        name = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        self._write(kept, name=name)
        self._kept = []

    def _write(self, steps: Sequence[tuple[int, Sequence[tuple[str, Sequence["Rollout"]]]]], *, name: str) -> None:
        started = time.perf_counter()
        records: list[dict[str, Any]] = []
        for step, groups in steps:
            for group_id, rollouts in groups:
                records += group_records(rollouts, step=step, group_id=group_id)
        ids = [record["trajectory_id"] for record in records]
        with Store(self.db, wait=self.wait) as store, store.transaction() as con:
            taken = con.execute(
                "SELECT min(trajectory_id), count(*) FROM trajectories WHERE list_contains($ids, trajectory_id)",
                {"ids": ids}).fetchall()[0]
            if taken[1]:  # ingest would keep the stored rows and drop these: rollouts lost without a word
                group_id = taken[0].rsplit("#", 1)[0]
                step = next(r["step"] for r in records if r["trajectory_id"] == taken[0])
                raise CoevolveError(
                    f"{self.db} already holds {taken[1]} trajectories with the ids of group {group_id} "
                    f"({taken[0]}, ...): the store has rollouts at step {step} already; start the trainer's "
                    "steps after the store's latest step")
            store.add_records("trajectories", records, label=f"{self.label} {name}")
        self.groups += sum(len(groups) for _, groups in steps)
        self.rollouts += len(records)
        self.writes += 1
        self.store_seconds += time.perf_counter() - started
