"""The distribution ships what the code needs: every subpackage, the SQL files and the sample."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

import make_sample

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"engine": "coevolve_engine", "trainers": "coevolve_engine.trainers",
           "adapters": "coevolve_engine.adapters", "sql": "coevolve_engine.sql"}


def test_every_python_package_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    for top, package in MAPPING.items():
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / top).parts
            name = ".".join((package, *relative))
            assert name in listed, f"{name} ({init.parent}) is missing from [tool.setuptools] packages"


def test_sql_and_sample_are_package_data():
    sql = files("coevolve_engine.sql")
    assert any(p.name.endswith(".sql") for p in (sql / "migrations").iterdir())
    assert any(p.name.endswith(".sql") for p in (sql / "views").iterdir())
    for name, text in make_sample.render().items():
        assert (files("coevolve_engine.data") / name).read_text(encoding="utf-8") == text, (
            f"{name} is out of date: run python tests/make_sample.py")


def test_readme_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in ci.splitlines() if "pytest" in line)
    assert test_command in readme
    assert "coevolve-engine init --sample" in readme


def test_the_trainers_install_hints_ask_for_the_trl_the_project_requires():
    from coevolve_engine.trainers import TRAINERS

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (required,) = [spec for spec in config["project"]["optional-dependencies"]["demo"] if spec.startswith("trl")]
    hints = {name: reg.install_hint for name, reg in TRAINERS.entries.items() if "trl" in (reg.install_hint or "")}
    assert hints, "no trainer's install hint names trl"
    for name, hint in hints.items():
        assert f'"{required}"' in hint, f"trainer {name}: {hint!r} does not ask for {required}"
