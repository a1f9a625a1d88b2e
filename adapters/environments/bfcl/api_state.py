"""The live state of one multi-turn BFCL task: fresh API instances and the only door into them.

``APIState`` builds its own instance of every class the task declares, loads the task's initial
configuration into it the way bfcl does (``_load_scenario(deepcopy(config), long_context=...)``, skipped for
stateless classes), and then runs ``ToolCall``s against it. A call runs only when:

- its name is a public method (no leading underscore) of one of the declared classes,
- the name is among the tools the caller allows at this point (held-out miss_func tools are not),
- every argument is a plain literal (None, bool, int, float, str, and lists, tuples, dicts of those).

Anything else is refused with an error outcome and nothing runs. An exception raised inside a tool becomes an
error outcome too. Results are rendered as bfcl's executor renders them (strings as is, dicts as JSON, the
rest through ``str``; failures as ``"Error during execution: ..."``) so that bfcl's response checker sees the
same strings it would see in the leaderboard.
"""

from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from coevolve_engine.core.environment import ToolCall
from coevolve_engine.adapters.environments.bfcl.shipped import api_class, is_stateless

_MAX_LITERAL_DEPTH = 32


@dataclass(frozen=True)
class CallOutcome:
    """What one call produced: the result string bfcl would record, and an error when it failed."""

    result: str
    error: str | None = None


def refusal(problem: str) -> CallOutcome:
    """The outcome of a call that was not run."""
    return CallOutcome(f"Error during execution: {problem}", problem)


def render_result(value: Any) -> str:
    """A tool's return value as bfcl's executor records it."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def is_literal(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is built only from None, bool, int, float, str, list, tuple and str-keyed dict."""
    if depth > _MAX_LITERAL_DEPTH:
        return False
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) in (list, tuple):
        return all(is_literal(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(type(key) is str and is_literal(item, depth + 1) for key, item in value.items())
    return False


class ScenarioLoadError(ValueError):
    """A task's initial configuration that its API class cannot load."""


class APIState:
    """Fresh instances of a task's API classes, and safe dispatch of tool calls to their public methods."""

    def __init__(
        self, involved_classes: Sequence[str], initial_config: Mapping[str, Any], long_context: bool
    ) -> None:
        self.instances: dict[str, Any] = {}
        self._owners: dict[str, str] = {}
        for class_name in involved_classes:
            instance = api_class(class_name)()
            if not is_stateless(class_name):
                scenario = copy.deepcopy(initial_config.get(class_name, {}))
                try:
                    instance._load_scenario(scenario, long_context=long_context)
                except Exception as exc:  # the config is data from a spec; any failure is the spec's
                    raise ScenarioLoadError(
                        f"initial_config of {class_name} does not load: {type(exc).__name__}: {exc}"
                    ) from exc
            self.instances[class_name] = instance
            # Later classes win a shared method name, as in bfcl's executor.
            for method_name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self._owners[method_name] = class_name

    def owner(self, method_name: str) -> str | None:
        """The declared class whose public method ``method_name`` is, or None."""
        return self._owners.get(method_name)

    def call(self, call: ToolCall, allowed: Collection[str] | None = None) -> CallOutcome:
        """Run ``call`` if it passes every rule; ``allowed`` limits the tool names (None: all public methods)."""
        problem = self._refusal_reason(call, allowed)
        if problem is not None:
            return refusal(problem)
        method = getattr(self.instances[self._owners[call.name]], call.name)
        try:
            value = method(**copy.deepcopy(call.arguments))
        except Exception as exc:  # a tool failing is an observation, never a crash of the episode
            return CallOutcome(f"Error during execution: {exc}", f"{type(exc).__name__}: {exc}")
        result = render_result(value)
        error = value.get("error") if type(value) is dict and isinstance(value.get("error"), str) else None
        return CallOutcome(result, error)

    def _refusal_reason(self, call: ToolCall, allowed: Collection[str] | None) -> str | None:
        name = call.name
        if not isinstance(name, str) or not name:
            return f"tool name must be a non-empty string, got {name!r}"
        if name.startswith("_"):
            return f"{name!r} is private; only public methods of the task's classes are tools"
        if name not in self._owners:
            classes = ", ".join(self.instances) or "(none)"
            return f"unknown tool {name!r}: no public method of that name in the task's classes ({classes})"
        if allowed is not None and name not in allowed:
            return f"tool {name!r} is not available in this turn"
        if not isinstance(call.arguments, dict):
            return f"{name}: arguments must be an object, got {type(call.arguments).__name__}"
        for key, value in call.arguments.items():
            if not isinstance(key, str) or not key.isidentifier():
                return f"{name}: argument name {key!r} is not an identifier"
            if not is_literal(value):
                return f"{name}: argument {key!r} is not a literal ({type(value).__name__})"
        return None
