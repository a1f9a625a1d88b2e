"""Every registered plugin of every kind, where it comes from, and whether it can be used here.

    for row in installed_plugins():
        print(row.kind, row.name, row.package, row.ready, row.problem)

The registries are the ones the engine builds from (environments, synthesizers, trainers, curriculum strategies,
agents, rollout importers), entry points included, so a plugin a package declares is listed exactly when the
engine would find it. A plugin is ready when its module imports and the modules it declares it needs when used
(``Registration.requires``) are installed; otherwise ``problem`` says what is missing and ``install`` what to
install.
"""

from __future__ import annotations

from dataclasses import dataclass

from coevolve_engine.adapters.agents import AGENTS
from coevolve_engine.adapters.environments import ENVIRONMENTS
from coevolve_engine.adapters.importers import IMPORTERS
from coevolve_engine.core.registry import Registry, RegistryError
from coevolve_engine.curriculum import STRATEGIES
from coevolve_engine.synthesis.candidates import SYNTHESIZERS
from coevolve_engine.trainers import TRAINERS

#: kind -> its registry, in the order a newcomer meets them
REGISTRIES: dict[str, Registry] = {
    "environment": ENVIRONMENTS,
    "synthesizer": SYNTHESIZERS,
    "trainer": TRAINERS,
    "curriculum strategy": STRATEGIES,
    "agent": AGENTS,
    "rollout importer": IMPORTERS,
}


@dataclass(frozen=True)
class PluginRow:
    """One registered plugin, as ``coevolve-engine plugins`` lists it."""

    kind: str
    name: str
    package: str  # the distribution that registers it (coevolve-engine for the built-ins)
    ready: bool  # its module imports and what it needs when used is installed
    problem: str  # why it is not ready ("" when it is)
    install: str  # what to install to use it
    target: str  # module:attribute
    description: str


def installed_plugins(kinds: tuple[str, ...] | None = None) -> list[PluginRow]:
    """A row per registered plugin of ``kinds`` (default: every kind), kind by kind, names sorted."""
    rows = []
    for kind, registry in REGISTRIES.items():
        if kinds is not None and kind not in kinds:
            continue
        for name, registration in sorted(registry.entries.items()):
            try:
                registry.load(name)
                problem = ""
            except RegistryError as exc:
                problem = str(exc)
            rows.append(PluginRow(kind, name, registration.package, not problem, problem, registration.hint(),
                                  registration.target, registration.description))
    return rows
