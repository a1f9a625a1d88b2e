"""The signal constants: the one place their names, defaults, ranges and help are written.

``SignalParams`` is what every reader of the signals takes (the summary, patterns, weights, drift, the
report). The run's ``[signals]`` section, ``DriftParams`` and the commands' options build their fields from
it (``signal_setting``, ``SIGNAL_DEFAULTS``), and the SQL macros' default arguments (``sql/views/*_with.sql``)
are checked against it by ``tests/test_signal_defaults.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from coevolve_engine.core.settings import help_of, setting

#: forgetting's two forms: a step's mean score (group), or each failed rollout (trajectory, the paper's)
FORGETTING_FORMS = ("group", "trajectory")


@dataclass(frozen=True)
class SignalParams:
    """The constants of the three signals (forgetting, boundary, rare)."""

    threshold: float = setting(0.5, "A rollout succeeds when its reward is at least this (unless its record says "
                                    "otherwise).")
    w: int = setting(3, "Forgetting: compare a task's score with its W most recent earlier scores.")
    theta: float = setting(5.0, "Rare: an action pattern whose share of all patterns so far is below THETA "
                                "percent.")
    min_n: int = setting(50, "Rare: only once at least this many trajectories have an action pattern.")
    forgetting_form: str = setting("group", "Forgetting's form: group (a step's mean score against the W earlier "
                                            "scores; all of the step's rollouts flagged) or trajectory (each "
                                            "failed rollout against them, as the paper states it).")

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.w < 1:
            raise ValueError(f"the forgetting window w must be at least 1, got {self.w}")
        if not 0 < self.theta <= 100:
            raise ValueError(f"theta is a percentage in (0, 100], got {self.theta}")
        if self.min_n < 0:
            raise ValueError(f"min_n must be >= 0, got {self.min_n}")
        if self.forgetting_form not in FORGETTING_FORMS:
            raise ValueError(f"forgetting_form must be one of {', '.join(FORGETTING_FORMS)}, got "
                             f"{self.forgetting_form!r} "
                             "(group: a step's mean score; trajectory: each rollout, as the paper states it)")

    @classmethod
    def of(cls, source: Any) -> "SignalParams":
        """The signal constants of any object that has them as attributes (a run's ``[signals]``, drift's
        parameters)."""
        return cls(**{f.name: getattr(source, f.name) for f in dataclasses.fields(cls)})

    def bind(self) -> dict[str, float | int | str]:
        """The parameters as the signal macros name them (also what runs, weights and patterns record)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: the defaults, for options and function signatures that restate none (``SIGNAL_DEFAULTS.threshold``)
SIGNAL_DEFAULTS = SignalParams()
_FIELDS = {f.name: f for f in dataclasses.fields(SignalParams)}


def signal_help(name: str) -> str:
    """The one-line help of the signal constant ``name``."""
    return help_of(_FIELDS[name])


def signal_setting(name: str) -> Any:
    """A settings field for the signal constant ``name`` (its default and help), for a class that carries the
    constants among settings of its own."""
    return setting(getattr(SIGNAL_DEFAULTS, name), signal_help(name))
