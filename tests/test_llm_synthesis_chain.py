"""The whole chain on BFCL data, through an OpenAI-compatible server on 127.0.0.1 answering from a script:
flagged trajectories -> patterns -> one summary per pattern -> exploration with executed tool calls ->
abstraction into candidate tasks -> validation. A well-formed candidate is accepted; a draft calling an
unknown function, a draft whose ground truth fails, a near-duplicate and an answer that is never JSON are
rejected with their reasons, and every candidate stays in the store."""

from __future__ import annotations

import importlib.util
import json

import pytest

from scripted_server import text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")
pytest.importorskip("sentence_transformers")

from bfcl_patterns import rollouts  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.core.environment import replay  # noqa: E402
from coevolve_engine.core.endpoint import CallSettings  # noqa: E402
from coevolve_engine.models.llm import LLMClient  # noqa: E402
from coevolve_engine.patterns import PatternSelection, find_patterns  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.candidates import synthesize  # noqa: E402
from coevolve_engine.synthesis.summaries import summarise_patterns  # noqa: E402
from coevolve_engine.synthesis.validation import validate_candidates  # noqa: E402

SUMMARY = {
    "summary": "The agent loses track of the working directory before it moves or reads files.",
    "failure_cause": "It calls file tools without cd into the folder that holds the file.",
    "instability_pattern": "cd is skipped or done after the call that needs it.",
    "focus_pattern": ["cd > ls", "cd > cat"],
    "exploration_objectives": ["Move between folders and read files in them."],
    "do_not_repeat": [],
}


class Scripted:
    """Answers summaries, explorations and abstractions for the tasks of the store."""

    def __init__(self, env, tasks):
        self.env = env
        self.tasks = tasks
        self.good_seed = None  # the first seed asked for an abstraction gets JSON; any other gets prose

    def seed_of(self, content: str) -> dict:
        return next(t for t in self.tasks if t["prompt"] and t["prompt"] in content)

    def __call__(self, request: dict):
        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n".join(str(m.get("content")) for m in messages if m["role"] == "user")
        if system.startswith("You analyse the failures"):
            return text(json.dumps(SUMMARY))
        if system.startswith("You explore a tool environment"):
            if any(m["role"] == "assistant" for m in messages):
                return text("I moved around and looked at the files.")
            first_turn = self.env.reference_solution(self.seed_of(user)["spec"])[0]
            return tool_calls(*[(call.name, call.arguments) for call in first_turn])
        if system.startswith("You write training tasks"):
            seed = self.seed_of(user)
            if self.good_seed is None:
                self.good_seed = seed["task_id"]
            if seed["task_id"] != self.good_seed:
                return text("Here are some ideas for tasks, written as prose rather than JSON.")
            truth = seed["spec"]["ground_truth"]
            turns = [f"Errand {i + 1} of the spring clean-up: do the {i + 1}. thing on my list." for i in range(len(truth))]
            good = {"turns": turns, "ground_truth": truth, "completion_criterion": "every errand done"}
            unknown = {"turns": ["Launch the rocket, then tidy up."], "ground_truth": [["launch_rocket(speed=3)", "ls()", "pwd()"]],
                       "completion_criterion": "the rocket is launched"}
            fails = {"turns": ["Show me the notes in the glovebox log."],
                     "ground_truth": [truth[0] + ["cat(file_name='no_such_glovebox_log.txt')", "pwd()"]],
                     "completion_criterion": "the notes are shown"}
            duplicate = {"turns": [seed["prompt"]] + turns[1:], "ground_truth": truth,
                         "completion_criterion": "the same as the seed"}
            return text(json.dumps({"tasks": [good, unknown, fails, duplicate]}))
        raise AssertionError(f"unexpected request: {system[:80]!r}")


