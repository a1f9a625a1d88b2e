"""Name -> lazily imported class registries, fsspec style.

Every pluggable kind (environments, agents, trainers, synthesizers, curriculum strategies) is one
``Registry``. Built-ins register through the same ``register`` call and the same entry-point group
that third-party plugins use, so nothing distinguishes a built-in from a plugin at lookup time.

    ENVIRONMENTS = Registry("environment", entry_point_group="coevolve_engine.environments")
    ENVIRONMENTS.register("bfcl", "coevolve_engine.adapters.environments.bfcl:BFCLEnvironment",
                          install_hint="pip install --no-deps bfcl-eval==2026.3.23")
    environment = ENVIRONMENTS.build("bfcl", {"categories": ["multi_turn_base"]})

Every kind is built one way: ``build(name, options, context)``. ``options`` are the plugin's own settings (a
TOML table, or command-line options); ``context`` is what the engine knows (the store's path, the environment,
the seed, how long to wait for the store). A class that needs the context defines the classmethod
``from_options(options, context)``; the base classes of every kind define it as ``cls(**options)``, and a
plain callable registered without it is called with the options.

Entry points are read the first time a registry is looked up, never at import time.

A registration may name the modules it needs when used beyond what loading it imports (``requires``: an extra's
packages, such as torch for a trainer whose module imports it lazily); ``load`` refuses it with its install hint
when one is missing, and ``coevolve-engine plugins`` lists it as not ready. A registration read from an entry point
records the distribution that declared it (``package``).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.errors import CoevolveError


#: the distribution of the built-in registrations
BUILT_IN = "coevolve-engine"


class RegistryError(CoevolveError, LookupError):
    """An unknown name, or a registered class that cannot be imported."""


@dataclass(frozen=True)
class Registration:
    """Where a named implementation lives and what to install when it is missing."""

    name: str
    target: str  # "package.module:ClassName"
    install_hint: str | None = None
    description: str = ""
    package: str = BUILT_IN  # the distribution it comes from: the engine's own, or the plugin's that declares it
    requires: tuple[str, ...] = ()  # modules it imports when used (not when loaded), checked without importing them

    def missing(self) -> list[str]:
        """The modules of ``requires`` that are not installed."""
        return [module for module in self.requires if importlib.util.find_spec(module) is None]

    def hint(self) -> str:
        """What to install to use it: the registered hint, else the package that declares it."""
        return self.install_hint or f"pip install {self.package}"


@dataclass(frozen=True)
class PluginContext:
    """What the engine hands a plugin it builds, beside the plugin's own options."""

    store_path: Path | None = None  # the store the plugin may read (the engine writes what it returns)
    env: str | None = None  # the registered name of the run's environment
    environment: Any = None  # the environment instance, where one is already built
    seed: int = 0
    wait: float = DEFAULT_WAIT_SECONDS  # seconds a store open waits for another process's write


class Registry:
    """A mapping from names to lazily imported implementations."""

    def __init__(self, kind: str, entry_point_group: str | None = None, *, unknown_hint: str = "") -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.unknown_hint = unknown_hint  # what an unknown name's error adds: how to make one (contract, docs)
        self._entries: dict[str, Registration] = {}
        self._entry_points_read = False

    def register(
        self,
        name: str,
        target: str,
        *,
        install_hint: str | None = None,
        description: str = "",
        requires: tuple[str, ...] = (),
        replace: bool = False,
    ) -> None:
        """Register ``target`` ("module:attr") under ``name``; refuse silent overrides. ``requires``: the modules
        it imports when used, beyond what loading it imports (an extra's packages)."""
        if ":" not in target:
            raise ValueError(f"{self.kind} target {target!r} must look like 'package.module:ClassName'")
        existing = self._entries.get(name)
        if existing is not None and existing.target != target and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered to {existing.target}; "
                "pass replace=True to override it"
            )
        self._entries[name] = Registration(name, target, install_hint, description, requires=tuple(requires))

    def _read_entry_points(self) -> None:
        if self._entry_points_read or self.entry_point_group is None:
            return
        self._entry_points_read = True
        for ep in entry_points(group=self.entry_point_group):
            if ep.name not in self._entries:
                dist = getattr(ep, "dist", None)
                package = dist.metadata["Name"] if dist is not None else "(unknown package)"
                self._entries[ep.name] = Registration(ep.name, ep.value, package=package)

    @property
    def entries(self) -> Mapping[str, Registration]:
        """A read-only view of every registration, plugins included."""
        self._read_entry_points()
        return MappingProxyType(self._entries)

    def names(self) -> list[str]:
        return sorted(self.entries)

    def load(self, name: str) -> Any:
        """Import and return the object registered under ``name``."""
        entries = self.entries
        if name not in entries:
            valid = ", ".join(sorted(entries)) or "(none registered)"
            hint = f". {self.unknown_hint}" if self.unknown_hint else ""
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {valid}{hint}")
        reg = entries[name]
        missing = reg.missing()
        if missing:
            raise RegistryError(f"{self.kind} {name!r} needs a package that is not installed (no module named "
                                f"{', '.join(missing)}); install it with: {reg.hint()}")
        module_name, _, attr = reg.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            said = str(exc)  # a module that says what to install itself is not repeated
            hint = f"; install it with: {reg.install_hint}" if reg.install_hint and "pip install" not in said else ""
            raise RegistryError(
                f"{self.kind} {name!r} needs a package that is not installed ({exc}){hint}"
            ) from exc
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise RegistryError(f"{self.kind} {name!r}: {module_name} has no attribute {attr!r}") from exc

    def build(self, name: str, options: Mapping[str, Any] | None = None, context: PluginContext | None = None) -> Any:
        """An instance of ``name`` built from its ``options`` and the engine's ``context`` (see the module doc)."""
        target = self.load(name)
        options = dict(options or {})
        from_options = getattr(target, "from_options", None)
        if from_options is None:
            return target(**options)
        return from_options(options, context if context is not None else PluginContext())
