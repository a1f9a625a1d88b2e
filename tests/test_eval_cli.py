"""eval end to end: real BFCL multi_turn_base tasks, a scripted OpenAI-compatible server over HTTP replaying
ground truth, litellm in between, results in the store; verdicts checked against bfcl_eval's own checker."""

from __future__ import annotations

import importlib.util
import json
import re
import uuid

import pytest
from click.testing import CliRunner

from scripted_server import http_error, text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")

from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module, load_answers, load_entries  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

CATEGORY = "multi_turn_base"
IDS = [f"bfcl/{CATEGORY}_{i}" for i in range(4)]


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    """The first four multi_turn_base tasks, as the environment loads them."""
    return list(load_environment("bfcl").load_tasks(category=CATEGORY, limit=len(IDS)))


class GroundTruth:
    """Answers each task's turn with its ground-truth calls (one parallel step), then "Done." to end the turn.

    The task is recognised by its first user message, the turn by the number of user messages, so concurrent
    episodes are answered by what they sent. ``corrupt = (task, turn, call, argument, value)`` replaces one
    argument; every request of a task in ``fail`` gets HTTP 500.
    """

    def __init__(self, tasks: list[dict], corrupt: tuple | None = None, fail: tuple[int, ...] = ()):
        env = load_environment("bfcl")
        self.firsts = [task["spec"]["turns"][0][0]["content"] for task in tasks]
        assert len(set(self.firsts)) == len(self.firsts)
        self.steps = [[[[(call.name, dict(call.arguments)) for call in turn]] if turn else []
                       for turn in env.reference_solution(task["spec"])] for task in tasks]
        if corrupt is not None:
            task, turn, call, argument, value = corrupt
            name, arguments = self.steps[task][turn][0][call]
            assert argument in arguments
            self.steps[task][turn][0][call] = (name, {**arguments, argument: value})
        self.fail = fail

    def task_of(self, request: dict) -> int:
        return self.firsts.index(next(m["content"] for m in request["messages"] if m["role"] == "user"))

    def __call__(self, request: dict):
        messages = request["messages"]
        task = self.task_of(request)
        if task in self.fail:
            return http_error(500)
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        answered = sum(1 for m in messages[users[-1]:] if m["role"] == "assistant")
        steps = self.steps[task][len(users) - 1]
        return tool_calls(*steps[answered]) if answered < len(steps) else text("Done.")

    def decoded(self, task: int) -> list[list[list[str]]]:
        """What bfcl's FC handlers decode from these answers: call strings per step per turn."""
        convert = bfcl_module("model_handler.utils").convert_to_function_call
        return [[convert([{name: json.dumps(arguments)} for name, arguments in step]) for step in turn]
                for turn in self.steps[task]]


def bfcl_verdicts(replayer: GroundTruth, tasks: list[dict]) -> list[bool]:
    """bfcl_eval's multi_turn_checker on each task's replayed calls, with bfcl's own entry and ground truth."""
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker").multi_turn_checker
    entries = {entry["id"]: entry for entry in load_entries(CATEGORY)}
    answers = load_answers(CATEGORY)
    verdicts = []
    for index, task in enumerate(tasks):
        bfcl_id = task["spec"]["bfcl_id"]
        result = checker(replayer.decoded(index), answers[bfcl_id], entries[bfcl_id], CATEGORY,
                         f"coevolve_test_{uuid.uuid4().hex}")
        verdicts.append(bool(result["valid"]))
    return verdicts


def eval_args(server, db_path, *extra):
    return ["eval", "--env", "bfcl", "--category", CATEGORY, "--model", "openai/scripted",
            "--api-base", server.api_base, "--api-key", "dummy", "--retries", "0", "--timeout", "5",
            "--concurrency", "2", "--no-progress", "--create", "--db", str(db_path), *extra]


def held_out(db_path) -> None:
    """The four tasks imported as eval tasks (so `eval` imports nothing)."""
    result = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", CATEGORY, "--limit", str(len(IDS)),
                                      "--split", "eval", "--create", "--db", str(db_path)])
    assert result.exit_code == 0, result.output


def stored(db_path, sql: str, **params):
    with Store(db_path, read_only=True) as store:
        return store.execute(sql, params).fetchall()


def printed_eval_id(output: str) -> str:
    return re.search(r"eval_id (eval-[0-9a-f]{16})", output).group(1)


