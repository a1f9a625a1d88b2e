"""The registry every pluggable kind is built on."""

from __future__ import annotations

import pytest

from coevolve_engine.core.registry import Registry, RegistryError


def test_lazy_load_and_read_only_view():
    registry = Registry("widget")
    registry.register("json", "json:JSONDecoder", description="stdlib")
    assert registry.load("json").__name__ == "JSONDecoder"
    with pytest.raises(TypeError):
        registry.entries["x"] = None  # type: ignore[index]
    assert registry.names() == ["json"]


def test_unknown_name_lists_the_known_ones():
    registry = Registry("widget")
    registry.register("a", "json:loads")
    registry.register("b", "json:dumps")
    with pytest.raises(RegistryError, match="unknown widget 'c'; known: a, b"):
        registry.load("c")


def test_missing_package_gives_the_install_hint():
    registry = Registry("widget")
    registry.register("ghost", "no_such_module_xyz:Thing", install_hint="pip install ghost")
    with pytest.raises(RegistryError, match="pip install ghost"):
        registry.load("ghost")


def test_no_silent_override():
    registry = Registry("widget")
    registry.register("a", "json:loads")
    registry.register("a", "json:loads")  # the same target again is fine
    with pytest.raises(ValueError, match="already registered"):
        registry.register("a", "json:dumps")
    registry.register("a", "json:dumps", replace=True)
    assert registry.load("a").__name__ == "dumps"


def test_entry_points_are_read_lazily(monkeypatch):
    import coevolve_engine.core.registry as module

    calls = []

    class FakeEntryPoint:
        name, value = "plugin", "json:loads"

    def fake_entry_points(group):
        calls.append(group)
        return [FakeEntryPoint()]

    monkeypatch.setattr(module, "entry_points", fake_entry_points)
    registry = Registry("widget", entry_point_group="coevolve_engine.widgets")
    assert calls == []
    assert registry.load("plugin").__name__ == "loads"
    assert calls == ["coevolve_engine.widgets"]
