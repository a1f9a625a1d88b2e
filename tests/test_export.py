"""Exporting a round's weighted task set for verl (Parquet) and OpenRLHF (JSON lines), and the verl sampler."""

from __future__ import annotations

import json
import sys
import types
from collections import Counter

import datasets
import polars as pl
import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.trainers.export import ExportError, export_round
from coevolve_engine.trainers.verl_sampler import SamplerConfigError, WeightedTaskSampler, weighted_sampler_class

# Specs with nested objects, lists, unicode and a key order that is not sorted: they must come back exactly. Their
# environments are not installed, so their rows are the task's prompt alone (no episode opening).
TASKS = [
    {"task_id": "t-a", "env": "notes", "prompt": "List the files.",
     "spec": {"zeta": 1, "alpha": {"turns": [["ls"]], "path": "/tmp"}, "calls": ["ls()"]}},
    {"task_id": "t-b", "env": "notes", "prompt": "Écris « bonjour ».",
     "spec": {"b": [1.5, None, True], "a": "x"}},
    {"task_id": "t-c", "env": "toy", "prompt": "Add 2 and 3.", "spec": {"x": 2, "y": 3}},
    {"task_id": "t-d", "env": "toy", "prompt": "Never drawn.", "spec": {}},
]
WEIGHTS = {"t-a": 0.5, "t-b": 2.0, "t-c": 1.5, "t-d": 0.0}


def ordered(text: str):
    """JSON text parsed with its key order kept, so equality checks the order too."""
    return json.loads(text, object_pairs_hook=lambda pairs: pairs)


@pytest.fixture
def tasks_store(store):
    store.add_records("tasks", TASKS, label="tasks")
    return store