def test_replaying_the_ground_truth_scores_100_percent_and_every_number_is_in_the_store(scripted_server, tasks,
                                                                                          db_path):
    scripted_server.respond_with(GroundTruth(tasks))
    args = [arg for task_id in IDS for arg in ("--task-id", task_id)]
    result = CliRunner().invoke(cli, eval_args(scripted_server, db_path, *args, "--label", "baseline"))
    assert result.exit_code == 0, result.output
    assert "imported 200 bfcl multi_turn_base tasks as eval tasks (split 'eval')" in result.output
    assert re.search(r"multi_turn_base\s+100\.00%\s+4\s+4", result.output), result.output
    identifier = printed_eval_id(result.output)
    assert stored(db_path, "SELECT split, count(*) FROM tasks GROUP BY split") == [("eval", 200)]
    rows = stored(db_path, "SELECT task_id, reward, success, json_array_length(actions), completion "
                           "FROM eval_results WHERE eval_id = $id ORDER BY task_id", id=identifier)
    assert [r[:3] for r in rows] == [(task_id, 1.0, True) for task_id in sorted(IDS)]
    # every user turn was played, not just the first: all ground-truth calls, one user message per turn
    truth = {t["task_id"]: t["spec"]["ground_truth"] for t in tasks}
    assert {r[0]: r[3] for r in rows} == {task_id: sum(map(len, turns)) for task_id, turns in truth.items()}
    assert {r[0]: sum(m["role"] == "user" for m in json.loads(r[4])) for r in rows} == \
        {task_id: len(turns) for task_id, turns in truth.items()}
    assert stored(db_path, "SELECT policy, label, env, tasks, successes, success_rate, settings->>'temperature' "
                           "FROM evaluations") == [("openai/scripted", "baseline", "bfcl", 4, 4, 1.0, "0.0")]
    assert all(request["temperature"] == 0 for request in scripted_server.requests)
    sql = re.search(r'per task: coevolve-engine query "([^"]+)"', result.output).group(1)
    query = CliRunner().invoke(cli, ["query", sql, "--db", str(db_path), "--format", "json"])
    assert sum(row["success"] for row in json.loads(query.output)) == 4


