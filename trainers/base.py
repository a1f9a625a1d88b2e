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

import dataclasses
import difflib
import os
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.renamed import rename
from coevolve_engine.core.settings import coerce, field_types
from coevolve_engine.core.store import Store
from coevolve_engine.core.weights import check_weights, load_weights
from coevolve_engine.core.registry import PluginContext
from coevolve_engine.core.sink import StoreSink, TrajectorySink, group_records  # the store side of the contract

if TYPE_CHECKING:
    from coevolve_engine.core.rollout import Rollout


class BatchSource:
    """Task weights for the current round: each task is drawn (as a whole GRPO group) in proportion to its
    weight; a task with weight 0 is never drawn. ``refresh`` installs the next round's weights."""

    def __init__(self, weights: Mapping[str, float], *, seed: int = 0, round: int = 0) -> None:
        self.seed = seed
        self.round = round
        self._weights = self._checked(weights)

    @staticmethod
    def _checked(weights: Mapping[str, float]) -> dict[str, float]:
        checked = check_weights(weights, what="task weights", error=ValueError)
        return dict(zip((str(task) for task in weights), checked.tolist()))

    @classmethod
    def from_store(cls, db: str | os.PathLike[str], round: int | None = None, *, seed: int = 0,
                   wait: float = DEFAULT_WAIT_SECONDS) -> "BatchSource":
        """The weights a curriculum strategy stored for ``round`` (default: the latest) in ``task_weights``."""
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


def options_config(config_class: type, options: Mapping[str, Any], fixed: Mapping[str, Any], what: str,
                   reserved: Sequence[str] = ()) -> Any:
    """``config_class(**fixed, **options)``, refusing options that are unknown or that the run sets itself
    (``fixed``, and ``reserved``: fields the run decides another way). An option the class renamed
    (``config_class.RENAMED``, old -> new) is read under its new name with a ``DeprecatedSetting`` warning."""
    options = rename(options, getattr(config_class, "RENAMED", {}), what)  # old option names, read as config keys are
    names = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise CoevolveError(f"{what}: unknown option(s) {', '.join(unknown)}; its options: "
                            f"{', '.join(sorted(names - set(fixed) - set(reserved)))}")
    clash = sorted(set(options) & (set(fixed) | set(reserved)))
    if clash:
        raise CoevolveError(f"{what}: {', '.join(clash)} cannot be set in the options (the run sets them)")
    hints = field_types(config_class)
    checked = {}
    for name, value in options.items():
        try:
            checked[name] = coerce(value, hints.get(name, Any))
        except ValueError as exc:
            raise CoevolveError(f"{what}: option {name} must be {exc}, got {value!r}") from None
    try:
        return config_class(**fixed, **checked)
    except (TypeError, ValueError) as exc:
        raise CoevolveError(f"{what}: {exc}") from exc


