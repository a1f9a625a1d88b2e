"""The offline BFCL synthesizer on real BFCL tasks: consistent edits, pattern-driven mix, determinism."""

from __future__ import annotations

import copy
import json
import random
import re

import pytest

pytest.importorskip("bfcl_eval")

from click.testing import CliRunner  # noqa: E402

from bfcl_patterns import SIGNALS, base_tasks  # noqa: E402
from synthesizer_contract import SynthesizerContract  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import literal_edits as literals  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import task_edits as edits  # noqa: E402
from coevolve_engine.core.environment import replay  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.synthesizer import OfflineBFCLSynthesizer  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.candidates import (  # noqa: E402
    SYNTHESIZERS,
    Synthesizer,
    load_patterns,
    load_synthesizer,
    synthesize,
)


@pytest.fixture(scope="module")
def tasks():
    return {task["spec"]["bfcl_id"]: task for task in base_tasks(200)}


@pytest.fixture(scope="module")
def bfcl():
    return load_environment("bfcl")


def assert_replays(bfcl, spec):
    """The spec's ground truth replays with no error observation and scores 1."""
    outcomes = edits.call_results(spec)
    assert [error for turn in outcomes for _, error in turn if error] == []
    score = replay(bfcl, "t", spec, bfcl.reference_solution(spec))
    assert (score.reward, score.success) == (1.0, True), score.reason


class TestOfflineBFCLSynthesizerContract(SynthesizerContract):
    @pytest.fixture
    def synthesizer(self):
        return OfflineBFCLSynthesizer()


def test_the_patterns_are_read_with_their_member_tasks(pattern_db):
    with Store(pattern_db, read_only=True) as store:
        patterns = load_patterns(store)
        flagged = store.sql("SELECT trajectory_id, signal FROM flagged_trajectories").rows()
    assert [p.dominant_signal for p in patterns] == list(SIGNALS) and {p.round for p in patterns} == {1}
    assert [len(p.task_ids) for p in patterns] == [10, 10, 10]
    assert patterns[0].task_ids[:2] == ["bfcl/multi_turn_base_0", "bfcl/multi_turn_base_18"]  # closest first
    for pattern in patterns:  # the rollouts really carry the pattern's signal
        assert {(m.trajectory_id, pattern.dominant_signal) for m in pattern.members} <= set(flagged)


def test_candidates_are_valid_bfcl_tasks_made_from_their_pattern(db, bfcl):
    with Store(db) as store:
        patterns = load_patterns(store, round=1)
        made = load_synthesizer("offline:bfcl").propose(store, patterns, max_candidates=30, seed=0)
    assert len(made) == 30
    by_pattern = {p.pattern_id: p for p in patterns}
    assert sorted({c.pattern_id for c in made}) == ["1-0", "1-1", "1-2"]
    for candidate in made:
        pattern = by_pattern[candidate.pattern_id]
        assert (candidate.round, candidate.signal, candidate.env, candidate.synthesizer) == (
            1, pattern.dominant_signal, "bfcl", "offline:bfcl")
        assert candidate.provenance["parents"][0] in pattern.task_ids
        assert re.fullmatch(r"bfcl-syn/[0-9a-f]{12}", candidate.task_id)
        assert candidate.spec["bfcl_id"] == "syn_" + candidate.task_id.split("/")[1]
        assert candidate.prompt == candidate.spec["turns"][0][0]["content"]
        assert bfcl.check_spec(candidate.spec) == [], candidate.provenance
        parent_prompts = {by_pattern[candidate.pattern_id].tasks[p]["prompt"]
                          for p in candidate.provenance["parents"] if p in pattern.tasks}
        assert candidate.prompt not in parent_prompts
    assert len({c.candidate_id for c in made}) == len({c.task_id for c in made}) == 30
    operators = {signal: [c.provenance["operators"][0] for c in made if c.signal == signal] for signal in SIGNALS}
    assert set(operators["forgetting"]) <= {"variant", "truncated_variant"}
    assert operators["rare"].count("splice") >= len(operators["rare"]) // 2
    assert "perturb" in operators["boundary"]


