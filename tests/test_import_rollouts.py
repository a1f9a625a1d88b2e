"""Importing a trainer's rollout dumps (verl's trainer.rollout_data_dir) as trajectories."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.adapters.importers import IMPORTERS, ImportOptions, import_rollouts, normalise_reward
from coevolve_engine.cli import cli
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.store import Store

TASKS = [{"task_id": f"task-{i}", "env": "toy", "prompt": f"Do thing {i}.", "spec": {"i": i}} for i in range(5)]
TOOLS = ["ls", "cd", "cat", "grep", "mv"]
OFFSET = 100


def rollouts(seed: int = 0) -> list[dict]:
    """A small run: 5 tasks x 6 steps x 4 rollouts, rewards in {0, 0.5, 1} drifting per task, varied tools."""
    rng = random.Random(seed)
    out = []
    for step in range(1, 7):
        for task in TASKS:
            skill = rng.random()
            for k in range(4):
                reward = rng.choice([0.0, 0.5, 1.0]) if skill > 0.3 else 0.0
                calls = [rng.choice(TOOLS[:2]) if rng.random() < 0.9 else rng.choice(TOOLS)
                         for _ in range(rng.randint(0, 3))]
                output = "thinking " + "".join(
                    f'<tool_call>{{"name": "{c}", "arguments": {{"n": {j}}}}}</tool_call>' for j, c in enumerate(calls))
                out.append({"task_id": task["task_id"], "step": step, "reward": reward, "calls": calls,
                            "input": f"user\n{task['prompt']}\nassistant\n", "output": output + f" #{k}"})
    return out


def write_verl_dump(directory: Path, run: list[dict]) -> Path:
    """verl's layout: DIR/<step>.jsonl, score in [-1, 1] here, ground truth = task id, one reward extra."""
    directory.mkdir(parents=True, exist_ok=True)
    for step in sorted({r["step"] for r in run}):
        lines = [{"input": r["input"], "output": r["output"], "gts": r["task_id"], "score": 2 * r["reward"] - 1,
                  "step": step, "acc": r["reward"] == 1.0} for r in run if r["step"] == step]
        (directory / f"{step}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return directory


def direct_records(run: list[dict]) -> list[dict]:
    """The same rollouts as the engine's own trajectory records."""
    return [{
        "task_id": r["task_id"], "step": r["step"] + OFFSET, "reward": r["reward"],
        "actions": [{"name": c, "arguments": {"n": j}} for j, c in enumerate(r["calls"])],
        "messages": [{"role": "user", "content": r["input"]}, {"role": "assistant", "content": r["output"]}],
    } for r in run]


def signal_rows(store: Store, view: str) -> list[tuple]:
    """A view's rows with trajectory ids replaced by the rollout's content, sorted."""
    frame = store.sql(f"select * from {view}")
    if "trajectory_id" in frame.columns:
        keys = store.sql("select trajectory_id, task_id || '|' || step || '|' || CAST(messages AS VARCHAR) "
                         "as rollout from trajectories")
        frame = frame.join(keys, on="trajectory_id").drop("trajectory_id")
    return sorted(frame.rows(), key=repr)


@pytest.fixture
def tasks_store(store):
    store.add_records("tasks", TASKS, label="tasks")
    return store


def test_imported_dump_gives_the_same_signals_as_direct_records(tmp_path):
    run = rollouts()
    dump = write_verl_dump(tmp_path / "dump", run)
    with Store(tmp_path / "imported.duckdb") as imported, Store(tmp_path / "direct.duckdb") as direct:
        for store in (imported, direct):
            store.add_records("tasks", TASKS, label="tasks")
        reports = import_rollouts(imported, [dump], options=ImportOptions(step_offset=OFFSET, reward_range=(-1, 1)))
        assert [Path(r.path).name for r in reports] == [f"{s}.jsonl" for s in range(1, 7)]
        assert sum(r.added for r in reports) == len(run) == 120
        direct.add_records("trajectories", direct_records(run), label="direct")
        for view in ("task_steps", "boundary", "forgetting", "forgetting_events", "rare_patterns",
                     "flagged_trajectories"):
            rows = signal_rows(imported, view)
            assert rows == signal_rows(direct, view), view
        flagged = imported.sql("select signal, count(*) n from flagged_trajectories group by signal")
        assert set(flagged["signal"]) == {"boundary", "forgetting", "rare"}  # the run exercises all three
        one = imported.sql("select * from trajectories where step = 101 order by trajectory_id limit 1")
        one = one.row(0, named=True)
        assert one["group_id"] == f"{one['task_id']}@101"
        meta = json.loads(one["meta"])
        assert meta["importer"] == "verl" and meta["score"] == 2 * one["reward"] - 1 and "acc" in meta
        again = import_rollouts(imported, [dump], options=ImportOptions(step_offset=OFFSET, reward_range=(-1, 1)))
        assert sum(r.added for r in again) == 0  # importing the same dump twice adds nothing


def test_reward_rule():
    assert normalise_reward(0.7, (0.0, 1.0)) == 0.7
    assert normalise_reward(1.5, (0.0, 1.0)) == 1.0 and normalise_reward(-0.2, (0.0, 1.0)) == 0.0
    assert normalise_reward(0.0, (-1.0, 1.0)) == 0.5
    assert normalise_reward(5.0, (0.0, 10.0)) == 0.5
    with pytest.raises(ValueError, match="hi > lo"):
        ImportOptions(reward_range=(1.0, 1.0))


def test_task_from_manifest_index_or_reward_extra(tasks_store, tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"rows": [{"index": 0, "task_id": "task-3", "weight": 1.0}]}))
    dump = tmp_path / "5.jsonl"
    dump.write_text("\n".join(json.dumps(line) for line in [
        {"input": "a", "output": "b", "gts": "42", "score": 1, "step": 5, "index": 0},
        {"input": "a", "output": "c", "gts": None, "score": 0, "step": 5, "task_id": "task-1"},
        {"input": "a", "output": "d", "gts": json.dumps({"task_id": "task-2", "env": "toy"}), "score": 0.25,
         "step": 5},
    ]) + "\n")
    from coevolve_engine.adapters.importers import read_manifest

    import_rollouts(tasks_store, [dump], options=ImportOptions(index_to_task=read_manifest(tmp_path)))
    rows = tasks_store.sql("select task_id, step, reward, action_pattern from trajectories order by task_id")
    assert rows.rows() == [("task-1", 5, 0.0, ""), ("task-2", 5, 0.25, ""), ("task-3", 5, 1.0, "")]


