"""The round spec the run's train phase hands a launched training: typed, and read back as it was written."""

from __future__ import annotations

import dataclasses
import json
import re

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
