"""Environments: where tasks run as episodes, and the registry that names them.

Built-in environments register here through the same ``Registry.register`` call a plugin would use; third
parties add theirs through the ``coevolve_engine.environments`` entry-point group::

    [project.entry-points."coevolve_engine.environments"]
    myenv = "mypackage.env:MyEnvironment"

``load_environment("bfcl")`` imports the class only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from coevolve_engine.core.environment import (
    Environment,
    Episode,
    Observation,
    Score,
    SpecError,
    ToolCall,
)
from coevolve_engine.core.registry import Registry

ENVIRONMENTS = Registry(
    "environment", entry_point_group="coevolve_engine.environments",
    unknown_hint=("An environment implements the contract coevolve_engine.core.environment.Environment and comes "
                  "from a package that declares it in the entry-point group coevolve_engine.environments "
                  "(pip install it); see docs/environments.md and examples/counter-env"))

ENVIRONMENTS.register(
    "bfcl",
    "coevolve_engine.adapters.environments.bfcl:BFCLEnvironment",
    install_hint=(
        "pip install 'coevolve-engine[bfcl]' && pip install --no-deps bfcl-eval==2026.3.23"
    ),
    description="Berkeley Function Calling Leaderboard: multi-turn API tasks and single-turn AST tasks, offline.",
)
ENVIRONMENTS.register(
    "calc",
    "coevolve_engine.adapters.environments.calc:CalcEnvironment",
    install_hint="pip install coevolve-engine",
    description="Procedural register-machine tool tasks (add/sub/mul on x) for tiny policies on a CPU.",
)


def load_environment(name: str, **options: Any) -> Environment:
    """An instance of the environment registered as ``name``, built with ``options`` (``ENVIRONMENTS.build``)."""
    return ENVIRONMENTS.build(name, options)


__all__ = [
    "ENVIRONMENTS",
    "Environment",
    "Episode",
    "Observation",
    "Score",
    "SpecError",
    "ToolCall",
    "load_environment",
]
