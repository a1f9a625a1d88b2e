"""`coevolve-engine plugins`: every registration of every registry, the package it comes from, and whether it is
ready; a registration whose packages are missing is refused by ``load`` with what to install, and listed as not
ready. (A plugin from another package: tests/test_environment_plugin.py.)"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.core.registry import Registry, RegistryError
from coevolve_engine.plugins.installed import REGISTRIES


def listed(*args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["plugins", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_registration_of_every_kind_is_listed_with_its_package():
    rows = listed()
    expected = {(kind, name) for kind, registry in REGISTRIES.items() for name in registry.names()}
    assert {(r["kind"], r["name"]) for r in rows} == expected
    assert {"environment", "synthesizer", "trainer", "curriculum strategy", "agent"} <= {r["kind"] for r in rows}
    calc = next(r for r in rows if (r["kind"], r["name"]) == ("environment", "calc"))
    assert calc["package"] == "coevolve-engine" and calc["ready"] and calc["problem"] == ""
    assert calc["target"] == "coevolve_engine.adapters.environments.calc:CalcEnvironment"
    grpo = next(r for r in rows if r["name"] == "trl-grpo")
    assert grpo["kind"] == "trainer" and "coevolve-engine[local]" in grpo["install"]


def test_kind_narrows_the_list_and_the_table_has_a_line_a_plugin():
    assert {r["kind"] for r in listed("--kind", "trainer", "--kind", "agent")} == {"trainer", "agent"}
    table = CliRunner().invoke(cli, ["plugins", "--kind", "curriculum strategy"])
    assert table.exit_code == 0, table.output
    lines = [line for line in table.output.splitlines() if line.startswith("| curriculum strategy")]
    assert len(lines) == len(REGISTRIES["curriculum strategy"].names()) and all("| yes" in line for line in lines)


def test_a_plugin_whose_packages_are_missing_is_refused_with_what_to_install(monkeypatch):
    registry = Registry("trainer")
    registry.register("far", "coevolve_engine.curriculum.uniform:UniformStrategy",
                      install_hint="pip install 'far[gpu]'", requires=("json", "no_such_module_anywhere"))
    with pytest.raises(RegistryError) as raised:
        registry.load("far")
    assert "no module named no_such_module_anywhere" in str(raised.value)
    assert "pip install 'far[gpu]'" in str(raised.value) and "json" not in str(raised.value).split("named")[1]
    monkeypatch.setitem(REGISTRIES, "trainer", registry)
    (row,) = listed("--kind", "trainer")
    assert row["name"] == "far" and row["ready"] is False and "no_such_module_anywhere" in row["problem"]
    table = CliRunner().invoke(cli, ["plugins", "--kind", "trainer"])
    assert "| no " in table.output and "Not ready:" in table.output and "pip install 'far[gpu]'" in table.output
