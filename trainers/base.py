"""The trainer contract: the engine meets trainers through data.

Three pieces, and nothing else, cross the boundary:

- a ``BatchSource`` says which tasks to train on and how often to draw each one (task id -> weight for the
  current round, refreshed between rounds), with a seed so draws are reproducible;
- a ``TrajectorySink`` receives every rollout the trainer generated, one GRPO group at a time or a training
  step's groups at once, with the training step, the group id and the reward, and writes it to the store;
- ``Trainer.train(steps)`` runs that many optimizer steps and returns a ``TrainReport``.

A trainer draws groups from the source, reports each finished group to the sink, and never reads or
writes the store itself. Any trainer that keeps this contract (TRL in process, or an exporter that hands the
weights to verl / OpenRLHF and ingests their rollouts) plugs in through ``TRAINERS``.
"""

from __future__ import annotations

import math
import os
import time
import types
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

if TYPE_CHECKING:
    from coevolve_engine.adapters.agents.rollout import Rollout


class BatchSource:
    """Task weights for the current round: each task is drawn (as a whole GRPO group) in proportion to its
    weight; a task with weight 0 is never drawn. ``refresh`` installs the next round's weights."""

    def __init__(self, weights: Mapping[str, float], *, seed: int = 0, round: int = 0) -> None:
        self.seed = seed
        self.round = round
        self._weights = self._checked(weights)

    @staticmethod
    def _checked(weights: Mapping[str, float]) -> dict[str, float]:
        bad = {task: w for task, w in weights.items()
               if not isinstance(w, (int, float)) or isinstance(w, bool) or not math.isfinite(w) or w < 0}
        if bad:
            shown = ", ".join(f"{task}={w!r}" for task, w in list(bad.items())[:5])
            raise ValueError(f"task weights must be finite numbers >= 0; got {shown}")
        if not weights or sum(weights.values()) <= 0:
            raise ValueError("at least one task needs a positive weight, or the trainer has nothing to draw")
        return {str(task): float(w) for task, w in weights.items()}

    @classmethod
    def from_store(cls, db: str | os.PathLike[str], round: int | None = None, *, seed: int = 0,
                   wait: float = 30.0) -> "BatchSource":
        """The weights a curriculum strategy stored for ``round`` (default: the latest) in ``task_weights``."""
        from coevolve_engine.curriculum import load_weights
        from coevolve_engine.store import Store

        with Store(db, read_only=True, wait=wait) as store:
            weight_set = load_weights(store, round)
        weights = dict(zip(weight_set.task_ids, (float(w) for w in weight_set.weights)))
        return cls(weights, seed=seed, round=weight_set.round)

    def weights(self) -> dict[str, float]:
        """The current round's weights (a copy)."""
        return dict(self._weights)

    def task_ids(self) -> list[str]:
        """Every task the source knows, weight 0 included, in a stable order."""
        return sorted(self._weights)

    def refresh(self, weights: Mapping[str, float], *, round: int | None = None) -> None:
        """Install new weights (normally the next round's); the trainer draws from them from its next batch."""
        self._weights = self._checked(weights)
        self.round = self.round + 1 if round is None else round


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

    def __init__(self, db: str | Path, *, wait: float = 30.0, label: str = "trainer group",
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
        from coevolve_engine.errors import CoevolveError
        from coevolve_engine.store import Store

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


def options_config(config_class: type, options: Mapping[str, Any], fixed: Mapping[str, Any], what: str,
                   reserved: Sequence[str] = ()) -> Any:
    """``config_class(**fixed, **options)``, refusing options that are unknown or that the run sets itself
    (``fixed``, and ``reserved``: fields the run decides another way)."""
    import dataclasses

    from coevolve_engine.errors import CoevolveError

    names = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise CoevolveError(f"{what}: unknown option(s) {', '.join(unknown)}; its options: "
                            f"{', '.join(sorted(names - set(fixed) - set(reserved)))}")
    clash = sorted(set(options) & (set(fixed) | set(reserved)))
    if clash:
        raise CoevolveError(f"{what}: {', '.join(clash)} cannot be set in the options (the run sets them)")
    hints = typing.get_type_hints(config_class)
    for name, value in options.items():
        if not _fits(value, hints.get(name, Any)):
            raise CoevolveError(f"{what}: option {name} must be {_kind_name(hints[name])}, got {value!r}")
    try:
        return config_class(**fixed, **options)
    except (TypeError, ValueError) as exc:
        raise CoevolveError(f"{what}: {exc}") from exc


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` (from TOML or --set) is of the annotated type ``hint``; types it cannot judge pass."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    hint = origin or hint
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (dict, Mapping):
        return isinstance(value, Mapping)
    if hint in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    return True


def _kind_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_kind_name(arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    names = {type(None): "none", bool: "true or false", int: "an integer", float: "a number", str: "a string",
             dict: "a table", list: "a list", tuple: "a list"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


@dataclass(frozen=True)
class TrainReport:
    """What one ``Trainer.train`` call did."""

    steps: int  # optimizer steps run by this call
    first_step: int  # the training step of this call's first rollouts (steps continue across calls)
    groups: int  # groups reported to the sink
    rollouts: int  # rollouts reported to the sink
    checkpoint: Path | None  # where the policy was saved afterwards, if it was
    seconds: float

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / self.steps if self.steps else 0.0


class Trainer(ABC):
    """Trains a policy on groups drawn from a ``BatchSource`` and reports every rollout to a ``TrajectorySink``.

    To be driven by `coevolve-engine run`, a trainer also implements ``for_run`` and names its settings'
    dataclass in ``options_class`` (fields with ``metadata={"help": ...}``; the run sets those in ``run_sets``).
    """

    source: BatchSource
    sink: TrajectorySink | None
    #: where a trainer may send a line of progress during ``train`` (the run sets it; None: nowhere)
    progress: Callable[[str], None] | None = None
    options_class: ClassVar[type | None] = None
    run_sets: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def for_run(cls, *, db: Path, environment: Any, source: BatchSource, sink: TrajectorySink | None, model: str,
                output_dir: str, seed: int, start_step: int, policy_name: str,
                options: Mapping[str, Any]) -> "Trainer":
        """The trainer for one round of `coevolve-engine run`: train ``model`` on the store's tasks that
        ``source`` weighs, number its steps from ``start_step + 1``, report rollouts to ``sink``, and save the
        policy under ``output_dir`` after ``train``. ``options`` are the user's settings for this trainer."""
        raise NotImplementedError(f"trainer {cls.__name__} cannot be driven by `coevolve-engine run` "
                                  "(it does not implement Trainer.for_run)")

    @classmethod
    def check_options(cls, options: Mapping[str, Any], what: str) -> None:
        """Refuse ``options`` that ``for_run`` would refuse (unknown names, wrong types, values the settings
        class rejects), without building anything: the run checks its whole configuration before a round."""
        if cls.options_class is None:
            return
        import dataclasses

        hints = typing.get_type_hints(cls.options_class)
        stand_ins = {str: "", int: 0, float: 0.0, bool: True}
        fixed = {f.name: stand_ins.get(hints.get(f.name), None) for f in dataclasses.fields(cls.options_class)
                 if f.name in cls.run_sets and f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING}
        options_config(cls.options_class, options, fixed, what, reserved=cls.run_sets)

    @abstractmethod
    def train(self, steps: int) -> TrainReport:
        """Run ``steps`` optimizer steps, drawing from the source's current weights; steps continue across calls."""


class Stopwatch:
    """Seconds since construction (a tiny helper so trainers report timings the same way)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.start