def test_the_same_seed_gives_the_same_candidates(db):
    with Store(db) as store:
        patterns = load_patterns(store)
        first = OfflineBFCLSynthesizer().propose(store, patterns, max_candidates=12, seed=3)
        again = OfflineBFCLSynthesizer().propose(store, patterns, max_candidates=12, seed=3)
        other = OfflineBFCLSynthesizer().propose(store, patterns, max_candidates=12, seed=4)
    assert first == again
    assert [c.candidate_id for c in first] != [c.candidate_id for c in other]


def test_synthesize_stores_pending_candidates_once(db):
    with Store(db) as store:
        report = synthesize(store, max_candidates=9, seed=0)
        again = synthesize(store, max_candidates=9, seed=0)
        rows = store.execute("SELECT verdict, count(*) FROM candidates GROUP BY verdict").fetchall()
        ordered = [r[0] for r in store.execute("SELECT candidate_id FROM candidates ORDER BY created_at").fetchall()]
        made = OfflineBFCLSynthesizer().propose(store, load_patterns(store), max_candidates=9, seed=0)
    assert (report.round, report.patterns, report.proposed, report.added) == (1, 3, 9, 9)
    assert report.by_signal == {"forgetting": 3, "boundary": 3, "rare": 3}
    assert again.added == 0 and rows == [("pending", 9)]
    assert ordered == [c.candidate_id for c in made]  # stored in the order they were proposed


def test_rename_changes_a_name_everywhere_and_the_truth_still_replays(tasks, bfcl):
    spec = tasks["multi_turn_base_0"]["spec"]
    options = {edit.name: edit for edit in literals.renames(spec)}
    assert options["final_report.pdf"].kind == "file" and options["final_report.pdf"].in_first_turn
    assert options["temp"].kind == "dir"
    renamed = literals.rename(spec, "final_report.pdf", "budget_summary.pdf")
    text = json.dumps(renamed)
    assert "final_report.pdf" not in text
    assert "'budget_summary.pdf'" in renamed["turns"][0][0]["content"]
    documents = renamed["initial_config"]["GorillaFileSystem"]["root"]["workspace"]["contents"]["document"]
    assert "budget_summary.pdf" in documents["contents"]
    assert "mv(source='budget_summary.pdf', destination='temp')" in renamed["ground_truth"][0]
    assert_replays(bfcl, renamed)
    assert "final_report.pdf" in json.dumps(spec)  # the input is left as it was
    assert literals.rename(spec, "final_report.pdf", "x.pdf")["path"][0] == "GorillaFileSystem.cd"


def test_rename_refuses_a_name_the_user_also_writes_in_another_case(tasks):
    spec = copy.deepcopy(tasks["multi_turn_base_0"]["spec"])
    spec["turns"][1][0]["content"] += " Then open TEMP again."
    assert literals.rename(spec, "temp", "staging") is None


def test_renumber_changes_the_stated_number_in_the_text_and_the_call(tasks, bfcl):
    spec = tasks["multi_turn_base_1"]["spec"]  # "show the last 20 lines" -> tail(lines=20)
    (edit,) = [e for e in literals.renumbers(spec) if e.value == 20]
    changed = literals.renumber(spec, edit, 12)
    assert "last 12 lines" in changed["turns"][3][0]["content"]
    assert changed["ground_truth"][3] == ["tail(file_name='log.txt', lines=12)"]
    assert_replays(bfcl, changed)


def test_numbers_that_feed_a_computation_or_name_an_id_are_left_alone(tasks):
    for task in tasks.values():
        for edit in literals.renumbers(task["spec"]):
            for turn in edits.calls_by_turn(task["spec"]):
                for call in turn:
                    if edit.value in call.arguments.values():
                        assert call.name not in literals.computing_calls()
                        assert not [k for k, v in call.arguments.items() if v == edit.value and k.endswith("id")]


def test_truncate_and_merge_keep_each_turn_with_its_truth(tasks, bfcl):
    spec = tasks["multi_turn_base_0"]["spec"]
    short = edits.truncate(spec, 2)
    assert short["turns"] == spec["turns"][:2] and short["ground_truth"] == spec["ground_truth"][:2]
    merged = edits.merge_first_turns(spec)
    assert len(merged["turns"]) < len(spec["turns"])
    assert merged["turns"][0][0]["content"].startswith(spec["turns"][0][0]["content"])
    assert merged["ground_truth"][0][:3] == spec["ground_truth"][0]
    assert merged["ground_truth"][-1] == spec["ground_truth"][-1]
    assert_replays(bfcl, merged)
    assert_replays(bfcl, short)
    assert edits.truncate(spec, len(spec["turns"])) is None


