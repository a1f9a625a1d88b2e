"""Table-driven tests of the drift views: a small literal table in, the exact rows out, per view.

The scenario stores of tests/test_drift.py check the views together; here each view gets rows written by
hand (edge cases included: nothing decided yet, no weight set, a round without rollouts, ties)."""

from __future__ import annotations

import json

from test_views import load, rows, traj  # noqa: F401 (load is a fixture)


def candidate(store, cid, round_, signal, verdict, *, pattern=None, task=None):
    store.execute("INSERT INTO candidates (candidate_id, round, pattern_id, signal, env, synthesizer, verdict, task_id) "
                  "VALUES ($c, $r, $p, $s, 'calc', 'test', $v, $t)",
                  {"c": cid, "r": round_, "p": pattern, "s": signal, "v": verdict, "t": task})


def evaluation(store, eid, round_, label, tasks, successes, step, created):
    store.execute("INSERT INTO evaluations (eval_id, policy, round, label, env, tasks, successes, success_rate, step, "
                  "created_at) VALUES ($e, 'p', $r, $l, 'calc', $n, $k, $k / $n, $s, CAST($t AS TIMESTAMP))",
                  {"e": eid, "r": round_, "l": label, "n": tasks, "k": successes, "s": step,
                   "t": f"2026-12-01 10:00:{created:02d}"})


def run_round(store, round_, first, steps_per_round):
    store.execute("INSERT INTO rounds (round, status, config, first_step) VALUES ($r, 'finished', $c, $f)",
                  {"r": round_, "c": json.dumps({"trainer": {"steps_per_round": steps_per_round}}), "f": first})


def weights(store, round_, weighted):
    store.execute("INSERT INTO weight_sets (round, strategy, params, tasks, nonzero, reason) "
                  "VALUES ($r, 'test', '{}', $n, $n, 'by hand')", {"r": round_, "n": len(weighted)})
    for task, weight in weighted.items():
        store.execute("INSERT INTO task_weights (round, task_id, weight, strategy) VALUES ($r, $t, $w, 'test')",
                      {"r": round_, "t": task, "w": weight})


# -- drift_candidates -----------------------------------------------------------------------------

def test_drift_candidates_counts_verdicts_per_round_and_signal(store):
    candidate(store, "c1", 0, "boundary", "accepted", pattern="p1")
    candidate(store, "c2", 0, "boundary", "rejected", pattern="p1")
    candidate(store, "c3", 0, "boundary", "pending", pattern="p2")
    candidate(store, "c4", 0, "rare", "pending", pattern="p3")  # nothing decided: acceptance NULL
    candidate(store, "c5", 1, None, "accepted")  # unguided: no signal, no pattern
    assert rows(store, "SELECT * FROM drift_candidates") == [
        (0, "boundary", 3, 1, 1, 1, 0.5, 2),
        (0, "rare", 1, 0, 0, 1, None, 1),
        (1, None, 1, 1, 0, 0, 1.0, 0),
    ]


def test_drift_candidates_of_a_store_without_candidates_is_empty(store):
    assert rows(store, "SELECT * FROM drift_candidates") == []


# -- drift_eval and drift_eval_rounds ---------------------------------------------------------------

def test_drift_eval_is_one_row_per_evaluation(store):
    evaluation(store, "e0", None, "start", 4, 1, 0, 1)
    evaluation(store, "e1", 0, "round 0", 4, 3, 2, 2)
    assert rows(store, "SELECT step, round, label, env, tasks, successes, success_rate, eval_id, policy "
                       "FROM drift_eval") == [
        (0, None, "start", "calc", 4, 1, 0.25, "e0", "p"),
        (2, 0, "round 0", "calc", 4, 3, 0.75, "e1", "p"),
    ]


