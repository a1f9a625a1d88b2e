"""tasks import and rollout end to end: real BFCL tasks, a scripted OpenAI-compatible server over HTTP,
litellm in between, trajectories and signals in the store."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from scripted_server import hang, http_error, text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")

from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.tasks import select_tasks  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402


def first_user(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


class Replayer:
    """Answers each BFCL task with its ground truth, turn by turn; ``plan[task_index]`` says, per rollout of
    that task (in arrival order), 'ok', 'text' (answer without calls: a failure), '500' or 'hang'."""

    def __init__(self, tasks: list[dict], plan: dict[int, list[str]]):
        env = load_environment("bfcl")
        self.prompts = [t["spec"]["turns"][0][0]["content"] for t in tasks]
        self.scripts = []
        for task in tasks:
            steps = []
            for calls in env.reference_solution(task["spec"]):
                if calls:
                    steps.append(tool_calls(*[(c.name, c.arguments) for c in calls]))
                steps.append(text("Done."))
            self.scripts.append(steps)
        self.plan = plan
        self.started = {i: 0 for i in range(len(tasks))}

    def __call__(self, request: dict):
        user = first_user(request)
        index = next(i for i, p in enumerate(self.prompts) if user.startswith(p))
        answered = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if answered == 0:
            self.started[index] += 1
        mode = self.plan.get(index, ["ok"] * 99)[self.started[index] - 1]
        if mode == "text":
            return text("I cannot do that.")
        if mode == "500":
            return http_error(500)
        if mode == "hang":
            return hang(10)
        return self.scripts[index][answered]


@pytest.fixture
def bfcl_store(db_path):
    result = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", "multi_turn_base", "--limit", "3",
                                      "--create", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "3 tasks, 3 added" in result.output
    with Store(db_path, read_only=True) as store:  # in the order rollout draws them (seed 0)
        return select_tasks(store, "bfcl", category="multi_turn_base", seed=0)


def rollout_args(server, db_path, *extra):
    return ["rollout", "--env", "bfcl", "--category", "multi_turn_base", "--model", "openai/scripted",
            "--api-base", server.api_base, "--api-key", "dummy", "--retries", "0", "--timeout", "3",
            "--concurrency", "1", "--no-progress", "--create", "--db", str(db_path), *extra]


def test_rollout_writes_groups_and_signals(scripted_server, bfcl_store, db_path):
    scripted_server.respond_with(Replayer(bfcl_store, {1: ["ok", "text"], 2: ["ok", "500"]}))
    result = CliRunner().invoke(cli, rollout_args(scripted_server, db_path, "-k", "2", "--step", "0"))
    assert result.exit_code == 0, result.output
    assert "6 rollouts of 3 tasks written" in result.output and "1 cut short by faults" in result.output
    with Store(db_path, read_only=True) as store:
        got = store.execute("SELECT task_id, group_id, reward, success, error IS NOT NULL, policy "
                            "FROM trajectories ORDER BY trajectory_id").fetchall()
        assert len(got) == 6 and {g[5] for g in got} == {"openai/scripted"}
        by_task: dict[str, list] = {}
        for task_id, group_id, reward, success, faulted, _ in got:
            assert group_id == f"{task_id}@0"
            by_task.setdefault(task_id, []).append((reward, faulted))
        outcomes = sorted(sorted(v) for v in by_task.values())
        assert outcomes == [[(0.0, False), (1.0, False)], [(0.0, True), (1.0, False)], [(1.0, False), (1.0, False)]]
        # the failed text-only rollout makes its group a boundary group; the faulted one flags nothing
        assert store.scalar("SELECT count(*) FROM boundary") == 1
        assert store.scalar("SELECT count(*) FROM trajectories WHERE json_array_length(actions) > 0") == 4  # not the text-only one, not the faulted one
        error = store.scalar("SELECT error FROM trajectories WHERE error IS NOT NULL")
        assert "InternalServerError" in error and "scripted failure" in error
    again = CliRunner().invoke(cli, rollout_args(scripted_server, db_path, "-k", "2", "--step", "0"))
    assert "skipped 3 tasks already rolled out at step 0" in again.output
    assert "0 rollouts of 0 tasks written" in again.output
    signals = CliRunner().invoke(cli, ["signals", "--db", str(db_path)])
    assert signals.exit_code == 0 and "boundary" in signals.output


def test_an_interrupted_rollout_keeps_finished_groups(scripted_server, bfcl_store, db_path):
    # the second task's first rollout hangs; the process is killed while waiting for it
    scripted_server.respond_with(Replayer(bfcl_store, {1: ["hang"]}))
    order = [t["task_id"] for t in bfcl_store]
    process = subprocess.Popen(
        [sys.executable, "-m", "coevolve_engine.cli", *rollout_args(scripted_server, db_path, "-k", "1", "--step", "4",
                                                                    "--timeout", "30")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hanging_prompt = bfcl_store[1]["spec"]["turns"][0][0]["content"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        first_user(request).startswith(hanging_prompt) for request in list(scripted_server.requests)
    ):
        time.sleep(0.1)
    process.kill()  # while the second task's rollout waits for its model
    process.wait()
    with Store(db_path, read_only=True) as store:
        kept = {row[0] for row in store.execute("SELECT task_id FROM trajectories").fetchall()}
    assert kept and bfcl_store[1]["task_id"] not in kept  # finished groups kept, the interrupted one absent
    scripted_server.respond_with(Replayer(bfcl_store, {}))
    result = CliRunner().invoke(cli, rollout_args(scripted_server, db_path, "-k", "1", "--step", "4"))
    assert result.exit_code == 0, result.output
    with Store(db_path, read_only=True) as store:
        rows = store.execute("SELECT task_id, count(*) FROM trajectories GROUP BY task_id").fetchall()
    assert sorted(rows) == sorted((task_id, 1) for task_id in order)


def test_rollout_without_tasks_says_what_to_do(db_path, scripted_server):
    Store(db_path).close()
    result = CliRunner().invoke(cli, rollout_args(scripted_server, db_path, "--step", "0"))
    assert result.exit_code == 1
    assert "no bfcl tasks in category multi_turn_base" in result.output
    assert "coevolve-engine tasks import bfcl --category multi_turn_base" in result.output
