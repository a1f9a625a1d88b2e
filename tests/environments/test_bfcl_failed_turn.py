"""The failed turn of a BFCL rollout, from the outside: ``coevolve-engine rollout`` against an OpenAI-compatible
server on 127.0.0.1 that answers each task's ground truth with one argument corrupted in turn 1.

The stored failed turn must be the first t at which bfcl_eval's ``multi_turn_checker``, run on the episode's
first t turns (the calls recounted from the stored chat, decoded as bfcl decodes them), refuses it; and
``turn_outcomes`` must count exactly those failures. One task's first answer is a tool call whose arguments
are not JSON: turn 1 ends there, with no error fed back and no second answer in that turn (BFCL's loop).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner

from scripted_server import text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

from bfcl_reference_loop import _call, _wrong, first_refused_turn  # noqa: E402

from coevolve_engine.adapters.calls import parameter_order  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.specs import multi_turn_docs  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.tasks import select_tasks  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

CATEGORIES = ("multi_turn_base", "multi_turn_long_context")
PER_CATEGORY = 2


class CorruptedTurnOne:
    """Each task's ground truth, one call per answer and "Done." to end a turn; the first call of turn 1 has
    one argument changed, and in the task ``broken`` the first answer's arguments are not JSON."""

    def __init__(self, tasks: list[dict], broken: str) -> None:
        self.scripts = {}
        for task in tasks:
            spec = task["spec"]
            order = parameter_order(multi_turn_docs(spec))
            turns = [[(name, json.loads(arguments)) for name, arguments in (_call(t, order) for t in turn)]
                     for turn in spec["ground_truth"]]
            first = turns[0][0]
            turns[0][0] = (first[0], json.loads(_wrong((first[0], json.dumps(first[1])))[1]))
            if task["task_id"] == broken:
                turns[0].insert(0, (first[0], '{"oops": '))
            self.scripts[spec["turns"][0][0]["content"]] = turns

    def __call__(self, request: dict):
        messages = request["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        turns = self.scripts[messages[users[0]]["content"]]
        turn, step = len(users) - 1, sum(m["role"] == "assistant" for m in messages[users[-1]:])
        calls = turns[turn] if turn < len(turns) else []
        return tool_calls(calls[step]) if step < len(calls) else text("Done.")


def decoded_turns(messages: list[dict]) -> list[list[list[str]]]:
    """The stored chat's calls per turn and answer, as bfcl's FC decoding turns them into call strings (an answer
    whose arguments do not decode is dropped, as bfcl's evaluation drops it)."""
    turns: list[list[list[str]]] = []
    for message in messages:
        if message["role"] == "user":
            turns.append([])
        elif message["role"] == "assistant" and message.get("tool_calls"):
            try:
                calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
            except json.JSONDecodeError:
                continue
            turns[-1].append([f"{name}({','.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls])
    return turns


def test_stored_failed_turn_is_where_bfcls_checker_first_refuses(scripted_server, db_path):
    runner = CliRunner()
    for category in CATEGORIES:
        result = runner.invoke(cli, ["tasks", "import", "bfcl", "--category", category, "--limit", str(PER_CATEGORY),
                                     "--create", "--db", str(db_path)])
        assert result.exit_code == 0, result.output
    with Store(db_path, read_only=True) as store:
        tasks = [t for category in CATEGORIES for t in select_tasks(store, "bfcl", category=category, seed=0)]
    broken = tasks[0]["task_id"]
    for category in CATEGORIES:  # one category at a time: long_context tasks open with base tasks' prompts
        scripted_server.respond_with(CorruptedTurnOne([t for t in tasks if t["spec"]["category"] == category], broken))
        requests_before = len(scripted_server.requests)
        result = runner.invoke(cli, ["rollout", "--env", "bfcl", "--category", category, "--model", "openai/scripted",
                                     "--api-base", scripted_server.api_base, "--api-key", "dummy", "--retries", "0",
                                     "--timeout", "5", "--concurrency", "1", "--no-progress", "-k", "1", "--step", "0",
                                     "--db", str(db_path)])
        assert result.exit_code == 0, result.output
        if category == CATEGORIES[0]:
            base_requests = list(scripted_server.requests)[requests_before:]
    with Store(db_path, read_only=True) as store:
        stored = store.sql("SELECT task_id, messages, TRY_CAST(json_extract_string(meta, '$.failed_turn') AS INTEGER)"
                           " AS failed_turn FROM trajectories ORDER BY task_id").rows()
        outcomes = store.sql("SELECT task_id, turn, failed FROM turn_outcomes WHERE failed > 0").rows()
    by_id = {t["task_id"]: t for t in tasks}
    assert sorted(row[0] for row in stored) == sorted(by_id)
    expected = {}
    for task_id, messages, failed_turn in stored:
        spec = by_id[task_id]["spec"]
        messages = json.loads(messages) if isinstance(messages, str) else messages
        entry = {"id": spec["bfcl_id"], "initial_config": spec["initial_config"],
                 "involved_classes": spec["involved_classes"]}
        recount = first_refused_turn(entry, decoded_turns(messages), spec["ground_truth"])
        assert failed_turn == recount, (task_id, failed_turn, recount)
        if recount is not None:
            expected[task_id] = recount
    assert expected and 1 in expected.values()  # corrupting turn 1 is caught in turn 1 at least once
    assert sorted((task_id, turn) for task_id, turn, _ in outcomes) == sorted(expected.items())
    # the undecodable first answer ended turn 1: the next request is already turn 2's, with no tool message
    opened = [r for r in base_requests
              if next(m["content"] for m in r["messages"] if m["role"] == "user") ==
              by_id[broken]["spec"]["turns"][0][0]["content"]]
    assert [m["role"] for m in opened[1]["messages"]][-3:] == ["user", "assistant", "user"]