def test_drift_eval_rounds_takes_each_rounds_latest_evaluation(store):
    evaluation(store, "e0", None, "start", 4, 1, 0, 1)  # the starting policy: no round
    evaluation(store, "e1", 0, "round 0", 4, 2, 2, 2)
    evaluation(store, "e2", 0, "round 0", 5, 4, 2, 3)  # evaluated again, later: this one counts
    evaluation(store, "e3", 1, "round 1", 4, 4, 4, 4)
    evaluation(store, "e4", 1, "round 1", 4, 0, 4, 4)  # a tie on created_at: the larger eval_id counts
    assert rows(store, "SELECT * FROM drift_eval_rounds") == [(0, 0.8, 5, 2, 2), (1, 0.0, 4, 4, 2)]


# -- drift_steps_with, drift_steps and drift_tools -----------------------------------------------------

def test_drift_steps_with_success_against_step_and_its_round(load):
    store = load([traj("a", 1, 1.0), traj("a", 1, 0.5), traj("b", 2, 0.0), traj("b", 2, 0.2, success=True),
                  traj("b", 5, 0.4)])
    run_round(store, 0, 1, 2)  # steps 1..2; step 5 is in no round
    assert rows(store, "SELECT * FROM drift_steps_with()") == [(1, 0, 2, 2, 1.0, 0.75), (2, 0, 2, 1, 0.5, 0.1),
                                                               (5, None, 1, 0, 0.0, 0.4)]
    assert rows(store, "SELECT * FROM drift_steps_with(threshold := 1.0)")[0] == (1, 0, 2, 1, 0.5, 0.75)
    assert rows(store, "SELECT * FROM drift_steps") == rows(store, "SELECT * FROM drift_steps_with()")


def test_drift_tools_counts_calls_per_round(load):
    store = load([traj("a", 1, 1.0, pattern="add>add>mul"), traj("a", 1, 0.0, pattern="sub"),
                  traj("a", 2, 0.0, pattern=""), traj("b", 3, 1.0, pattern="mul")])
    run_round(store, 0, 1, 2)
    run_round(store, 1, 3, 2)
    assert rows(store, "SELECT * FROM drift_tools") == [
        (0, "add", 2, 0.5, 1), (0, "mul", 1, 0.25, 1), (0, "sub", 1, 0.25, 1), (1, "mul", 1, 1.0, 1),
    ]


# -- drift_task_sets, drift_synthesis and drift_synthesis_sources ---------------------------------------

def synthesized_store(store, jsonl):
    store.ingest_tasks(jsonl([{"task_id": "a", "source": "seed"}, {"task_id": "b", "source": "seed"},
                              {"task_id": "s1", "source": "synthesized"}, {"task_id": "s2", "source": "synthesized"}]))
    store.ingest_trajectories(jsonl([traj("a", 3, 1.0), traj("s2", 3, 0.0)]))
    weights(store, 0, {"a": 1.0, "b": 3.0})
    weights(store, 1, {"a": 1.0, "b": 1.0, "s1": 2.0})
    run_round(store, 2, 3, 1)  # round 2 has no weight set: its set is the tasks its rollouts attempted
    candidate(store, "c1", 0, "boundary", "accepted", pattern="p1", task="s1")
    return store


def test_drift_task_sets_lists_each_rounds_set_with_what_is_new(store, jsonl):
    store = synthesized_store(store, jsonl)
    assert rows(store, "SELECT * FROM drift_task_sets") == [
        (0, "a", 1.0, 0.25, "seed", False, None, None),
        (0, "b", 3.0, 0.75, "seed", False, None, None),
        (1, "a", 1.0, 0.25, "seed", False, 0, False),
        (1, "b", 1.0, 0.25, "seed", False, 0, False),
        (1, "s1", 2.0, 0.5, "synthesized", True, 0, True),
        (2, "a", None, None, "seed", False, 1, False),
        (2, "s2", None, None, "synthesized", True, 1, True),
    ]


def test_drift_synthesis_sums_each_rounds_set(store, jsonl):
    store = synthesized_store(store, jsonl)
    assert rows(store, "SELECT * FROM drift_synthesis") == [
        (0, 2, 0, 0.0, 0.0, None, None),
        (1, 3, 1, round(1 / 3, 9), 0.5, 1, 1),
        (2, 2, 1, 0.5, None, 1, 1),
    ]