def checked_trl_args(trl_args: Mapping[str, Any], config_class: type) -> dict[str, Any]:
    """``trl_args`` when every key is a field of TRL's ``config_class`` (e.g. ``GRPOConfig``); else a ValueError
    naming the unknown keys (and the closest fields), where the class itself would raise a bare TypeError."""
    names = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(trl_args) - names)
    if unknown:
        close = [match for key in unknown for match in difflib.get_close_matches(key, names, n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        verb = "is not a field" if len(unknown) == 1 else "are not fields"
        raise ValueError(f"trl_args: {', '.join(unknown)} {verb} of TRL's {config_class.__name__}{hint}")
    return dict(trl_args)


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


@dataclass(frozen=True)
class TrainContext(PluginContext):
    """What the run hands a trainer it builds for a round, beside the trainer's own options."""

    source: BatchSource | None = None  # which tasks to train on, and how often to draw each
    sink: TrajectorySink | None = None  # where every rollout goes (None: the trainer writes none)
    model: str = ""  # the policy the round starts from
    output_dir: str = ""  # where the checkpoint is saved
    start_step: int = 0  # the trainer numbers its steps from start_step + 1
    policy_name: str = "policy"  # the policy id recorded with every rollout, as NAME@STEP
    #: a checkpoint this trainer saved at the end of the run's previous round (``model``'s weights with the
    #: optimizer, schedule, step counter and sampling state); "" for a fresh optimization from ``model``. Only
    #: set for a trainer whose ``carries_optimization`` is true.
    resume_from: str = ""
    #: the run's starting policy (warm-up checkpoint or trainer.model): the KL reference of every round when the
    #: run is one optimization ("": ``model``)
    reference_model: str = ""
    #: the optimizer steps the learning-rate schedule spans from the optimization's first step (the run's rounds x
    #: steps_per_round when it is one optimization, the round's steps otherwise); 0: the trainer's own choice
    schedule_steps: int = 0


class Trainer(ABC):
    """Trains a policy on groups drawn from a ``BatchSource`` and reports every rollout to a ``TrajectorySink``.

    To be driven by `coevolve-engine run`, a trainer also implements ``from_options`` (the factory every plugin
    kind has: its options and a ``TrainContext``) and names its settings' dataclass in ``options_class``
    (fields with ``metadata={"help": ...}``; the run sets those in ``run_sets``).
    """

    source: BatchSource
    sink: TrajectorySink | None
    #: where a trainer may send a line of progress during ``train`` (the run sets it; None: nowhere)
    progress: Callable[[str], None] | None = None
    options_class: ClassVar[type | None] = None
    run_sets: ClassVar[tuple[str, ...]] = ()
    #: whether ``from_options`` continues one optimization across rounds from ``TrainContext.resume_from`` (the
    #: run's default, trainer.optimization = "run"); a trainer that cannot is run with "round" only
    carries_optimization: ClassVar[bool] = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "TrainContext") -> "Trainer":
        """The trainer for one round of `coevolve-engine run` (``TRAINERS.build``): train ``context.model`` on the
        store's tasks that ``context.source`` weighs, number its steps from ``context.start_step + 1``, report
        rollouts to ``context.sink``, and save the policy under ``context.output_dir`` after ``train``.
        ``options`` are the user's settings for this trainer."""
        raise NotImplementedError(f"trainer {cls.__name__} cannot be driven by `coevolve-engine run` "
                                  "(it does not implement Trainer.from_options)")

    @classmethod
    def check_options(cls, options: Mapping[str, Any], what: str) -> None:
        """Refuse ``options`` that ``from_options`` would refuse (unknown names, wrong types, values the settings
        class rejects), without building anything: the run checks its whole configuration before a round."""
        if cls.options_class is None:
            return
        hints = field_types(cls.options_class)
        stand_ins = {str: "", int: 0, float: 0.0, bool: True}
        fixed = {f.name: stand_ins.get(hints.get(f.name), None) for f in dataclasses.fields(cls.options_class)
                 if f.name in cls.run_sets and f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING}
        config = options_config(cls.options_class, options, fixed, what, reserved=cls.run_sets)
        try:
            with warnings.catch_warnings():  # a deprecation is said once, when the round builds it
                warnings.simplefilter("ignore")
                cls.check_config(config)
        except ImportError as exc:
            raise CoevolveError(f"{what}: needs {exc.name or exc}, which is not installed") from None
        except (TypeError, ValueError) as exc:
            raise CoevolveError(f"{what}: {exc}") from None

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Build from checked settings whatever else ``from_options`` builds that can refuse a value (a library's
        own config object, e.g. TRL's ``GRPOConfig`` with the ``trl_args``), loading no model and writing nothing;
        raise TypeError or ValueError on a value it refuses. Default: nothing more to build."""

    @abstractmethod
    def train(self, steps: int) -> TrainReport:
        """Run ``steps`` optimizer steps, drawing from the source's current weights; steps continue across calls."""


class Stopwatch:
    """Seconds since construction (a tiny helper so trainers report timings the same way)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.start
