"""Held-out tasks stay held out: on a store of training tasks with their rollouts and failure patterns, plus eval
tasks (split 'eval') that are twins of the pattern's tasks (same prompt and spec, another id) and one eval task of
its own, no eval task is weighed, drawn, rolled out, flagged, clustered, used as a synthesis seed or parent, or
compared against for novelty; a candidate that shares an eval task's first message is kept, with its
eval_similarity at 1, and one that repeats an eval task is refused as contaminated.

Everything runs through the engine's own functions on a real store (the BFCL pattern store of conftest.py, and a
small calc store built the same way); novelty uses the real Embedder, served from its cache in the store, where
each distinct prompt has a one-hot vector, so every similarity is exactly 0 or 1.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bfcl_patterns import insert_patterns, rollouts
from coevolve_engine.curriculum import WeightedGroupSampler, compute_weights
from coevolve_engine.models.embeddings import Embedder, text_hash
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis.candidates import (
    Candidate,
    load_patterns,
    load_synthesizer,
    write_candidates,
)
from coevolve_engine.trainers.base import BatchSource

STRATEGIES = ("uniform", "coevolve", "plr", "dapo-filter")
HELD_OUT = "bfcl/multi_turn_base_1"  # not among the pattern store's 30 tasks (every sixth of multi_turn_base)


def eval_twins(store: Store, env: str, prefix: str) -> list[str]:
    """An eval task with the same prompt and spec as each training task of ``env`` that a pattern holds."""
    member_ids = sorted({task_id for pattern in load_patterns(store) for task_id in pattern.task_ids})
    rows = store.execute("SELECT task_id, prompt, spec FROM tasks WHERE list_contains($ids, task_id) "
                         "ORDER BY task_id", {"ids": member_ids}).fetchall()
    twins = [{"task_id": f"{prefix}/{task_id}", "env": env, "prompt": prompt, "spec": json.loads(spec),
              "source": "benchmark", "split": "eval"} for task_id, prompt, spec in rows]
    store.add_records("tasks", twins, label="eval twins")
    return [twin["task_id"] for twin in twins]


@pytest.fixture
def bfcl_store(db):
    """The BFCL pattern store (30 training tasks, 240 rollouts, one pattern per signal in round 1), with an eval
    twin of every pattern task and one eval task of its own (HELD_OUT)."""
    from coevolve_engine.adapters.environments import load_environment

    (held_out,) = [t for t in load_environment("bfcl").load_tasks(category="multi_turn_base")
                   if t["task_id"] == HELD_OUT]
    with Store(db) as store:
        twins = eval_twins(store, "bfcl", "bfcl-eval")
        store.add_records("tasks", [{**held_out, "split": "eval"}], label="held-out task")
    return db, set(twins) | {HELD_OUT}


def train_ids(store: Store) -> set[str]:
    return {r[0] for r in store.execute("SELECT task_id FROM tasks WHERE split = 'train'").fetchall()}


# -- the curriculum and the trainers ------------------------------------------------------------------------

def test_no_strategy_weighs_an_eval_task_and_no_sampler_draws_one(bfcl_store):
    db, held_out = bfcl_store
    with Store(db) as store:
        assert len(held_out) == 31 and store.scalar("SELECT count(*) FROM tasks") == 61
        assert store.execute("SELECT count(*) FROM task_curriculum WHERE list_contains($ids, task_id)",
                             {"ids": sorted(held_out)}).fetchall() == [(0,)]
        train = train_ids(store)
        for strategy in STRATEGIES:
            weights = compute_weights(store, 2, strategy, replace=True)
            assert len(weights.task_ids) == 30 and set(weights.task_ids.tolist()) == train, strategy
            sampler = WeightedGroupSampler(weights.weights, group_size=4, groups_per_step=8, seed=3, num_batches=50)
            drawn = {weights.task_ids[index] for index in sampler}
            assert drawn <= train and not drawn & held_out, strategy
        assert store.scalar("SELECT tasks FROM weight_sets WHERE round = 2") == 30
    source = BatchSource.from_store(db, 2)
    assert set(source.task_ids()) == train and not set(source.weights()) & held_out


def test_rollouts_and_trainers_select_training_tasks_only(bfcl_store):
    db, held_out = bfcl_store
    with Store(db, read_only=True) as store:
        train = train_ids(store)
        assert {t["task_id"] for t in select_tasks(store, "bfcl")} == train
        # what the TRL and SFT trainers do with the weighted ids: an eval id among them is not selected
        asked = sorted(held_out) + sorted(train)[:2]
        assert [t["task_id"] for t in select_tasks(store, "bfcl", task_ids=asked)] == \
            [t["task_id"] for t in select_tasks(store, "bfcl", task_ids=sorted(train)[:2])]
        assert select_tasks(store, "bfcl", task_ids=sorted(held_out)) == []


def test_a_uniform_export_leaves_eval_tasks_out(bfcl_store):
    from coevolve_engine.trainers.export.weights import resolve_weights

    db, held_out = bfcl_store
    with Store(db, read_only=True) as store:
        resolved = resolve_weights(store, 0, uniform=True)
        assert set(resolved.weights) == train_ids(store)


def test_an_export_refuses_weights_that_name_an_eval_task(bfcl_store):
    from coevolve_engine.trainers.export import ExportError, load_tasks

    db, held_out = bfcl_store
    with Store(db, read_only=True) as store:
        train = sorted(train_ids(store))
        assert [t.task_id for t in load_tasks(store, {train[0]: 1.0})] == [train[0]]
        eval_one = sorted(held_out)[0]
        with pytest.raises(ExportError, match=f"held-out eval tasks.*{eval_one}"):
            load_tasks(store, {train[0]: 1.0, eval_one: 0.5})
        # a weight of 0 leaves it out, so naming it with 0 is harmless
        assert [t.task_id for t in load_tasks(store, {train[0]: 1.0, eval_one: 0.0})] == [train[0]]


def test_ingest_refuses_trajectories_of_an_eval_task_and_writes_nothing(bfcl_store, tmp_path):
    from coevolve_engine.core.errors import IngestError

    db, held_out = bfcl_store
    eval_one = sorted(held_out)[0]
    with Store(db) as store:
        train = sorted(train_ids(store))[0]
        before = store.scalar("SELECT count(*) FROM trajectories")
        rows = [{"task_id": train, "step": 9, "reward": 1.0, "success": True},
                {"task_id": eval_one, "step": 9, "reward": 0.0, "success": False}]
        path = tmp_path / "leak.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        with pytest.raises(IngestError, match=f"line 2.*task_id.*{eval_one}.*held-out eval task") as caught:
            store.ingest_trajectories(path)
        assert caught.value.field == "task_id" and caught.value.location == "line 2"
        # the whole file is one unit: the training task's rollout was not written either
        assert store.scalar("SELECT count(*) FROM trajectories") == before


# -- signals and patterns -----------------------------------------------------------------------------------

def test_signals_and_patterns_never_see_an_eval_task(bfcl_store):
    from coevolve_engine.patterns.select import select_flagged

    db, held_out = bfcl_store
    ids = {"ids": sorted(held_out)}
    with Store(db, read_only=True) as store:
        assert store.execute("SELECT count(*) FROM trajectories WHERE list_contains($ids, task_id)", ids
                             ).fetchall() == [(0,)]
        # 10 tasks per signal, 4 flagged rollouts each at step 1: the same 120 as without the eval tasks
        selection = select_flagged(store, 1, SignalParams(), limit=1000)
        assert selection.flagged == 120 and len(selection.rows) == 120
        assert not {row["task_id"] for row in selection.rows} & held_out
        assert store.execute("SELECT count(*) FROM flagged_trajectories WHERE list_contains($ids, task_id)", ids
                             ).fetchall() == [(0,)]
        # the per-task signal view lists every task: an eval task is there, never scored, never flagged
        assert store.execute(
            "SELECT count(*), count(latest_score), sum(forgetting_flags + boundary_groups + rare_trajectories) "
            "FROM task_signals WHERE list_contains($ids, task_id)", ids).fetchall() == [(31, 0, 0)]
        patterns = load_patterns(store)
        assert [p.pattern_id for p in patterns] == ["1-0", "1-1", "1-2"]
        assert all(set(p.tasks) <= train_ids(store) and not set(p.tasks) & held_out for p in patterns)


# -- synthesis: seeds and parents --------------------------------------------------------------------------

def parents(candidates: list[Candidate]) -> set[str]:
    return {parent for c in candidates for parent in c.provenance["parents"]}


def test_the_bfcl_synthesizer_never_seeds_or_splices_from_an_eval_task(bfcl_store):
    db, held_out = bfcl_store
    with Store(db, read_only=True) as store:
        patterns = load_patterns(store)
        made = load_synthesizer("offline:bfcl").propose(store, patterns, max_candidates=30, seed=0)
        train = train_ids(store)
    assert len(made) == 30
    assert parents(made) <= train and not parents(made) & held_out


def test_the_bfcl_synthesizer_seeds_from_training_tasks_only(bfcl_store):
    db, held_out = bfcl_store
    with Store(db, read_only=True) as store:
        made = load_synthesizer("offline:bfcl").propose(store, load_patterns(store), max_candidates=30, seed=0)
        members = {task_id for p in load_patterns(store) for task_id in p.task_ids}
    seeds = {c.provenance["parents"][0] for c in made}  # the first parent is the seed the operators start from
    assert seeds <= members and not seeds & held_out


@pytest.fixture
def calc_store(tmp_path):
    """12 calc seed tasks with the pattern store's rollouts and one pattern per signal (bfcl_patterns), and an
    eval twin of each."""
    from coevolve_engine.adapters.environments import load_environment

    tasks = list(load_environment("calc").load_tasks(split="seed", n=12))
    path = tmp_path / "calc.duckdb"
    with Store(path) as store:
        store.add_records("tasks", tasks)
        store.add_records("trajectories", rollouts(tasks))
        insert_patterns(store, tasks)
        twins = eval_twins(store, "calc", "calc-eval")
    return path, set(twins)


def test_the_calc_synthesizer_never_seeds_from_an_eval_task(calc_store):
    db, held_out = calc_store
    with Store(db, read_only=True) as store:
        made = load_synthesizer("offline:calc").propose(store, load_patterns(store), max_candidates=12, seed=0)
        train = train_ids(store)
    assert len(held_out) == 12 and len(made) == 12
    assert parents(made) <= train and not parents(made) & held_out
    # nor do eval tasks shape what it proposes (its duplicate check and skill counts): without them, the same
    with Store(db) as store:
        store.execute("DELETE FROM tasks WHERE split = 'eval'")
        again = load_synthesizer("offline:calc").propose(store, load_patterns(store), max_candidates=12, seed=0)
    assert [c.candidate_id for c in again] == [c.candidate_id for c in made]


# -- validation: novelty ignores eval tasks, eval_similarity measures them -----------------------------------

def one_hot_embedder(store: Store, texts: list[str]) -> Embedder:
    """The real Embedder, with a one-hot vector cached for each distinct text (so it never loads a model)."""
    distinct = sorted(set(texts))
    embedder = Embedder(model_path="unused: every vector is cached", model_name="one-hot")
    for index, text in enumerate(distinct):
        vector = np.zeros(len(distinct), dtype=np.float32)
        vector[index] = 1.0
        store.execute("INSERT INTO embeddings (text_hash, model, dim, vector) VALUES ($h, 'one-hot', $d, $v)",
                      {"h": text_hash(text), "d": len(distinct), "v": vector.tolist()})
    return embedder


def test_novelty_ignores_eval_tasks_and_eval_similarity_measures_them(bfcl_store):
    from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates

    db, held_out = bfcl_store
    with Store(db) as store:
        (spec,) = [json.loads(s) for (s,) in store.execute("SELECT spec FROM tasks WHERE task_id = $t",
                                                           {"t": HELD_OUT}).fetchall()]
        (train_spec,) = [json.loads(s) for (s,) in store.execute(
            "SELECT spec FROM tasks WHERE task_id = 'bfcl/multi_turn_base_0'").fetchall()]
        prompt = spec["turns"][0][0]["content"]
        # the eval task's first message, then another task's turns (BFCL has tasks sharing a first message)
        first_of_eval = Candidate.create(round=1, pattern_id="1-0", signal="forgetting", env="bfcl",
                                         synthesizer="test", prompt=prompt,
                                         spec={**train_spec, "turns": [[{"role": "user", "content": prompt}],
                                                                       *train_spec["turns"][1:]]})
        copy_of_eval = Candidate.create(round=1, pattern_id="1-0", signal="forgetting", env="bfcl",
                                        synthesizer="test", prompt=prompt, spec=spec)
        copy_of_train = Candidate.create(round=1, pattern_id="1-0", signal="forgetting", env="bfcl",
                                         synthesizer="test", prompt=train_spec["turns"][0][0]["content"],
                                         spec={**train_spec, "bfcl_id": "copy"})
        unfit = Candidate.create(round=1, pattern_id="1-0", signal="forgetting", env="bfcl", synthesizer="test",
                                 prompt="no such api", spec={**spec, "involved_classes": ["NoSuchAPI"]})
        write_candidates(store, [first_of_eval, copy_of_train, unfit, copy_of_eval])
        texts = [r[0] for r in store.execute("SELECT prompt FROM tasks").fetchall()] + ["no such api"]
        embedder = one_hot_embedder(store, texts)

    report = validate_candidates(db, options=ValidationOptions(embedder=embedder))

    assert [(v.reason, v.novelty, v.eval_similarity) for v in report.verdicts] == [
        ("accepted", 0.0, 1.0),      # the eval task's first message: new to training, identical to an eval prompt
        ("contaminated", None, 1.0),  # a training task's prompt and spec, which its eval twin has too
        ("schema", None, 0.0),       # measured whatever the verdict
        ("contaminated", None, 1.0),  # the eval task itself
    ]
    assert "eval tasks are held out" in report.verdicts[0].checks[-1].detail
    assert report.verdicts[3].checks[-1].detail.startswith(f"nearest held-out task {HELD_OUT}: similarity 1.0000 >=")
    with Store(db, read_only=True) as store:
        assert store.execute("SELECT verdict, reason, novelty, eval_similarity FROM candidates ORDER BY created_at"
                             ).fetchall() == [("accepted", "accepted", 0.0, 1.0),
                                              ("rejected", "contaminated", None, 1.0),
                                              ("rejected", "schema", None, 0.0),
                                              ("rejected", "contaminated", None, 1.0)]
        meta = json.loads(store.scalar("SELECT meta FROM tasks WHERE task_id = $t", {"t": first_of_eval.task_id}))
        assert meta["eval_similarity"] == 1.0
        assert store.scalar("SELECT split FROM tasks WHERE task_id = $t", {"t": first_of_eval.task_id}) == "train"
        assert store.execute("SELECT round, bin, candidates, accepted, rejected FROM drift_eval_similarity "
                             "ORDER BY bin_low").fetchall() == [(1, "[-1, 0.5)", 1, 0, 1), (1, "[0.9, 1]", 3, 1, 2)]


def test_eval_similarity_is_null_without_eval_tasks(db):
    from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates

    with Store(db) as store:
        spec = json.loads(store.scalar("SELECT spec FROM tasks WHERE task_id = 'bfcl/multi_turn_base_0'"))
        fresh = Candidate.create(round=1, pattern_id=None, signal=None, env="bfcl", synthesizer="test",
                                 prompt="a prompt no task has", spec={**spec, "turns": [
                                     [{"role": "user", "content": "a prompt no task has"}], *spec["turns"][1:]]})
        write_candidates(store, [fresh])
        texts = [r[0] for r in store.execute("SELECT prompt FROM tasks").fetchall()] + [fresh.prompt]
        embedder = one_hot_embedder(store, texts)
    (verdict,) = validate_candidates(db, options=ValidationOptions(embedder=embedder)).verdicts
    assert (verdict.reason, verdict.novelty, verdict.eval_similarity) == ("accepted", 0.0, None)
    with Store(db, read_only=True) as store:
        assert store.execute("SELECT eval_similarity FROM candidates").fetchall() == [(None,)]
        assert store.execute("SELECT count(*) FROM drift_eval_similarity").fetchall() == [(0,)]