def test_drift_synthesis_sources_traces_synthesized_tasks_to_their_candidates(store, jsonl):
    store = synthesized_store(store, jsonl)
    assert rows(store, "SELECT * FROM drift_synthesis_sources") == [
        (1, "boundary", "p1", 0, 1, round(1 / 3, 9)),
        (2, None, None, None, 1, 0.5),  # s2 has no accepted candidate row
    ]


# -- drift_difficulty_with and drift_env_classes -----------------------------------------------------

def test_drift_difficulty_with_the_spread_of_per_task_success(load):
    store = load([traj("a", 1, 1.0), traj("a", 2, 1.0),  # solved
                  traj("b", 1, 1.0), traj("b", 1, 0.0), traj("b", 2, 0.0), traj("b", 2, 0.0),  # 1 of 4
                  traj("c", 2, 0.0),  # unsolved, one rollout
                  traj("d", 3, 0.5)])  # round 1: a tie at the threshold succeeds
    run_round(store, 0, 1, 2)
    run_round(store, 1, 3, 1)
    assert rows(store, "SELECT * FROM drift_difficulty_with()") == [
        (0, 3, 7, round(3 / 7, 9), 0.05, 0.125, 0.25, 0.625, 0.85, 1, 1),
        (1, 1, 1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1, 0),
    ]
    assert rows(store, "SELECT round, success_rate, solved, unsolved FROM drift_difficulty_with(threshold := 0.6) "
                       "WHERE round = 1") == [(1, 0.0, 0, 1)]
    assert rows(store, "SELECT * FROM drift_difficulty") == rows(store, "SELECT * FROM drift_difficulty_with()")


def test_drift_env_classes_counts_rollouts_per_class(store, jsonl):
    store.ingest_tasks(jsonl([
        {"task_id": "fs", "env": "bfcl", "spec": {"involved_classes": ["GorillaFileSystem", "MathAPI"]}},
        {"task_id": "x", "env": "calc", "spec": {}},  # no classes: counted under its env
    ]))
    store.ingest_trajectories(jsonl([traj("fs", 1, 1.0), traj("fs", 1, 0.0), traj("x", 2, 1.0),
                                     traj("ghost", 2, 0.0)]), create_tasks=True)  # a placeholder task: no env
    run_round(store, 0, 1, 2)
    assert rows(store, "SELECT * FROM drift_env_classes") == [
        (0, "(unknown)", 1, 1, 0.25), (0, "GorillaFileSystem", 2, 1, 0.5), (0, "MathAPI", 2, 1, 0.5),
        (0, "calc", 1, 1, 0.25),
    ]


# -- drift_signals_with and drift_eval_steps_with --------------------------------------------------

def flagged_store(load):
    store = load([traj("a", 1, 1.0), traj("a", 3, 0.0),  # forgetting fires at step 3 (round 1)
                  traj("b", 2, 1.0, group="g1"), traj("b", 2, 0.0, group="g1"),  # a mixed group: boundary
                  traj("c", 4, 1.0)])
    run_round(store, 0, 1, 2)
    run_round(store, 1, 3, 2)
    run_round(store, 2, 5, 1)  # a round without rollouts
    return store


def test_drift_signals_with_counts_each_rounds_flagged_rollouts(load):
    store = flagged_store(load)
    assert rows(store, "SELECT * FROM drift_signals_with()") == [
        (0, 3, 2, 0, 2, 0, round(2 / 3, 9)), (1, 2, 1, 1, 0, 0, 0.5), (2, 0, 0, 0, 0, 0, None),
    ]
    # with a threshold no score reaches, no earlier success exists to forget
    assert rows(store, "SELECT round, forgetting FROM drift_signals_with(w := 1, threshold := 1.5)") == [
        (0, 0), (1, 0), (2, 0)]
    assert rows(store, "SELECT * FROM drift_signals") == rows(store, "SELECT * FROM drift_signals_with()")


