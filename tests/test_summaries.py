"""summarise_patterns and `coevolve-engine summarize`: one request per failure pattern through litellm and the
scripted server, the validated summary (or the reason there is none) written per pattern."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from click.testing import CliRunner

from scripted_server import http_error, text

from coevolve_engine.cli import cli
from coevolve_engine.core.endpoint import CallSettings
from coevolve_engine.models.llm import LLMClient
from coevolve_engine.synthesis.summaries import SUMMARY_SCHEMA, SummaryError, summarise_patterns
from coevolve_engine.core.store import Store

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)


def trajectory(trajectory_id, task_id, step, reward, calls, answer):
    return {
        "trajectory_id": trajectory_id, "task_id": task_id, "step": step, "reward": reward,
        "actions": [{"name": name, "arguments": {"path": "docs"}} for name in calls],
        "messages": [
            {"role": "user", "content": f"Please do {task_id}."},
            *[{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": '{"path": "docs"}'}}]}
              for i, name in enumerate(calls)],
            {"role": "tool", "name": calls[-1], "content": "Error: no such folder docs"},
            {"role": "assistant", "content": answer},
        ],
    }


TASKS = [{"task_id": "files-1", "prompt": "List the files in docs."},
         {"task_id": "files-2", "prompt": "Move report.pdf into docs."},
         {"task_id": "mail-1", "prompt": "Send the report to Ann."}]
TRAJECTORIES = [
    trajectory("t1", "files-1", 40, 0.0, ["cd", "ls"], "The folder does not exist."),
    trajectory("t2", "files-1", 40, 1.0, ["ls"], "docs: a.txt"),
    trajectory("t3", "files-2", 40, 0.0, ["cd", "mv"], "I could not move it."),
    trajectory("t4", "mail-1", 40, 0.0, ["send_email"], "Sent."),
    trajectory("t5", "mail-1", 30, 0.0, ["send_email"], "Sent."),
]
PATTERNS = [  # pattern_id, round, step, cluster, size, dominant_signal, signal_counts, representative
    ("0-0", 0, 30, 0, 1, "forgetting", {"forgetting": 1}, "t5"),
    ("1-0", 1, 40, 0, 3, "boundary", {"boundary": 3, "rare": 1}, "t1"),
    ("1-1", 1, 40, 1, 1, "rare", {"rare": 1}, "t4"),
]
MEMBERS = [  # pattern_id, trajectory_id, signals, distance
    ("0-0", "t5", ["forgetting"], 0.0),
    ("1-0", "t1", ["boundary", "rare"], 0.05),
    ("1-0", "t2", ["boundary"], 0.2),
    ("1-0", "t3", ["boundary"], 0.1),
    ("1-1", "t4", ["rare"], 0.0),
]


@pytest.fixture
def patterns_store(store, jsonl, db_path):
    """A store with tasks, trajectories and three literal failure patterns (round 0: one, round 1: two)."""
    store.ingest_tasks(jsonl(TASKS))
    store.ingest_trajectories(jsonl(TRAJECTORIES))
    with store.transaction():
        for pattern_id, round_, step, cluster, size, signal, counts, representative in PATTERNS:
            store.execute(
                "INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, "
                "signal_counts, representative_trajectory) VALUES ($p, $r, $s, $c, $n, $d, $counts, $rep)",
                {"p": pattern_id, "r": round_, "s": step, "c": cluster, "n": size, "d": signal,
                 "counts": json.dumps(counts), "rep": representative},
            )
        for pattern_id, trajectory_id, signals, distance in MEMBERS:
            store.execute("INSERT INTO pattern_members VALUES ($p, $t, $s, $d, NULL)",
                          {"p": pattern_id, "t": trajectory_id, "s": signals, "d": distance})
    store.close()  # summarise_patterns opens the store for each unit of work
    return db_path


def pattern_of(request) -> str:
    return re.search(r"Failure pattern (\S+):", request["messages"][1]["content"]).group(1)


def summary_for(pattern_id: str) -> dict:
    return {"summary": f"rollouts of {pattern_id}", "failure_cause": f"cause of {pattern_id}",
            "instability_pattern": "cd into a folder that does not exist", "focus_pattern": ["cd>ls"],
            "exploration_objectives": ["create the folder first"], "do_not_repeat": []}


def good(request):
    return text(json.dumps(summary_for(pattern_of(request))), usage=(300, 40))


def make_client(server, db_path, **options) -> LLMClient:
    calls = CallSettings(options.pop("timeout", 5), options.pop("retries", 0), retry_backoff_s=0.0)
    return LLMClient(db_path, server.endpoint(), calls=calls, **options)


def pattern_rows(db_path) -> dict[str, dict]:
    with Store(db_path, read_only=True) as store:
        rows = store.sql("SELECT pattern_id, summary, summary_error FROM failure_patterns ORDER BY pattern_id")
    return {row["pattern_id"]: {"summary": json.loads(row["summary"]) if row["summary"] else None,
                                "error": row["summary_error"]} for row in rows.to_dicts()}


def test_each_pattern_of_the_latest_round_gets_one_call_and_its_summary(scripted_server, patterns_store):
    scripted_server.respond_with(good)
    seen = []
    report = summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store),
                                on_outcome=seen.append)

    assert report.round == 1 and (report.summarised, report.failed, report.already_summarised) == (2, 0, 0)
    assert (report.calls, report.cached_calls, report.tokens) == (2, 0, 680)
    assert report.usage.unpriced == 2 and report.cost == 0.0 and report.seconds > 0
    assert [o.pattern_id for o in seen] == ["1-0", "1-1"] and all(o.ok for o in seen)
    assert sorted(pattern_of(r) for r in scripted_server.requests) == ["1-0", "1-1"]
    assert pattern_rows(patterns_store) == {
        "0-0": {"summary": None, "error": None},  # another round: untouched
        "1-0": {"summary": summary_for("1-0"), "error": None},
        "1-1": {"summary": summary_for("1-1"), "error": None},
    }
    with Store(patterns_store, read_only=True) as store:
        assert store.sql("SELECT pattern_id, summary->>'failure_cause' AS cause FROM failure_patterns "
                         "WHERE summary IS NOT NULL ORDER BY 1").rows() == [("1-0", "cause of 1-0"),
                                                                            ("1-1", "cause of 1-1")]
        logged = store.sql("SELECT purpose, prompt_version, cached, error FROM llm_calls").rows()
    assert logged == [("summary", "summary@1", False, None)] * 2


def test_the_prompt_carries_the_signal_the_representative_and_other_members(scripted_server, patterns_store):
    scripted_server.respond_with(good)
    summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store), max_members=1)

    request = next(r for r in scripted_server.requests if pattern_of(r) == "1-0")
    system, user = (m["content"] for m in request["messages"])
    assert '"failure_cause"' in system and '"exploration_objectives"' in system
    assert "Failure pattern 1-0: 3 flagged rollouts, found at training step 40." in user
    assert "Dominant signal: boundary (" in user and "Rollouts carrying each signal: boundary 3, rare 1." in user
    representative, others = user.split("Other rollouts in the pattern:")
    assert "trajectory t1 of task files-1 (step 40, reward 0); signals: boundary, rare" in representative
    assert "List the files in docs." in representative and "no such folder docs" in representative
    assert "- task files-2 (step 40, reward 0); signals: boundary; tool calls: cd>mv; task: Move report.pdf " \
           "into docs." in others  # t3, the nearest other member
    assert "t2" not in others and "reward 1" not in others  # farther: left out with max_members=1


def test_a_pattern_without_an_acceptable_answer_records_why_and_the_run_continues(scripted_server, patterns_store):
    def bad_for_1_0(request):
        return text("The agent is confused.") if pattern_of(request) == "1-0" else good(request)

    scripted_server.respond_with(bad_for_1_0)
    report = summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store),
                                max_attempts=3)

    assert (report.summarised, report.failed, report.calls) == (1, 1, 4)
    rows = pattern_rows(patterns_store)
    assert rows["1-0"]["summary"] is None
    assert "no acceptable answer in 3 attempts" in rows["1-0"]["error"] and "not valid JSON" in rows["1-0"]["error"]
    assert rows["1-1"] == {"summary": summary_for("1-1"), "error": None}

    # a rerun tries the failed pattern again; with the cache its requests are replayed, free and identical
    scripted_server.play([])
    scripted_server.respond_with(good)
    again = summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store))
    assert (again.summarised, again.failed, again.already_summarised) == (0, 1, 1)
    assert (again.calls, again.cached_calls) == (0, 3) and scripted_server.requests == []

    # without the cache the model is asked anew
    fresh = summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store, cache=False))
    assert (fresh.summarised, fresh.failed, fresh.calls) == (1, 0, 1)
    assert pattern_rows(patterns_store)["1-0"] == {"summary": summary_for("1-0"), "error": None}


def test_a_transport_failure_is_recorded_on_its_pattern(scripted_server, patterns_store):
    scripted_server.respond_with(lambda r: http_error(500) if pattern_of(r) == "1-0" else good(r))
    report = summarise_patterns(patterns_store, client=make_client(scripted_server, patterns_store, retries=1))

    assert (report.summarised, report.failed, report.calls) == (1, 1, 3)
    assert "failed after 2 attempts: InternalServerError" in pattern_rows(patterns_store)["1-0"]["error"]


def test_a_round_can_be_chosen_and_a_missing_one_is_named(scripted_server, patterns_store, tmp_path):
    scripted_server.respond_with(good)
    client = make_client(scripted_server, patterns_store)
    report = summarise_patterns(patterns_store, round=0, client=client)
    assert report.round == 0 and [o.pattern_id for o in report.outcomes] == ["0-0"]

    with pytest.raises(SummaryError, match="round 7 has no failure patterns; rounds with patterns: 0, 1"):
        summarise_patterns(patterns_store, round=7, client=client)
    empty = tmp_path / "empty.duckdb"
    Store(empty).close()
    with pytest.raises(SummaryError, match="has no failure patterns yet"):
        summarise_patterns(empty, client=client)


def test_the_schema_asks_for_the_summary_keys():
    assert SUMMARY_SCHEMA["required"] == ["summary", "failure_cause", "instability_pattern", "focus_pattern",
                                          "exploration_objectives", "do_not_repeat"]


# -- the command ------------------------------------------------------------------------------------------


def test_summarize_prints_a_line_per_pattern_the_totals_and_a_query(scripted_server, patterns_store):
    scripted_server.respond_with(lambda r: text("nope") if pattern_of(r) == "1-1" else good(r))
    args = ["summarize", "--model", "openai/scripted", "--api-base", scripted_server.api_base, "--api-key", "dummy",
            "--db", str(patterns_store), "--retries", "0", "--max-attempts", "2"]
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("1-0  boundary      3 rollouts  (1 calls)  summarised: cause of 1-0")
    assert lines[1].startswith("1-1  rare          1 rollouts  (2 calls)  FAILED: summary: openai/scripted")
    assert lines[2].startswith("round 1: 1 patterns summarised, 1 failed; 3 calls to openai/scripted and 0 "
                               "answered from the cache, ")
    assert "select pattern_id, summary->>'failure_cause' from failure_patterns" in lines[3]

    again = CliRunner().invoke(cli, args + ["--round", "1"])
    assert "round 1: 0 patterns summarised, 1 failed, 1 already summarised; 0 calls" in again.output


def test_summarize_explains_itself_and_its_errors(tmp_path):
    help_text = CliRunner().invoke(cli, ["summarize", "--help"]).output
    assert "one summary of each failure pattern" in help_text and "--no-cache" in help_text
    assert "failure_patterns.summary" in help_text

    missing = CliRunner().invoke(cli, ["summarize", "--model", "openai/x", "--db", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 1 and "Error: no store at" in missing.output and "Traceback" not in missing.output
    Store(tmp_path / "empty.duckdb").close()
    empty = CliRunner().invoke(cli, ["summarize", "--model", "openai/x", "--db", str(tmp_path / "empty.duckdb")])
    assert empty.exit_code == 1 and "has no failure patterns yet" in empty.output
