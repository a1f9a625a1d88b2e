"""What every phase of a run is given: the store, the configuration, the environment, and where lines go."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.loop.config import RunConfig
from coevolve_engine.display.progress import detail
from coevolve_engine.core.registry import PluginContext
from coevolve_engine.core.store import Store

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.environment import Environment
    from coevolve_engine.models.embeddings import Embedder
    from coevolve_engine.patterns.find import PreparedPatterns
    from coevolve_engine.synthesis.candidates import Proposal


class RunError(CoevolveError):
    """The loop cannot go on as configured (the message says what to change)."""


def phase_label(round_: int, phase: str) -> str:
    """How a phase's lines start: ``round 2 · patterns  ``."""
    return f"round {round_} · {phase:<10}"


@dataclass
class RunContext:
    db: Path
    config: RunConfig
    wait: float
    echo: Callable[[str], None] = print
    #: the sentence embedder, loaded by the first patterns phase and kept for the run
    embedder: Embedder | None = None
    #: the patterns phase's clustering (its work), written by its commit once the store is held for writing
    prepared: PreparedPatterns | None = None
    #: the synthesize phase's candidates (its work), stored by its commit with the 'finished' mark
    proposal: Proposal | None = None
    _environment: Environment | None = field(default=None, repr=False)

    def store(self, read_only: bool = False) -> Store:
        return Store(self.db, read_only=read_only, create=False, wait=self.wait)

    @property
    def environment(self) -> Environment:
        """The run's environment, built once (``env`` with ``env_options``)."""
        if self._environment is None:
            self._environment = load_environment(self.config.env, **self.config.env_options)
        return self._environment

    def plugins(self) -> PluginContext:
        """What a plugin the run builds is given beside its options (``Registry.build``)."""
        return PluginContext(store_path=self.db, env=self.config.env, environment=self.environment,
                             seed=self.config.seed, wait=self.wait)

    def detail(self, label: str, line: str) -> None:
        """A detail line of a phase (the log, or the screen with --verbose)."""
        detail(self.echo, f"{label} {line}")