def test_episode_dumps_keep_draws_chats_and_tool_calls(tasks_store, tmp_path):
    """Lines as verl writes them with coevolve's reward function: two draws of task-0 in one step (two uids),
    the chat and the calls as JSON text among the reward extras."""
    chat = [{"role": "user", "content": "Do thing 0."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1_0", "type": "function", "function": {"name": "ls", "arguments": '{"n": 0}'}}]},
            {"role": "tool", "tool_call_id": "call_1_0", "name": "ls", "content": "a b"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Now the second thing."},
            {"role": "assistant", "content": "Done too."}]
    lines = [{"input": "user Do thing 0.", "output": "flattened text", "gts": "task-0", "score": score, "step": 4,
              "task_id": "task-0", "uid": uid, "turns": 2, "success": score == 1.0, "stop": "done",
              "messages": json.dumps(chat), "actions": json.dumps([{"name": "ls", "arguments": {"n": 0}}]),
              "request_id": f"r{i}"}
             for i, (uid, score) in enumerate([("u-1", 1.0), ("u-1", 0.0), ("u-2", 1.0), ("u-2", 1.0)])]
    dump = tmp_path / "4.jsonl"
    dump.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    import_rollouts(tasks_store, [dump], options=ImportOptions(step_offset=10))
    rows = tasks_store.sql("select group_id, step, reward, success, action_pattern, messages, meta from trajectories "
                           "order by group_id, reward").rows(named=True)
    assert [(r["group_id"], r["step"], r["reward"], r["success"]) for r in rows] == [
        ("u-1", 14, 0.0, False), ("u-1", 14, 1.0, True), ("u-2", 14, 1.0, True), ("u-2", 14, 1.0, True)]
    assert {r["action_pattern"] for r in rows} == {"ls"}
    assert json.loads(rows[0]["messages"]) == chat
    meta = json.loads(rows[0]["meta"])
    assert (meta["turns"], meta["stop"], meta["importer"]) == (2, "done", "verl") and "messages" not in meta
    bad = tmp_path / "5.jsonl"
    bad.write_text(json.dumps({**lines[0], "step": 5, "messages": "[{not json"}) + "\n")
    with pytest.raises(IngestError, match=r"5\.jsonl, line 1, field 'messages': messages is not JSON text"):
        import_rollouts(tasks_store, [bad])


@pytest.mark.parametrize("lines, location, message", [
    (['{"input": "a", "output": "b", "gts": "task-0", "score": 1, "step": 1}', "{not json"],
     "line 2", "not valid JSON"),
    (['{"input": "a", "output": "b", "gts": "task-0", "step": 1}'], "line 1, field 'score'", "not a finite number"),
    (['', '{"input": "a", "output": "b", "gts": "task-0", "score": 1, "step": "one"}'],
     "line 2, field 'step'", "is not an integer"),
    (['{"input": "a", "output": "b", "gts": "task-0", "score": 1, "step": 1}',
      '{"input": "a", "output": "b", "gts": "ghost", "score": 1, "step": 1}'],
     "line 2, field 'gts'", "task 'ghost' is not in the store"),
    (['{"input": "a", "output": "b", "score": 1, "step": 1}'], "line 1, field 'task_id'", "cannot tell which task"),
    (['{"output": "b", "gts": "task-0", "score": 1, "step": 1}'], "line 1, field 'input'", "missing"),
    (['[1, 2]'], "line 1", "expected a JSON object"),
])
def test_bad_dumps_name_the_file_and_line(tasks_store, tmp_path, lines, location, message):
    good = tmp_path / "1.jsonl"
    good.write_text('{"input": "a", "output": "b", "gts": "task-0", "score": 1, "step": 1}\n')
    bad = tmp_path / "2.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError) as caught:
        import_rollouts(tasks_store, [good, bad])
    assert str(caught.value).startswith(f"{bad}, {location}: ")
    assert message in str(caught.value)
    # the good file before it stays, the bad file adds nothing
    assert tasks_store.scalar("select count(*) from trajectories") == 1


def test_store_level_errors_are_mapped_back_to_lines(tasks_store, tmp_path):
    """A group may hold one task at one step: the store's check fires, and names the dump's line."""
    tasks_store.add_records("trajectories", [{"task_id": "task-0", "step": 3, "reward": 1.0, "group_id": "task-1@3"}])
    dump = tmp_path / "3.jsonl"
    dump.write_text('\n\n{"input": "a", "output": "b", "gts": "task-1", "score": 1, "step": 3}\n')
    with pytest.raises(IngestError, match=r"3\.jsonl, line 3, field 'group_id': group 'task-1@3'"):
        import_rollouts(tasks_store, [dump])


def test_importers_are_a_registry():
    assert "verl" in IMPORTERS.names()
    assert IMPORTERS.load("verl").__name__ == "VerlDumpImporter"


def test_cli_import_rollouts(db_path, tmp_path):
    with Store(db_path) as store:
        store.add_records("tasks", TASKS, label="tasks")
    run = [r for r in rollouts() if r["step"] <= 2]
    dump = write_verl_dump(tmp_path / "dump", run)
    runner = CliRunner()
    result = runner.invoke(cli, ["import-rollouts", "--db", str(db_path), str(dump), "--step-offset", "10",
                                 "--reward-range", "-1", "1", "--policy", "ckpt-7"])
    assert result.exit_code == 0, result.output
    assert "1.jsonl: 20 rollouts, 20 added, 0 already present" in result.output
    with Store(db_path, read_only=True) as store:
        assert store.sql("select distinct step, policy from trajectories order by step").rows() == [
            (11, "ckpt-7"), (12, "ckpt-7")]
    result = runner.invoke(cli, ["import-rollouts", "--db", str(db_path), str(dump), "--reward-range", "1", "0"])
    assert result.exit_code == 2 and "HI must be greater than LO" in result.output
    (tmp_path / "bad.jsonl").write_text('{"input": 1}\n')
    result = runner.invoke(cli, ["import-rollouts", "--db", str(db_path), str(tmp_path / "bad.jsonl")])
    assert result.exit_code == 1 and "bad.jsonl, line 1, field 'input'" in result.output
    assert "Traceback" not in result.output
    assert "trainer.rollout_data_dir" in runner.invoke(cli, ["import-rollouts", "--help"]).output
