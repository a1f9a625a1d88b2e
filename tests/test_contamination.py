"""The contamination gate and the contamination view: near copies of held-out tasks (other numbers, other names,
sentences in another order) planted among a normal round's candidates are refused as 'contaminated', naming the
held-out task they copy, while the round itself goes through; the view names them on a store of ingested tasks.

Stores: the calc demo's tasks (its seed and frontier training tasks, calc's held-out test split) with a normal
offline:calc round, and the BFCL pattern store (conftest.py) with held-out multi_turn_base tasks and a normal
offline:bfcl round; the planted BFCL copies are drafts set in their held-out task's world (``spec_from_draft``).
Novelty runs on one-hot vectors cached in the store (no model is loaded): the gate does not use embeddings.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from bfcl_patterns import insert_patterns, rollouts
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.adapters.environments.calc.tasks import run_steps, skill_of
from coevolve_engine.loop.demo import frontier_tasks, held_out, seed_tasks
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis import contamination
from coevolve_engine.synthesis.candidates import Candidate, synthesize, write_candidates
from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates
from test_eval_isolation import one_hot_embedder


def planted(env: str, source: dict, prompt: str, spec: dict) -> Candidate:
    return Candidate.create(round=1, pattern_id="1-0", signal="forgetting", env=env, synthesizer="test",
                            prompt=prompt, spec=spec, provenance={"copy_of": source["task_id"]})


def verdicts(db) -> dict[str, tuple[str, str, str]]:
    """candidate_id -> (synthesizer, reason, the contaminated check's detail or '')."""
    with Store(db, read_only=True) as store:
        rows = store.execute("SELECT candidate_id, synthesizer, reason, checks FROM candidates").fetchall()
    return {cid: (synth, reason, next((c["detail"] for c in json.loads(checks) if c["check"] == "contaminated"), ""))
            for cid, synth, reason, checks in rows}


def assert_refused_naming_their_source(found: dict[str, tuple[str, str, str]], copies) -> None:
    """Each planted copy refused as contaminated, naming the held-out task it copies, at the gate's threshold."""
    for copy_ in copies:
        _, reason, detail = found[copy_.candidate_id]
        assert reason == "contaminated", (copy_.prompt, detail)
        assert detail.startswith(f"nearest held-out task {copy_.provenance['copy_of']}: similarity "), detail
        assert float(detail.split("similarity ")[1].split()[0]) >= contamination.DEFAULT_THRESHOLD


def embedder_for(db):
    with Store(db) as store:
        texts = [r[0] for r in store.execute("SELECT prompt FROM tasks UNION SELECT prompt FROM candidates").fetchall()]
        return one_hot_embedder(store, texts)


# -- calc ---------------------------------------------------------------------------------------------------

def calc_copies(held: list[dict]) -> list[Candidate]:
    """Near copies of one-turn held-out calc tasks that the calc schema accepts: the facts in another order, a
    distractor renamed, a distractor's number changed, and one operand changed (its target recomputed).

    A calc task is a few words and numbers: one changed literal changes 2 of the union's features, so it stays
    at or above 0.8 only in a task of 9 features or more (two distractors and two calls or more). In a shorter
    one (``y is 36. x is 81. Add 56.`` with y renamed w: 0.75) it is as far from its original as distinct
    held-out calc tasks can be from each other (up to 0.89): the gate lets it through."""
    one_turn = [t for t in held if "turns" not in t["spec"]]
    with_distractor = [t for t in one_turn if t["spec"]["skill"]["distractors"] >= 1]
    long = [t for t in one_turn if t["spec"]["skill"]["distractors"] == 2 and t["spec"]["skill"]["calls"] >= 2]
    copies = []
    for task in with_distractor[:2]:  # sentence order: the facts reversed, the instruction last
        *facts, instruction = re.split(r"(?<=\.) ", task["prompt"])
        prompt = " ".join([*facts[::-1], instruction])
        assert prompt != task["prompt"]
        copies.append(planted("calc", task, prompt, {**task["spec"], "prompt": prompt}))
    for task in long[2:4]:  # a name: the distractor y called w
        prompt = task["prompt"].replace("y is", "w is")
        copies.append(planted("calc", task, prompt, {**task["spec"], "prompt": prompt}))
    task = long[0]  # a number: one distractor's value, to one no other fact holds
    value = re.search(r"y is (\d+)", task["prompt"]).group(1)
    prompt = task["prompt"].replace(f"y is {value}.", "y is 97.")
    copies.append(planted("calc", task, prompt, {**task["spec"], "prompt": prompt}))
    task = long[1]  # a number: the first operand, the target following it
    spec = copy.deepcopy(task["spec"])
    old = spec["steps"][0]["n"]
    spec["steps"][0]["n"] = old + 1 if spec["steps"][0]["op"] != "mul" else (old % 9) + 2
    spec["target"] = run_steps(spec["start"], spec["steps"])
    words = spec["prompt"].split(", then ")
    words[0] = re.sub(rf"\b{old}\.?$", lambda m: m.group(0).replace(str(old), str(spec["steps"][0]["n"])),
                      words[0])
    spec["prompt"] = ", then ".join(words)
    spec["skill"] = skill_of(spec)
    copies.append(planted("calc", task, spec["prompt"], spec))
    return copies


@pytest.fixture(scope="module")
def calc_round(tmp_path_factory):
    """The calc demo's tasks, a normal offline:calc round of 30 candidates and 6 planted near copies, validated."""
    environment = load_environment("calc")
    db = tmp_path_factory.mktemp("calc-contamination") / "store.duckdb"
    train, held = seed_tasks(environment, 160) + frontier_tasks(environment, 40), held_out(environment)
    copies = calc_copies(held)
    assert all(not environment.check_spec(c.spec) for c in copies), [environment.check_spec(c.spec) for c in copies]
    with Store(db) as store:
        store.add_records("tasks", train)
        store.add_records("tasks", held)
        store.add_records("trajectories", rollouts(train[:30]))
        insert_patterns(store, train[:30])
        synthesize(store, synthesizer="offline:calc", max_candidates=30, seed=0)
        write_candidates(store, copies)
    validate_candidates(db, env=environment, options=ValidationOptions(embedder=embedder_for(db)))
    return db, copies


def test_every_planted_calc_copy_is_refused_naming_its_held_out_task(calc_round):
    db, copies = calc_round
    found = verdicts(db)
    assert_refused_naming_their_source(found, copies)


def test_a_normal_calc_round_goes_through_but_for_one_literal_variants_of_held_out_tasks(calc_round):
    db, _ = calc_round
    normal = {cid: v for cid, v in verdicts(db).items() if v[0] == "offline:calc"}
    refused = sorted(v[2] for v in normal.values() if v[1] == "contaminated")
    # refusal rate on the normal round: 2 of 30 (6.7%), each a held-out task with one literal changed or one turn
    # added ('x is 5. Subtract 3, then multiply by 9.' against held-out 'x is 5. Subtract 8, then multiply by 9.')
    print(f"calc normal round: {len(refused)} of {len(normal)} refused as contaminated")
    assert len(normal) == 30 and len(refused) == 2, refused
    assert [d.split(": similarity ")[1][:6] for d in refused] == ["0.8333", "0.8000"]
    assert sum(v[1] == "accepted" for v in normal.values()) == 28


def test_the_contamination_view_names_the_planted_calc_copies_once_they_are_tasks(calc_round, tmp_path):
    """The planted copies ingested as training tasks (a store that came from elsewhere): the view flags each one
    with the held-out task it copies, at the gate's similarity."""
    db, copies = calc_round
    with Store(tmp_path / "ingested.duckdb") as store:
        with Store(db, read_only=True) as source:
            held = [{"task_id": t, "env": "calc", "prompt": p, "spec": json.loads(s), "split": "eval"}
                    for t, p, s in source.execute("SELECT task_id, prompt, spec FROM tasks WHERE split = 'eval'")
                    .fetchall()]
        store.add_records("tasks", held)
        store.add_records("tasks", [{"task_id": f"ingested/{i}", "env": "calc", "prompt": c.prompt, "spec": c.spec}
                                    for i, c in enumerate(copies)])
        rows = store.execute("SELECT task_id, held_out_task_id, similarity, contaminated FROM contamination "
                             "ORDER BY task_id").fetchall()
        details = verdicts(db)
    assert [(task_id, held_out_id, flagged) for task_id, held_out_id, _, flagged in rows] == [
        (f"ingested/{i}", c.provenance["copy_of"], True) for i, c in enumerate(copies)]
    for (_, _, value, _), copy_ in zip(rows, copies):  # the view's measure is the gate's
        assert f"similarity {value:.4f} >=" in details[copy_.candidate_id][2]


# -- BFCL ---------------------------------------------------------------------------------------------------

HELD_OUT_STRIDE = 6  # the pattern store holds every sixth multi_turn_base task from 0; these start at 1


def bfcl_draft_copies(held: list[dict]) -> list[Candidate]:
    """Near copies of held-out BFCL tasks written as drafts in the held-out task's world: every number and every
    quoted name of the user turns changed, the sentences of each turn in reverse order, the ground truth kept."""
    from coevolve_engine.adapters.environments.bfcl.drafts import spec_from_draft

    def edit(text: str) -> str:
        text = re.sub(r"\d+", lambda m: str(int(m.group(0)) + 7), text)
        text = re.sub(r"'([^'\s]+)'", lambda m: f"'new_{m.group(1)}'", text)
        return " ".join(re.split(r"(?<=[.?!])\s+", text.strip())[::-1])

    copies = []
    for task in held:
        turns = [edit(turn[0]["content"]) for turn in task["spec"]["turns"]]
        draft = {"turns": turns, "ground_truth": task["spec"]["ground_truth"], "completion_criterion": "as before"}
        spec = spec_from_draft(task["spec"], draft)
        copies.append(planted("bfcl", task, turns[0], spec))
    return copies


@pytest.fixture(scope="module")
def bfcl_round(tmp_path_factory):
    """The BFCL pattern store (30 training tasks), 20 held-out multi_turn_base tasks, a normal offline:bfcl round
    of 12 candidates and a planted draft copy of 5 held-out tasks, validated."""
    pytest.importorskip("bfcl_eval")
    from bfcl_patterns import build_pattern_store

    environment = load_environment("bfcl")
    db = tmp_path_factory.mktemp("bfcl-contamination") / "store.duckdb"
    build_pattern_store(db, tasks=30)
    tasks = list(environment.load_tasks(category="multi_turn_base"))
    held = [{**task, "split": "eval"} for task in tasks[1::HELD_OUT_STRIDE][:20]]
    copies = bfcl_draft_copies(held[::4])
    with Store(db) as store:
        store.add_records("tasks", held)
        synthesize(store, synthesizer="offline:bfcl", max_candidates=12, seed=0)
        write_candidates(store, copies)
    validate_candidates(db, env=environment, options=ValidationOptions(embedder=embedder_for(db)))
    return db, copies


def test_every_planted_bfcl_draft_copy_is_refused_and_the_normal_round_is_not(bfcl_round):
    db, copies = bfcl_round
    found = verdicts(db)
    assert_refused_naming_their_source(found, copies)
    normal = [v for v in found.values() if v[0] == "offline:bfcl"]
    refused = [v for v in normal if v[1] == "contaminated"]
    print(f"bfcl normal round: {len(refused)} of {len(normal)} refused as contaminated")
    assert len(normal) == 12 and refused == []
    assert all(v[2] for v in normal)  # the check ran on each, and passed
    assert sum(v[1] == "accepted" for v in normal) >= 10


def test_the_contamination_view_agrees_with_the_gate_on_bfcl(bfcl_round):
    """Every accepted candidate is a training task now: the view gives the similarity the gate measured."""
    db, _ = bfcl_round
    with Store(db, read_only=True) as store:
        rows = store.execute(
            "SELECT v.similarity, v.held_out_task_id, c.checks FROM contamination AS v "
            "JOIN candidates AS c USING (task_id) ORDER BY task_id").fetchall()
        assert not store.execute("SELECT task_id FROM contamination WHERE contaminated").fetchall()
    assert rows
    for value, held_out_id, checks in rows:
        (detail,) = [c["detail"] for c in json.loads(checks) if c["check"] == "contaminated"]
        assert detail.startswith(f"nearest held-out task {held_out_id}: similarity {value:.4f} <")


def test_a_threshold_outside_0_1_is_refused(tmp_path):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.core.errors import CoevolveError

    with pytest.raises(CoevolveError, match="contamination_threshold must be in"):
        validate_candidates(tmp_path / "none.duckdb", options=ValidationOptions(contamination_threshold=1.5))
    result = CliRunner().invoke(cli, ["validate", "--contamination-threshold", "0", "--db", str(tmp_path / "s.duckdb")])
    assert result.exit_code == 2 and "--contamination-threshold" in result.output and "Traceback" not in result.output