def test_splice_runs_both_tasks_in_one_only_when_their_states_do_not_interfere(tasks, bfcl):
    files, vehicle = tasks["multi_turn_base_0"]["spec"], tasks["multi_turn_base_55"]["spec"]
    spliced, layout = edits.splice(files, vehicle, random.Random(0))
    assert layout.startswith("a0+b0")
    assert set(spliced["involved_classes"]) == set(files["involved_classes"]) | set(vehicle["involved_classes"])
    assert spliced["ground_truth"][0] == files["ground_truth"][0] + vehicle["ground_truth"][0]
    assert_replays(bfcl, spliced)
    other_files = tasks["multi_turn_base_1"]["spec"]  # the same class from another initial state
    assert all(edits.splice(files, other_files, random.Random(s)) is None for s in range(5))


def test_edits_keep_only_the_root_directory_bfcl_loads(tasks, bfcl):
    spec = tasks["multi_turn_base_5"]["spec"]  # two directories under root; bfcl loads the first one only
    roots = list(spec["initial_config"]["GorillaFileSystem"]["root"])
    assert len(roots) == 2
    short = edits.truncate(spec, 2)
    assert list(short["initial_config"]["GorillaFileSystem"]["root"]) == roots[:1]
    assert_replays(bfcl, json.loads(json.dumps(short, sort_keys=True)))  # as a key-sorting store keeps it


def test_seeds_whose_own_ground_truth_fails_are_not_varied(db):
    with Store(db) as store:  # the first forgetting task now points at a directory its state lacks
        spec = json.loads(store.scalar("SELECT spec FROM tasks WHERE task_id = 'bfcl/multi_turn_base_0'"))
        spec["ground_truth"][0][0] = "cd(folder='no_such_folder')"
        store.execute("UPDATE tasks SET spec = $spec WHERE task_id = 'bfcl/multi_turn_base_0'",
                      {"spec": json.dumps(spec)})
        made = OfflineBFCLSynthesizer().propose(store, load_patterns(store)[:1], max_candidates=10, seed=0)
    assert made and all("bfcl/multi_turn_base_0" not in c.provenance["parents"] for c in made)


def test_single_turn_or_missing_tasks_give_no_candidates(db):
    with Store(db) as store:
        store.execute("DELETE FROM pattern_members WHERE pattern_id <> '1-0'")
        store.execute("UPDATE trajectories SET task_id = 'gone/' || task_id")  # members' tasks not in the store
        patterns = load_patterns(store)
        assert [p.task_ids for p in patterns] == [[], [], []]
        assert OfflineBFCLSynthesizer().propose(store, patterns, max_candidates=5, seed=0) == []


def test_the_registry_names_the_offline_synthesizer():
    assert "offline:bfcl" in SYNTHESIZERS.names()
    assert issubclass(SYNTHESIZERS.load("offline:bfcl"), Synthesizer)


def test_cli_synthesize(db, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["synthesize", "--db", str(db), "--max-candidates", "6", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "proposed 6 candidates for 3 failure patterns (boundary 2, forgetting 2, rare 2); 6 new" in result.output
    listed = runner.invoke(cli, ["candidates", "--db", str(db), "--verdict", "pending", "--format", "csv"])
    assert listed.exit_code == 0 and len(listed.output.strip().splitlines()) == 7
    missing = runner.invoke(cli, ["synthesize", "--db", str(db), "--round", "4"])
    assert missing.exit_code == 1 and "no failure patterns in round 4; rounds with patterns: 1" in missing.output
    unknown = runner.invoke(cli, ["synthesize", "--db", str(db), "--synthesizer", "nope"])
    assert unknown.exit_code == 1
    assert "unknown synthesizer 'nope'; known: llm, llm-unguided, offline:bfcl" in unknown.output
    nostore = runner.invoke(cli, ["synthesize", "--db", str(tmp_path / "none.duckdb")])
    assert nostore.exit_code == 1 and "no store at" in nostore.output
    assert "Traceback" not in missing.output + unknown.output + nostore.output
