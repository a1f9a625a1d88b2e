"""What a curriculum strategy is: a typed config and a function from per-task facts to per-task weights.

A strategy reads one row per task from the ``task_curriculum_with`` macro (its signals over its last
``recent`` scored steps, its latest group, how stale it is; see ``sql/views/task_curriculum_with.sql``) and
returns one row per task: ``task_id``, ``weight`` (>= 0, unnormalised) and ``components`` (a struct of the
terms that produced the weight, stored as JSON). Strategies form a registry; third parties add theirs through
the ``coevolve_engine.strategies`` entry-point group::

    [project.entry-points."coevolve_engine.strategies"]
    mine = "mypackage.curriculum:MyStrategy"
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import polars as pl

from coevolve_engine.core.settings import coerce, field_types, help_of
from coevolve_engine.core.errors import CoevolveError, CurriculumError
from coevolve_engine.core.registry import Registry
from coevolve_engine.core.signal_params import SignalParams

STRATEGIES = Registry("curriculum strategy", entry_point_group="coevolve_engine.strategies")
STRATEGIES.register("uniform", "coevolve_engine.curriculum.uniform:UniformStrategy",
                    description="every task weighs 1")
STRATEGIES.register("coevolve", "coevolve_engine.curriculum.coevolve:CoevolveStrategy",
                    description="1 + forgetting, boundary and rare terms + staleness + a boost for new "
                                "synthesized tasks")
STRATEGIES.register("plr", "coevolve_engine.curriculum.plr:PLRStrategy",
                    description="Prioritized Level Replay: rank of learning potential mixed with staleness")
STRATEGIES.register("dapo-filter", "coevolve_engine.curriculum.dapo_filter:DAPOFilterStrategy",
                    description="0 for tasks whose last group was all success or all failure, else 1")


FACTS_SQL = """
SELECT * FROM task_curriculum_with(threshold := $threshold, w := $w, theta := $theta, min_n := $min_n,
                                   recent := $recent, forgetting_form := $forgetting_form)
ORDER BY task_id
"""


@dataclass(frozen=True)
class StrategyResult:
    """One row per task (``task_id``, ``weight``, ``components``) and notes for the weight set's reason."""

    weights: pl.DataFrame
    notes: tuple[str, ...] = ()


class CurriculumStrategy(ABC):
    """Base class of every strategy: ``Config`` is a frozen dataclass whose fields carry ``help`` metadata."""

    name: ClassVar[str]
    Config: ClassVar[type]

    def __init__(self, config: Any = None) -> None:
        self.config = config if config is not None else self.Config()
        if not isinstance(self.config, self.Config):
            raise CurriculumError(f"strategy {self.name!r} takes a {self.Config.__name__}, "
                                  f"got {type(self.config).__name__}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: Any) -> "CurriculumStrategy":
        """How the registry builds one (``Registry.build``): from its settings; strategies read the store they
        weigh when ``weigh`` is called, so the context is not needed."""
        return cls.from_settings(options)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "CurriculumStrategy":
        """Build from settings: typed values (a run's TOML) or NAME=VALUE strings (the CLI's --set), each read
        as its field's type."""
        fields = {f.name: f for f in dataclasses.fields(cls.Config)}
        hints = field_types(cls.Config)
        values: dict[str, Any] = {}
        for key, value in settings.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise CurriculumError(f"strategy {cls.name!r} has no setting {key!r}; its settings: "
                                      f"{', '.join(sorted(fields)) or '(none)'}")
            try:
                values[name] = coerce(value, hints[name], from_text=True)
            except ValueError:
                raise CurriculumError(f"strategy {cls.name!r}: setting {name} takes a "
                                      f"{type(fields[name].default).__name__}, got {value!r}") from None
        try:
            return cls(cls.Config(**values))
        except ValueError as exc:
            raise CurriculumError(f"strategy {cls.name!r}: {exc}") from exc

    @property
    def recent(self) -> int:
        """How many of a task's latest scored steps its signals are read over."""
        return int(getattr(self.config, "recent", 3))

    def facts(self, store, params: SignalParams) -> pl.DataFrame:
        """One row per task of ``task_curriculum_with`` at ``params`` (see its file for the columns)."""
        return store.sql(FACTS_SQL, {**params.bind(), "recent": self.recent})

    @abstractmethod
    def weigh(self, facts: pl.DataFrame) -> StrategyResult:
        """Per-task weights from the facts, one row per fact row, in the same order."""


def load_strategy(name: str, settings: Mapping[str, Any] | None = None) -> CurriculumStrategy:
    """The registered strategy ``name``, configured from its settings (typed values or NAME=VALUE strings)."""
    return STRATEGIES.build(name, settings)


def config_help(cls: type[CurriculumStrategy]) -> list[tuple[str, Any, str]]:
    """(field, default, help) for each setting of a strategy."""
    return [(f.name, f.default, help_of(f)) for f in dataclasses.fields(cls.Config)]


def check_positive(name: str, value: float, *, allow_zero: bool = True) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value}")
