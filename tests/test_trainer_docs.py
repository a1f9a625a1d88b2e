"""docs/trainers.md states the contract of a trainer of one's own as the code has it: each table of
"A trainer of your own" names exactly the fields of the dataclass it describes, in order, or members that exist,
every public member of each class is named in its section, and the section's Python snippet runs as written."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from coevolve_engine.core.rollout import Rollout
from coevolve_engine.trainers import BatchSource, TrainContext, Trainer, TrainReport, TrajectorySink

PAGE = Path(__file__).resolve().parent.parent / "docs" / "trainers.md"


def section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n### `{title}`\n")
    end = text.find("\n#", start + 1)
    return text[start:end if end != -1 else None]


def table_names(text: str) -> list[str]:
    """The first column of the section's table: `name`, `name(args)` or `a`, `b` (the class's name dropped)."""
    names = []
    for cell in re.findall(r"^\| (.+?) \|", text, re.M):
        for code in re.findall(r"`([^`]+)`", cell):
            names.append(code.split("(")[0].split(".")[-1])
    return names


@pytest.mark.parametrize("cls", [TrainContext, Rollout, TrainReport], ids=lambda c: c.__name__)
def test_each_dataclass_table_names_its_fields_in_order(cls):
    assert table_names(section(cls.__name__)) == [f.name for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("cls,instance", [(Trainer, None), (BatchSource, BatchSource({"t": 1.0})),
                                           (TrajectorySink, None)], ids=lambda c: getattr(c, "__name__", ""))
def test_each_class_table_names_members_that_exist_and_the_section_names_every_public_one(cls, instance):
    text = section(cls.__name__)
    for name in table_names(text):
        declared = hasattr(instance if instance is not None else cls, name) or name in cls.__annotations__
        assert declared, f"{cls.__name__} has no {name}"
    public = {name for klass in cls.__mro__ if klass.__module__.startswith("coevolve_engine")
              for name in vars(klass) if not name.startswith("_")}
    public |= {name for name in getattr(cls, "__annotations__", {}) if not name.startswith("_")}
    missing = sorted(name for name in public if not re.search(rf"[`.]{name}\b", text))
    assert not missing, f"{cls.__name__}: not in the docs: {missing}"


def test_the_batch_source_snippet_runs_as_written():
    (code,) = re.findall(r"```python\n(.*?)```", section("BatchSource"), re.S)
    scope: dict = {}
    exec(compile(code, str(PAGE), "exec"), scope)  # the docs' own code, not model output
    batch = scope["batch"]
    assert len(batch) == 8 and "mul-1" not in batch
    assert [batch[i] for i in (0, 4)] == [batch[3], batch[7]] and len(set(batch)) == 2
