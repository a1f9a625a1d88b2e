"""The SQL macros' default arguments are the defaults the Python side has for the same meaning.

Every ``CREATE OR REPLACE MACRO name(param := value, ...)`` in ``sql/views/`` is read from the file, as are the
defaults its header comment states (``-- name(param := value): ...`` and ``... at the defaults w = 3``); each is
checked against its one home: ``SignalParams`` for the signal constants, and the settings named in ``HOMES``
for the few macro parameters that are not signal constants. A default with no home, or one that differs, fails
naming the file and the parameter.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from coevolve_engine.core.signal_params import SIGNAL_DEFAULTS, SignalParams
from coevolve_engine.curriculum.coevolve import CoevolveConfig
from coevolve_engine.drift import DriftParams
from coevolve_engine.synthesis import contamination

VIEWS = Path(__file__).resolve().parent.parent / "sql" / "views"
SIGNALS = {f.name: getattr(SIGNAL_DEFAULTS, f.name) for f in dataclasses.fields(SignalParams)}
#: (macro, parameter) -> (the default's home, as the failure names it; its value), for what is not a signal constant
HOMES = {
    ("contamination_with", "threshold"): ("synthesis.contamination.DEFAULT_THRESHOLD", contamination.DEFAULT_THRESHOLD),
    ("drift_diversity_with", "k"): ("DriftParams.k", DriftParams().k),
    ("drift_diversity_with", "embedding_model"): ("DriftParams.embedding_model", DriftParams().embedding_model),
    ("task_curriculum_with", "recent"): ("CoevolveConfig.recent", CoevolveConfig().recent),
}

MACRO = re.compile(r"CREATE\s+OR\s+REPLACE\s+MACRO\s+(\w+)\s*\((.*?)\)\s*AS\s+TABLE", re.S | re.I)
PARAMETER = re.compile(r"(\w+)\s*:=\s*('(?:[^']|'')*'|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
STATED = re.compile(r"at the defaults ((?:\w+ = [-+\d.]+(?:, )?)+)")


def _value(literal: str):
    if literal.startswith("'"):
        return literal[1:-1].replace("''", "'")
    return float(literal)


def _comment(text: str) -> str:
    """The file's leading comment lines, joined (a header may continue on the next line)."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def declared_defaults(path: Path) -> list[tuple[str, str, str, object]]:
    """(where, macro, parameter, value) for every default the file declares or its header states."""
    text = path.read_text(encoding="utf-8")
    found = []
    for macro, arguments in MACRO.findall(text):
        found += [("macro", macro, name, _value(v)) for name, v in PARAMETER.findall(arguments)]
    header = _comment(text)
    for macro, arguments in re.findall(r"^(\w+)\((.*?)\):", header):
        found += [("header", macro, name, _value(v)) for name, v in PARAMETER.findall(arguments)]
    stated = re.search(r"(\w+)\(\) at the defaults ", header)
    for match in STATED.finditer(header):
        for name, v in re.findall(r"(\w+) = ([-+\d.]+)", match.group(1)):
            found.append(("header", stated.group(1) if stated else path.stem, name, float(v)))
    return found


def home_of(macro: str, name: str) -> tuple[str, object] | None:
    if (macro, name) in HOMES:
        return HOMES[macro, name]
    if name in SIGNALS:
        return f"SignalParams.{name}", SIGNALS[name]
    return None


def mismatches(path: Path) -> list[str]:
    wrong = []
    for where, macro, name, value in declared_defaults(path):
        home = home_of(macro, name)
        shown = f"sql/views/{path.name}: {macro}'s {name} (its {where})"
        if home is None:
            wrong.append(f"{shown} defaults to {value!r}, a parameter with no home in the Python settings; add it "
                         "to the test's HOMES with the setting it must equal")
        elif value != home[1]:
            wrong.append(f"{shown} defaults to {value!r}, but {home[0]} is {home[1]!r}")
    return wrong


def test_the_scan_reads_the_macros_defaults():
    # so the check below cannot pass by reading nothing
    flagged = declared_defaults(VIEWS / "flagged_trajectories_with.sql")
    assert ("macro", "flagged_trajectories_with", "forgetting_form", "group") in flagged
    assert ("macro", "flagged_trajectories_with", "min_n", 50.0) in flagged
    assert ("header", "flagged_trajectories_with", "w", 3.0) in flagged
    assert ("header", "forgetting_with", "threshold", 0.5) in declared_defaults(VIEWS / "forgetting.sql")
    macros = {macro for path in VIEWS.glob("*.sql") for _, macro, _, _ in declared_defaults(path)}
    assert macros == {path.stem for path in VIEWS.glob("*_with.sql")}  # every *_with macro has defaults


@pytest.mark.parametrize("path", sorted(VIEWS.glob("*.sql")), ids=lambda p: p.name)
def test_sql_defaults_are_the_python_defaults(path):
    wrong = mismatches(path)
    assert not wrong, "\n".join(wrong)


def test_a_changed_default_is_named(tmp_path):
    changed = tmp_path / "forgetting_with.sql"
    changed.write_text((VIEWS / "forgetting_with.sql").read_text(encoding="utf-8").replace(
        "MACRO forgetting_with(w := 3", "MACRO forgetting_with(w := 4"), encoding="utf-8")
    assert mismatches(changed) == ["sql/views/forgetting_with.sql: forgetting_with's w (its macro) defaults to 4.0, "
                                   "but SignalParams.w is 3"]
    orphan = tmp_path / "orphan_with.sql"
    orphan.write_text("CREATE OR REPLACE MACRO orphan_with(depth := 2) AS TABLE SELECT depth;\n", encoding="utf-8")
    assert "orphan_with's depth (its macro) defaults to 2.0, a parameter with no home" in mismatches(orphan)[0]