def test_a_corrupted_argument_scores_what_bfcls_checker_says(scripted_server, tasks, db_path):
    held_out(db_path)
    # task 2's turn 1 writes other text into TeamNotes.txt than the user asked for
    replayer = GroundTruth(tasks, corrupt=(2, 1, 0, "content", "Something else entirely."))
    expected = bfcl_verdicts(replayer, tasks)
    assert expected.count(False) == 1 and not expected[2]  # the corruption matters to bfcl
    assert all(bfcl_verdicts(GroundTruth(tasks), tasks))  # and the uncorrupted replay passes bfcl too
    scripted_server.respond_with(replayer)
    result = CliRunner().invoke(cli, eval_args(scripted_server, db_path, "--format", "json"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    correct = sum(expected)
    assert report["categories"] == [{"category": CATEGORY, "accuracy": correct / len(tasks),
                                     "correct_count": correct, "total_count": len(tasks)}]
    got = dict(stored(db_path, "SELECT task_id, success FROM eval_results WHERE eval_id = $id",
                      id=report["eval_id"]))
    assert got == {task["task_id"]: verdict for task, verdict in zip(tasks, expected)}
    reason = stored(db_path, "SELECT reason FROM eval_results WHERE task_id = $t", t=tasks[2]["task_id"])[0][0]
    assert reason.startswith("turn 1: multi_turn:instance_state_mismatch"), reason
    table = CliRunner().invoke(cli, eval_args(scripted_server, db_path))
    assert re.search(rf"multi_turn_base\s+{correct / 4 * 100:.2f}%\s+{correct}\s+4", table.output), table.output


def test_a_rerun_reuses_the_stored_evaluation_without_asking_the_model(scripted_server, tasks, db_path):
    held_out(db_path)
    scripted_server.respond_with(GroundTruth(tasks))
    first = CliRunner().invoke(cli, eval_args(scripted_server, db_path))
    assert first.exit_code == 0, first.output
    asked = len(scripted_server.requests)
    again = CliRunner().invoke(cli, eval_args(scripted_server, db_path, "--concurrency", "1"))
    assert again.exit_code == 0, again.output
    assert len(scripted_server.requests) == asked
    identifier = printed_eval_id(first.output)
    assert printed_eval_id(again.output) == identifier
    assert f"reused the stored evaluation {identifier}: nothing was run" in again.output
    assert re.search(r"multi_turn_base\s+100\.00%\s+4\s+4", again.output)


def test_a_task_cut_short_by_a_fault_is_not_stored_and_a_rerun_plays_only_it(scripted_server, tasks, db_path):
    held_out(db_path)
    scripted_server.respond_with(GroundTruth(tasks, fail=(2,)))
    result = CliRunner().invoke(cli, eval_args(scripted_server, db_path))
    assert result.exit_code == 1
    assert "1 tasks cut short by faults; rerun to retry" in result.output
    assert tasks[2]["task_id"] in result.output and "scripted failure" in result.output
    assert sorted(r[0] for r in stored(db_path, "SELECT task_id FROM eval_results")) == \
        sorted(t["task_id"] for i, t in enumerate(tasks) if i != 2)
    assert stored(db_path, "SELECT count(*) FROM evaluations") == [(0,)]
    good = GroundTruth(tasks)
    scripted_server.respond_with(good)
    scripted_server.requests.clear()
    again = CliRunner().invoke(cli, eval_args(scripted_server, db_path))
    assert again.exit_code == 0, again.output
    assert "3 tasks were stored by an earlier run, 1 played now" in again.output
    assert {good.task_of(request) for request in scripted_server.requests} == {2}
    assert re.search(r"multi_turn_base\s+100\.00%\s+4\s+4", again.output)
    assert stored(db_path, "SELECT tasks, successes FROM evaluations") == [(4, 4)]


def test_evaluating_on_tasks_stored_for_training_is_refused(scripted_server, db_path):
    imported = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", CATEGORY, "--limit", "2",
                                        "--create", "--db", str(db_path)])
    assert imported.exit_code == 0, imported.output
    result = CliRunner().invoke(cli, eval_args(scripted_server, db_path))
    assert result.exit_code == 1
    assert "2 of the 200 bfcl multi_turn_base tasks are in the store as training tasks" in result.output
    assert "bfcl/multi_turn_base_0, bfcl/multi_turn_base_1" in result.output
    assert stored(db_path, "SELECT split, count(*) FROM tasks GROUP BY split") == [("train", 2)]
    assert scripted_server.requests == []


def test_exceeding_max_steps_fails_the_task_and_unknown_task_ids_are_named(db_path):
    held_out(db_path)
    base = ["eval", "--env", "bfcl", "--category", CATEGORY, "--model", "reference", "--no-progress",
            "--create", "--db", str(db_path)]
    result = CliRunner().invoke(cli, [*base, "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    rows = stored(db_path, "SELECT task_id, success, reason FROM eval_results ORDER BY task_id")
    assert [r[1] for r in rows] == [False] * 4 and all("exceeded max_steps=3" in r[2] for r in rows)
    assert re.search(r"multi_turn_base\s+0\.00%\s+0\s+4", result.output)
    unknown = CliRunner().invoke(cli, [*base, "--task-id", "bfcl/nope"])
    assert unknown.exit_code == 1
    assert "not among the bfcl eval tasks of category multi_turn_base in" in unknown.output
    assert unknown.output.rstrip().endswith(": bfcl/nope")


def test_a_local_checkpoint_is_evaluated_greedily_under_its_resolved_path(tmp_path, db_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    calc = load_environment("calc")
    corpus = [t["prompt"] for t in calc.load_tasks(split="test", n=4)]
    build_tiny_qwen3(tmp_path / "policy", corpus, hidden_size=32, vocab_size=300, digits=True)
    monkeypatch.chdir(tmp_path)
    args = ["eval", "--env", "calc", "--category", "test", "--model", "policy", "--tasks", "2", "--max-tokens", "4",
            "--no-progress", "--create", "--db", str(db_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "imported 300 calc test tasks as eval tasks" in result.output
    assert f"policy {tmp_path / 'policy'}" in result.output
    assert re.search(r"test\s+\d+\.\d\d%\s+\d\s+2", result.output), result.output
    assert stored(db_path, "SELECT policy, tasks, settings->>'temperature' FROM evaluations") == \
        [(str(tmp_path / "policy"), 2, "0.0")]
    assert len(stored(db_path, "SELECT * FROM eval_results")) == 2