def test_signals_to_validated_tasks_through_an_llm(db_path, scripted_server):
    env = load_environment("bfcl")
    tasks = [t for t in env.load_tasks(category="multi_turn_base") if "GorillaFileSystem" in t["spec"]["involved_classes"]
             and len(t["spec"]["turns"]) >= 2][:6]
    with Store(db_path) as store:
        store.add_records("tasks", tasks, label="bfcl tasks")
        store.add_records("trajectories", rollouts(tasks), label="rollouts")
        report = find_patterns(store, PatternSelection(step=1, max_k=2, seed=0))
    assert len(report.patterns) == 2

    scripted_server.respond_with(Scripted(env, tasks))
    client = dict(calls=CallSettings(timeout=5, retries=0))
    summaries = summarise_patterns(db_path, client=LLMClient(db_path, scripted_server.endpoint(), **client))
    assert summaries.summarised == 2 and summaries.calls == 2

    with Store(db_path) as store:
        proposed = synthesize(store, synthesizer="llm", max_candidates=10, seed=0, options=dict(
            store_path=db_path, model=scripted_server.endpoint(), tasks_per_pattern=4, max_explore_steps=6, **client))
    assert proposed.proposed == 5  # four drafts from one pattern, one failure carried by the other

    verdicts = validate_candidates(db_path)
    reasons = sorted(v.reason for v in verdicts.verdicts)
    assert reasons == ["accepted", "ground_truth", "novelty", "schema", "synthesis"]
    details = {v.reason: v.checks[-1].detail for v in verdicts.verdicts}
    assert "launch_rocket" in details["schema"]
    assert "no_such_glovebox_log.txt" in details["ground_truth"]
    assert "abstraction" in details["synthesis"] and "JSON" in details["synthesis"]

    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM candidates") == 5  # every candidate kept, with its verdict
        assert store.scalar("SELECT count(*) FROM candidates WHERE verdict = 'pending'") == 0
        accepted = store.execute("SELECT task_id, provenance FROM candidates WHERE verdict = 'accepted'").fetchall()
        (task_id, provenance), = accepted
        provenance = json.loads(provenance)
        assert provenance["exploration_actions"], "the explorer's calls were executed in the environment"
        assert provenance["prompt_versions"][0].startswith("explore_") and provenance["completion_criterion"]
        assert store.scalar("SELECT source FROM tasks WHERE task_id = $t", {"t": task_id}) == "synthesized"
        purposes = dict(store.execute("SELECT purpose, count(*) FROM llm_calls GROUP BY purpose").fetchall())
        assert purposes["summary"] == 2 and purposes["exploration"] >= 4
        assert purposes["abstraction"] == 1 + 3  # one good answer; three answers that were never JSON
        spec = json.loads(store.scalar("SELECT spec FROM tasks WHERE task_id = $t", {"t": task_id}))
    assert replay(env, task_id, spec, env.reference_solution(spec)).reward == 1.0  # the new task runs


def test_the_llm_judge_rules_last_with_its_reason(db_path, scripted_server):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.synthesis.candidates import Candidate, write_candidates
    from scripted_server import text as say

    env = load_environment("bfcl")
    (task,) = list(env.load_tasks(category="multi_turn_base", limit=1))
    with Store(db_path) as store:
        store.add_records("tasks", [task], label="bfcl task")
        spec = dict(task["spec"])
        spec["turns"] = [[{"role": "user", "content": f"Errand {i + 1} of my clean-up, please."}]
                         for i in range(len(spec["turns"]))]
        good = Candidate.create(round=0, pattern_id=None, signal=None, env="bfcl", synthesizer="test",
                                prompt="Errand 1 of my clean-up, please.", spec=spec,
                                provenance={"completion_criterion": "all errands done"})
        write_candidates(store, [good])
    # the judge's first answer is not its schema; the second rejects the task with a reason
    scripted_server.play([say("I think it is fine"), say('{"pass": false, "reason": "turn 1 names no folder"}')])
    result = CliRunner().invoke(cli, ["validate", "--judge-model", "openai/scripted", "--judge-api-base",
                                      scripted_server.api_base, "--api-key", "dummy", "--no-progress",
                                      "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "0 accepted, 1 rejected (judge 1)" in result.output
    with Store(db_path, read_only=True) as store:
        checks = json.loads(store.scalar("SELECT checks FROM candidates"))
        assert [c["check"] for c in checks][-1] == "judge" and "turn 1 names no folder" in checks[-1]["detail"]
        assert store.scalar("SELECT count(*) FROM llm_calls WHERE purpose = 'judge'") == 2
    assert "Turn 1. User: Errand 1" in scripted_server.requests[0]["messages"][-1]["content"]