def test_verl_parquet_reads_back_with_datasets(tasks_store, tmp_path):
    report = export_round(tasks_store, 2, "verl", tmp_path / "out", weights=WEIGHTS)
    assert (report.rows, report.left_out, report.weights_source) == (3, 1, "given")
    rows = datasets.Dataset.from_parquet(str(report.data_file), cache_dir=str(tmp_path / "cache"))
    assert set(rows.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    by_id = {task["task_id"]: task for task in TASKS}
    assert [row["extra_info"]["task_id"] for row in rows] == ["t-a", "t-b", "t-c"]
    for index, row in enumerate(rows):
        task = by_id[row["extra_info"]["task_id"]]
        assert row["data_source"] == f"coevolve/{task['env']}"
        assert row["prompt"] == [{"role": "user", "content": task["prompt"]}]
        assert row["ability"] == "agent"
        assert row["reward_model"] == {"style": "rule", "ground_truth": task["task_id"]}
        extra = row["extra_info"]
        assert (extra["index"], extra["weight"], extra["split"], extra["env"]) == (
            index, WEIGHTS[task["task_id"]], "train", task["env"])
        assert ordered(extra["spec"]) == ordered(json.dumps(task["spec"]))
        assert json.loads(extra["spec"]) == task["spec"]
        assert extra["interaction_kwargs"] == {"name": "coevolve", "task_id": task["task_id"],
                                               "env": task["env"], "spec": extra["spec"]}
    manifest = json.loads(report.manifest.read_text())
    assert manifest["rows"] == [{"index": 0, "task_id": "t-a", "weight": 0.5},
                                {"index": 1, "task_id": "t-b", "weight": 2.0},
                                {"index": 2, "task_id": "t-c", "weight": 1.5}]
    assert (manifest["round"], manifest["format"], manifest["data_file"]) == (2, "verl", "train.parquet")


def test_verl_tools_kwargs_and_load_dataset(tasks_store, tmp_path):
    report = export_round(tasks_store, 0, "verl", tmp_path, weights={"t-c": 1.0}, tools=("calculator",),
                          interaction=None)
    rows = datasets.load_dataset("parquet", data_files=str(report.data_file), cache_dir=str(tmp_path / "c"))["train"]
    extra = rows[0]["extra_info"]
    assert "interaction_kwargs" not in extra
    assert extra["need_tools_kwargs"] is True
    assert extra["tools_kwargs"] == {"calculator": {"create_kwargs": {
        "task_id": "t-c", "env": "toy", "spec": json.dumps(TASKS[2]["spec"])}}}


def test_openrlhf_jsonl_reads_back_with_datasets(tasks_store, tmp_path):
    report = export_round(tasks_store, 1, "openrlhf", tmp_path, weights=pl.DataFrame(
        {"task_id": list(WEIGHTS), "weight": list(WEIGHTS.values())}))
    assert report.data_file.name == "train.jsonl"
    rows = datasets.load_dataset("json", data_files=str(report.data_file), cache_dir=str(tmp_path / "c"))["train"]
    assert rows.num_rows == 3
    for index, row in enumerate(rows):
        task = next(t for t in TASKS if t["task_id"] == row["task_id"])
        assert row["input"] == [{"role": "user", "content": task["prompt"]}]
        assert (row["index"], row["weight"], row["datasource"]) == (index, WEIGHTS[task["task_id"]],
                                                                    f"coevolve/{task['env']}")
        label = ordered(row["label"])
        assert label[:2] == [("task_id", task["task_id"]), ("env", task["env"])]
        assert label[2] == ("spec", ordered(json.dumps(task["spec"])))


def test_weights_from_the_task_weights_table(tasks_store, tmp_path):
    if not tasks_store.scalar("select count(*) from duckdb_tables() where table_name = 'task_weights'"):
        pytest.skip("task_weights (migration 004) is not in this checkout")
    for task_id, weight in (("t-a", 1.0), ("t-b", 0.0), ("t-c", 3.0)):
        tasks_store.execute("insert into task_weights (round, task_id, weight, strategy) values (1, $t, $w, 's')",
                            {"t": task_id, "w": weight})
    report = export_round(tasks_store, 2, "verl", tmp_path, weights_from_round=1)
    assert (report.rows, report.left_out, report.weights_source) == (2, 1, "task_weights round 1")
    with pytest.raises(ExportError, match=r"no weights for round 2 \(rounds with weights: 1\)"):
        export_round(tasks_store, 2, "verl", tmp_path)


@pytest.mark.parametrize("weights, message", [
    ({"t-a": 1.0, "nope": 2.0}, "not in the store: 'nope'"),
    ({"t-a": -1.0}, "finite number >= 0"),
    ({"t-a": float("nan")}, "finite number >= 0"),
    ({"t-a": 0.0}, "no task has a weight above 0"),
    ([("t-a", 1.0)], "must be a mapping"),
])
def test_bad_weights_are_refused(tasks_store, tmp_path, weights, message):
    with pytest.raises(ExportError, match=message):
        export_round(tasks_store, 0, "verl", tmp_path / "o", weights=weights)
    assert not (tmp_path / "o").exists()


def test_cli_export_uniform_and_missing_weights(db_path, tmp_path):
    from coevolve_engine.core.store import Store

    with Store(db_path) as store:
        store.add_records("tasks", TASKS, label="tasks")
    runner = CliRunner()
    result = runner.invoke(cli, ["export", "--db", str(db_path), "--round", "0", "--layout", "openrlhf",
                                 "-o", str(tmp_path / "x"), "--uniform"])
    assert result.exit_code == 0, result.output
    assert "4 tasks (weights from uniform)" in result.output
    lines = (tmp_path / "x" / "train.jsonl").read_text().splitlines()
    assert [json.loads(line)["weight"] for line in lines] == [1.0] * 4
    result = runner.invoke(cli, ["export", "--db", str(db_path), "--round", "7", "--layout", "verl",
                                 "-o", str(tmp_path / "y")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "round 7" in result.output and "--uniform" in result.output
    help_text = runner.invoke(cli, ["export", "--help"]).output
    assert "data.custom_cls.name=WeightedRLHFDataset" in help_text and "--label_key label" in help_text
    assert "data.sampler" not in help_text  # verl 0.9 refuses that section (bench/verl_check.py)


def test_cli_export_defaults_to_the_latest_round_with_weights(db_path, tmp_path):
    from coevolve_engine.core.store import Store

    with Store(db_path) as store:
        store.add_records("tasks", TASKS, label="tasks")
    runner = CliRunner()
    export = ["export", "--db", str(db_path), "--layout", "openrlhf"]
    result = runner.invoke(cli, [*export, "-o", str(tmp_path / "none")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no weights yet" in result.output and "--uniform" in result.output and not (tmp_path / "none").exists()
    result = runner.invoke(cli, [*export, "-o", str(tmp_path / "uniform"), "--uniform"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "uniform" / "manifest.json").read_text())["round"] == 0
    for _ in range(2):   # rounds 0 and 1, as `weights` numbers them by default
        assert runner.invoke(cli, ["weights", "--strategy", "uniform", "--db", str(db_path)]).exit_code == 0
    result = runner.invoke(cli, [*export, "-o", str(tmp_path / "latest")])
    assert result.exit_code == 0, result.output
    assert "weights from task_weights round 1" in result.output
    assert json.loads((tmp_path / "latest" / "manifest.json").read_text())["round"] == 1


def test_verl_rows_of_bfcl_tasks_open_the_episode_and_name_verls_configs(db_path, tmp_path):
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.adapters.agents.player import Play
    from coevolve_engine.core.store import Store

    runner = CliRunner()
    result = runner.invoke(cli, ["tasks", "import", "bfcl", "--category", "multi_turn_miss_func", "--limit", "2",
                                 "--split", "train", "--db", str(db_path), "--create"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["export", "--db", str(db_path), "--round", "0", "--layout", "verl", "--uniform",
                                 "-o", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "x"
    assert "python3 -m verl.trainer.main_ppo" in result.output
    for override in (f"actor_rollout_ref.rollout.multi_turn.tool_config_path={out / 'tool_config.json'}",
                     f"actor_rollout_ref.rollout.agent.agent_loop_config_path={out / 'agent_loop.json'}",
                     "reward.custom_reward_function.path=pkg://coevolve_engine.trainers.verl_bfcl",
                     "actor_rollout_ref.rollout.multi_turn.enable=True",
                     "+data.apply_chat_template_kwargs.enable_thinking=False"):
        assert override in result.output, override
    rows = datasets.Dataset.from_parquet(str(out / "train.parquet"), cache_dir=str(tmp_path / "cache"))
    environment = load_environment("bfcl")
    with Store(db_path, read_only=True) as store:
        specs = dict(store.execute("SELECT task_id, CAST(spec AS VARCHAR) FROM tasks").fetchall())
    configured = {entry["tool_schema"]["function"]["name"]: entry
                  for entry in json.loads((out / "tool_config.json").read_text())["tools"]}
    for row in rows:
        extra = row["extra_info"]
        play = Play(environment.start(extra["task_id"], json.loads(specs[extra["task_id"]])))
        # the opening is the episode player's: its first user turn, and the tools shown at it
        assert row["prompt"] == play.messages and json.loads(extra["tools"]) == play.tools
        assert row["agent_name"] == "coevolve_episode"
        # every function the episode can show (the held-out ones released later too) has a verl tool
        held = {name for names in json.loads(specs[extra["task_id"]])["missed_function"].values() for name in names}
        assert held and held <= set(extra["tools_kwargs"]) and set(extra["tools_kwargs"]) <= set(configured)
        assert not held & {tool["function"]["name"] for tool in play.tools}
        assert extra["tools_kwargs"][next(iter(held))] == {"create_kwargs": {"task_id": extra["task_id"]}}
        play.episode.close()
    assert {entry["class_name"] for entry in configured.values()} == {"coevolve_engine.trainers.verl_bfcl.EpisodeTool"}
    assert json.loads((out / "interaction_config.json").read_text())["interaction"] == [
        {"name": "coevolve", "class_name": "coevolve_engine.trainers.verl_bfcl.EpisodeInteraction", "config": {}}]
    assert json.loads((out / "agent_loop.json").read_text()) == [
        {"name": "coevolve_episode", "_target_": "coevolve_engine.trainers.verl_bfcl.EpisodeAgentLoop",
         "interaction_config_path": str(out / "interaction_config.json"), "max_new_tokens": 256}]


def test_a_task_whose_episode_cannot_start_is_named(store, tmp_path):
    store.add_records("tasks", [{"task_id": "broken", "env": "bfcl", "prompt": "x", "spec": {"kind": "neither"}}],
                      label="tasks")
    with pytest.raises(ExportError, match="task 'broken': its bfcl episode cannot start: .*kind"):
        export_round(store, 0, "verl", tmp_path / "x", uniform=True)
    assert not (tmp_path / "x" / "train.parquet").exists()


# -- the sampler ------------------------------------------------------------------------------------

class FakeRLHFDataset:
    """What the sampler touches of verl's RLHFDataset: a ``dataframe`` (a datasets.Dataset) and a length."""

    def __init__(self, dataframe):
        self.dataframe = dataframe

    def __len__(self):
        return len(self.dataframe)


def test_sampler_reads_weights_from_the_exported_parquet(tasks_store, tmp_path):
    report = export_round(tasks_store, 0, "verl", tmp_path, weights=WEIGHTS)
    frame = datasets.Dataset.from_parquet(str(report.data_file), cache_dir=str(tmp_path / "c"))
    sampler = weighted_sampler_class()(FakeRLHFDataset(frame), {"seed": 7, "sampler": {"num_samples": 40_000}})
    assert sampler.weights == (0.5, 2.0, 1.5)
    counts = Counter(sampler)
    for index, weight in enumerate(sampler.weights):
        assert counts[index] / 40_000 == pytest.approx(weight / 4.0, abs=0.01)


def test_sampler_draws_in_proportion_and_deterministically():
    weights = [1.0, 0.0, 3.0, 6.0]
    rows = [{"extra_info": {"weight": w}} for w in weights]
    config = {"sampler": {"seed": 3, "num_samples": 50_000}}
    first, second = WeightedTaskSampler(rows, config), WeightedTaskSampler(rows, config)
    epoch0 = list(first)
    assert epoch0 == list(second)  # same seed, same draws, in any process
    assert len(epoch0) == len(first) == 50_000
    counts = Counter(epoch0)
    assert counts[1] == 0
    for index, weight in enumerate(weights):
        assert counts[index] / 50_000 == pytest.approx(weight / 10.0, abs=0.01)
    epoch1 = list(first)
    assert epoch1 != epoch0  # a new epoch draws anew ...
    resumed = WeightedTaskSampler(rows, config)
    resumed.load_state_dict({"epoch": 1, "seed": 3})
    assert list(resumed) == epoch1  # ... and a resumed sampler continues where the state says
    assert first.state_dict() == {"epoch": 2, "seed": 3}
    assert list(WeightedTaskSampler(rows, {"seed": 4})) != list(WeightedTaskSampler(rows, {"seed": 5}))


@pytest.mark.parametrize("rows, message", [
    ([{"extra_info": {"weight": 1.0}}, {"extra_info": {}}], "row 1 has extra_info.weight = None"),
    ([{"extra_info": {"weight": -2}}], "finite weight >= 0"),
    ([{"extra_info": {"weight": 0}}], "nothing to draw"),
])
def test_sampler_refuses_rows_without_usable_weights(rows, message):
    with pytest.raises(SamplerConfigError, match=message):
        WeightedTaskSampler(rows)


def test_sampler_becomes_a_verl_abstract_sampler_when_verl_is_there(monkeypatch):
    """verl asserts isinstance(sampler, AbstractSampler); a stand-in module plays verl's here."""
    from torch.utils.data import Sampler

    fake = types.ModuleType("verl.experimental.dataset.sampler")

    class AbstractSampler(Sampler[int]):
        pass

    fake.AbstractSampler = AbstractSampler
    monkeypatch.setitem(sys.modules, "verl.experimental.dataset.sampler", fake)
    cls = weighted_sampler_class()
    sampler = cls([{"extra_info": {"weight": 1.0}}], None)
    assert isinstance(sampler, AbstractSampler) and isinstance(sampler, WeightedTaskSampler)
    assert cls.__name__ == "WeightedSampler" and cls.__module__ == "coevolve_engine.trainers.verl_sampler"


def test_tasks_without_env_or_spec_keep_string_columns(store, tmp_path):
    """All-null columns are typed as strings, so exports of different rounds concatenate in verl."""
    store.add_records("tasks", [{"task_id": "bare"}], label="tasks")
    report = export_round(store, 0, "verl", tmp_path, uniform=True)
    rows = datasets.Dataset.from_parquet(str(report.data_file), cache_dir=str(tmp_path / "c"))
    extra = rows.features["extra_info"]
    assert (extra["env"].dtype, extra["spec"].dtype) == ("string", "string")
    assert rows[0]["data_source"] == "coevolve/unknown" and rows[0]["extra_info"]["spec"] is None