def test_drift_eval_steps_with_puts_held_out_success_next_to_the_flags(load):
    store = flagged_store(load)
    evaluation(store, "e0", None, "start", 4, 1, 0, 1)  # the starting policy, at the step before the first
    evaluation(store, "e1", 0, "round 0", 4, 3, 2, 2)
    assert rows(store, "SELECT * FROM drift_eval_steps_with()") == [
        (0, None, 0, 0, 0, 0, 0, 0.25, 4, 1),
        (1, 0, 1, 0, 0, 0, 0, None, None, 0),
        (2, 0, 2, 2, 0, 2, 0, 0.75, 4, 1),
        (3, 1, 1, 1, 1, 0, 0, None, None, 0),
        (4, 1, 1, 0, 0, 0, 0, None, None, 0),
    ]
    assert rows(store, "SELECT * FROM drift_eval_steps") == rows(store, "SELECT * FROM drift_eval_steps_with()")


# -- drift_rounds over step windows, and drift_ends_with -------------------------------------------------

def windows(store, size):
    store.execute(f"SET VARIABLE drift_window = {size}")
    return rows(store, "SELECT round, status, first_step, last_step, steps_from FROM drift_rounds")


def test_step_windows_follow_the_steps_that_exist(load):
    store = load([traj("a", step, 1.0) for step in (0, 1, 2, 3, 4, 100, 101)])
    assert windows(store, 2) == [(0, "window", 0, 1, "window"), (1, "window", 2, 3, "window"),
                                 (2, "window", 4, 4, "window"), (3, "window", 100, 101, "window")]   # none spans 5-99
    assert windows(store, 10) == [(0, "window", 0, 4, "window"), (1, "window", 100, 101, "window")]


def test_step_windows_take_the_usual_spacing_of_the_steps(load):
    store = load([traj("a", step, 1.0) for step in (0, 10, 20, 40)])   # a rollout every 10 steps, 30 missing
    assert windows(store, 2) == [(0, "window", 0, 10, "window"), (1, "window", 20, 20, "window"),
                                 (2, "window", 40, 40, "window")]
    store.execute("RESET VARIABLE drift_window")
    assert rows(store, "SELECT round, first_step, last_step FROM drift_rounds") == [(0, 0, 40)]   # rounds: one


def test_drift_ends_with_compares_the_tasks_scored_at_both_ends(load):
    store = load([traj("a", 0, 1.0), traj("a", 0, 0.0), traj("b", 0, 1.0), traj("b", 0, 1.0), traj("a", 1, 0.0),
                  traj("a", 101, 1.0), traj("a", 101, 0.6), traj("c", 101, 0.0)])
    windows(store, 1)
    assert rows(store, "SELECT * FROM drift_ends_with()") == [   # over a alone: b and c are at one end only
        ("first", 0, 0, 0, 2, 1, 2, 1, 0.5, 0.5), ("last", 2, 101, 101, 2, 1, 2, 2, 1.0, 0.8)]
    assert rows(store, "SELECT \"end\", successes, success_rate FROM drift_ends_with(threshold := 0.7)") == [
        ("first", 1, 0.5), ("last", 1, 0.5)]


def test_drift_ends_with_no_shared_task_or_one_window(load):
    store = load([traj("b", 0, 1.0), traj("c", 5, 0.0)])
    windows(store, 1)
    assert rows(store, "SELECT * FROM drift_ends_with()") == [
        ("first", 0, 0, 0, 1, 0, 0, 0, None, None), ("last", 1, 5, 5, 1, 0, 0, 0, None, None)]
    windows(store, 10)   # one window holds both steps
    assert rows(store, "SELECT * FROM drift_ends_with()") == [("first", 0, 0, 5, 2, 2, 2, 1, 0.5, 0.5)]
    store.execute("RESET VARIABLE drift_window")
    store.execute("DELETE FROM trajectories")
    assert rows(store, "SELECT * FROM drift_ends_with()") == []
