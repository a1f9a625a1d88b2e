"""The round spec the run's train phase hands a launched training: typed, and read back as it was written."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest

from coevolve_engine.loop.train_round import SpecError, TrainSpec

SPEC = TrainSpec(db="/runs/store.duckdb", wait=30.0, env="calc", env_options={"n": 3}, round=2, trainer="trl-grpo",
                 model="/ckpt/round-1", resume_from="/ckpt/round-1", reference_model="/models/start",
                 options={"group_size": 4, "max_steps": 0}, output_dir="/ckpt/round-2", seed=7, start_step=20,
                 steps=10, schedule_steps=40, policy_name="policy", steps_per_write=1, label="run round 2 train",
                 echo_label="round 2")


def test_a_spec_survives_the_file_between_processes():
    launched = dataclasses.replace(SPEC, run_pid=1234)
    assert TrainSpec.from_json(launched.to_json()) == launched
    assert TrainSpec.from_json(SPEC.to_json()).run_pid is None


def test_no_field_but_the_launch_has_a_default():
    # the run decides every value: a default here would be a second home for a setting of the run's config
    defaulted = [f.name for f in dataclasses.fields(TrainSpec) if f.default is not dataclasses.MISSING
                 or f.default_factory is not dataclasses.MISSING]
    assert defaulted == ["run_pid"]


@pytest.mark.parametrize("change, said", [
    (lambda d: d.pop("steps"), "spec.json: missing field(s) steps"),
    (lambda d: d.update(groups_per_step=4), "spec.json: unknown field(s) groups_per_step"),
])
def test_a_spec_from_another_version_is_refused_by_name(change, said):
    data = json.loads(SPEC.to_json())
    change(data)
    with pytest.raises(SpecError, match=re.escape(said)):
        TrainSpec.from_json(json.dumps(data), "spec.json")
    with pytest.raises(SpecError, match="spec.json: not JSON"):
        TrainSpec.from_json("{", "spec.json")


def test_the_warm_up_and_the_rounds_train_through_one_path():
    # a trainer's context is built in train_round alone: the warm-up and every round (in process or launched)
    # reach the trainer the same way, so what one is given the other is given
    engine = Path(__file__).resolve().parents[1] / "engine"
    builders = []
    for path in sorted(engine.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                    "TrainContext", "build") and _builds_a_trainer(node):
                builders.append(f"{path.relative_to(engine)}:{node.lineno}")
    assert [where.split(":")[0] for where in builders] == ["loop/train_round.py", "loop/train_round.py"], builders


def _builds_a_trainer(node: ast.Call) -> bool:
    """``TrainContext(...)`` or ``TRAINERS.build(...)``."""
    if getattr(node.func, "id", None) == "TrainContext":
        return True
    return isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", None) == "TRAINERS"
