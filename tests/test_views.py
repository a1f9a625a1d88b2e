"""Table-driven tests of every signal view and macro: literal input rows, exact expected rows."""

from __future__ import annotations

import math

import pytest


def traj(task, step, reward, *, group=None, success=None, pattern=None, tid=None):
    """A trajectory record; ``pattern`` 'a>b' becomes actions [a, b]; '' is an empty action list."""
    record = {"task_id": task, "step": step, "reward": reward}
    if group is not None:
        record["group_id"] = group
    if success is not None:
        record["success"] = success
    if pattern is not None:
        record["actions"] = [{"name": name, "arguments": {}} for name in pattern.split(">") if name]
    if tid is not None:
        record["trajectory_id"] = tid
    return record


def scores(task, *values, start=1):
    """One rollout per step with the given rewards, so each step's score is that reward."""
    return [traj(task, start + i, value) for i, value in enumerate(values)]


def rows(store, sql):
    def cell(value):
        return round(value, 9) if isinstance(value, float) and not math.isnan(value) else value

    return sorted((tuple(cell(v) for v in row) for row in store.execute(sql).fetchall()), key=repr)


@pytest.fixture
def load(store, jsonl):
    def ingest(records, tasks=None):
        if tasks:
            store.ingest_tasks(jsonl([{"task_id": t} for t in tasks]))
        if records:
            store.ingest_trajectories(jsonl(records), create_tasks=True)
        return store

    return ingest


# -- task_steps -----------------------------------------------------------------------------------

def test_task_steps_counts_successes_with_ties_at_the_threshold(load):
    store = load([traj("a", 1, 1.0), traj("a", 1, 0.0), traj("a", 1, 0.5), traj("b", 2, 0.49)])
    assert rows(store, "SELECT * FROM task_steps") == [("a", 1, 3, 2, 0.5), ("b", 2, 1, 0, 0.49)]


def test_task_steps_recorded_success_wins_over_the_threshold(load):
    store = load([traj("a", 1, 0.9, success=False), traj("a", 1, 0.1, success=True)])
    assert rows(store, "SELECT * FROM task_steps") == [("a", 1, 2, 1, 0.5)]


def test_task_steps_with_threshold(load):
    store = load([traj("a", 1, 0.5), traj("a", 1, 0.7)])
    assert rows(store, "SELECT * FROM task_steps_with(threshold := 0.6)") == [("a", 1, 2, 1, 0.6)]


def test_task_steps_empty_store(store):
    assert rows(store, "SELECT * FROM task_steps") == []


# -- forgetting -----------------------------------------------------------------------------------

def test_forgetting_task_scored_once_never_fires(load):
    store = load(scores("a", 0.0) + scores("b", 1.0))
    assert rows(store, "SELECT * FROM forgetting") == []


def test_forgetting_window_shorter_than_w(load):
    store = load(scores("a", 1.0, 0.0))
    assert rows(store, "SELECT * FROM forgetting") == [("a", 2, 0.0, 1.0, 1, 3, 0.5)]


def test_forgetting_fires_while_the_success_is_within_the_window(load):
    store = load(scores("a", 1.0, 0.0, 0.0, 0.0, 0.0))
    assert rows(store, "SELECT task_id, step, recent_best, window_scores FROM forgetting") == [
        ("a", 2, 1.0, 1), ("a", 3, 1.0, 2), ("a", 4, 1.0, 3),
    ]
    assert rows(store, "SELECT step FROM forgetting_with(w := 1)") == [(2,)]
    assert rows(store, "SELECT step, w FROM forgetting_with(w := 5)") == [(2, 5), (3, 5), (4, 5), (5, 5)]


def test_forgetting_ties_at_the_threshold(load):
    # 0.5 counts as solved before; a score of exactly 0.5 now is not a failure
    store = load(scores("a", 0.5, 0.49) + scores("b", 1.0, 0.5))
    assert rows(store, "SELECT task_id, step, score, recent_best FROM forgetting") == [("a", 2, 0.49, 0.5)]
    assert rows(store, "SELECT task_id, step FROM forgetting_with(threshold := 0.6)") == [("b", 2)]


def test_forgetting_all_failures_and_steady_success(load):
    store = load(scores("fail", 0.0, 0.0, 0.0) + scores("ok", 1.0, 1.0, 1.0))
    assert rows(store, "SELECT * FROM forgetting") == []


def test_forgetting_uses_step_means_and_ignores_step_gaps(load):
    records = [traj("a", 1, 1.0), traj("a", 1, 0.0), traj("a", 1, 1.0),  # score 2/3
               traj("a", 10, 0.0), traj("a", 10, 1.0), traj("a", 10, 0.0)]  # score 1/3
    store = load(records)
    assert rows(store, "SELECT task_id, step, score, recent_best FROM forgetting") == [
        ("a", 10, round(1 / 3, 9), round(2 / 3, 9)),
    ]


# -- forgetting_trajectories (the paper's per-trajectory form) --------------------------------------

FT = "SELECT trajectory_id, step, reward, recent_best, window_scores FROM forgetting_trajectories"


def test_forgetting_trajectories_task_scored_once_never_fires(load):
    store = load([traj("a", 1, 0.0, tid="a1"), traj("a", 1, 1.0, tid="a2"), traj("b", 1, 0.0, tid="b1")])
    assert rows(store, "SELECT * FROM forgetting_trajectories") == []


def test_forgetting_trajectories_fires_on_a_failed_rollout_where_the_step_mean_does_not(load):
    # step 2's mean is 0.5 (no group forgetting), but its failed rollout forgot the success of step 1
    store = load([traj("a", 1, 1.0, tid="a1"), traj("a", 2, 1.0, tid="a2"), traj("a", 2, 0.0, tid="a3")])
    assert rows(store, "SELECT * FROM forgetting") == []
    assert rows(store, "SELECT * FROM forgetting_trajectories") == [("a3", "a", 2, "a@2", 0.0, 1.0, 1, 3, 0.5)]


def test_forgetting_trajectories_window_shorter_than_w_and_older_scores_leave_it(load):
    store = load([traj("a", s, r, tid=f"a{s}") for s, r in [(1, 1.0), (2, 0.0), (3, 0.0), (4, 0.0), (5, 0.0)]])
    assert rows(store, FT) == [("a2", 2, 0.0, 1.0, 1), ("a3", 3, 0.0, 1.0, 2), ("a4", 4, 0.0, 1.0, 3)]
    assert rows(store, "SELECT trajectory_id FROM forgetting_trajectories_with(w := 1)") == [("a2",)]
    assert rows(store, "SELECT trajectory_id, w FROM forgetting_trajectories_with(w := 5)") == [
        ("a2", 5), ("a3", 5), ("a4", 5), ("a5", 5)]


def test_forgetting_trajectories_compares_with_earlier_step_scores_only(load):
    # a success in the same step does not count: the window holds earlier steps' mean scores (step 1: 0.25)
    store = load([traj("a", 1, 0.5, tid="a1"), traj("a", 1, 0.0, tid="a2"),
                  traj("a", 2, 1.0, tid="a3"), traj("a", 2, 0.0, tid="a4"),
                  traj("a", 3, 0.0, tid="a5")])  # step 2's score 0.5 is a success-level score
    assert rows(store, "SELECT trajectory_id, step, recent_best FROM forgetting_trajectories") == [("a5", 3, 0.5)]


def test_forgetting_trajectories_ties_and_recorded_success(load):
    store = load([traj("a", 1, 0.5, tid="a1"),  # exactly the threshold: solved
                  traj("a", 2, 0.5, tid="a2"),  # exactly the threshold now: not a failure
                  traj("a", 2, 0.49, tid="a3"),  # below: fires
                  traj("a", 2, 0.0, success=True, tid="a4"),  # recorded success wins over the reward
                  traj("a", 2, 0.9, success=False, tid="a5")])  # recorded failure wins too
    assert rows(store, "SELECT trajectory_id FROM forgetting_trajectories") == [("a3",), ("a5",)]
    assert rows(store, "SELECT trajectory_id FROM forgetting_trajectories_with(threshold := 0.6)") == []


def test_forgetting_trajectories_all_failures_steady_success_and_faults(load):
    store = load(scores("fail", 0.0, 0.0, 0.0) + scores("ok", 1.0, 1.0, 1.0)
                 + [traj("e", 1, 1.0, tid="e1"), {**traj("e", 2, 0.0, tid="e2"), "error": "the server timed out"}])
    assert rows(store, "SELECT * FROM forgetting_trajectories") == []


def test_flagged_trajectories_forgetting_form(load):
    store = load([traj("a", 1, 1.0, tid="a1"), traj("a", 2, 1.0, tid="a2"), traj("a", 2, 0.0, tid="a3"),
                  traj("b", 1, 1.0, tid="b1"), traj("b", 2, 0.0, tid="b2"), traj("b", 2, 0.0, tid="b3")])
    forgetting = "SELECT trajectory_id FROM flagged_trajectories_with(forgetting_form := '{}') WHERE signal = 'forgetting'"
    # group: every rollout of b at step 2 (mean 0 < 0.5); trajectory: each failed rollout after a success
    assert rows(store, forgetting.format("group")) == [("b2",), ("b3",)]
    assert rows(store, forgetting.format("trajectory")) == [("a3",), ("b2",), ("b3",)]
    assert rows(store, "SELECT * FROM flagged_trajectories") == rows(
        store, "SELECT * FROM flagged_trajectories_with(forgetting_form := 'group')")
    with pytest.raises(Exception, match="forgetting_form must be 'group' or 'trajectory', got 'steps'"):
        store.execute("SELECT * FROM flagged_trajectories_with(forgetting_form := 'steps')").fetchall()


# -- forgetting_events ----------------------------------------------------------------------------

def test_forgetting_events(load):
    store = load(scores("flip", 1.0, 0.0, 1.0, 0.0) + scores("tie", 0.5, 0.49, 0.5)
                 + scores("fail", 0.0, 0.0) + scores("once", 1.0))
    assert rows(store, "SELECT * FROM forgetting_events") == [
        ("fail", 2, 0), ("flip", 4, 2), ("once", 1, 0), ("tie", 3, 1),
    ]
    assert rows(store, "SELECT task_id, forgetting_events FROM forgetting_events_with(threshold := 1.0)") == [
        ("fail", 0), ("flip", 2), ("once", 0), ("tie", 0),
    ]


# -- forgetting_drops and forgetting_tasks: each forgetting event with what it cost, tasks ranked by it -----

FORGETTING_CASES = (scores("forgot", 1.0, 1.0, 1.0, 0.0, 0.0, 0.0) + scores("hover", 0.6, 0.4, 0.6, 0.4, 0.6)
                    + scores("tie", 0.5, 0.49) + scores("never", 0.0, 0.0) + scores("once", 1.0))


def test_forgetting_drops_one_row_per_event_with_its_stretch(load):
    store = load(FORGETTING_CASES)
    assert rows(store, "SELECT * FROM forgetting_drops") == [
        # task, step, previous, level_before (mean of up to w earlier), level_after, steps_down, last_down,
        # recovered, lost
        ("forgot", 4, 1.0, 1.0, 0.0, 3, 6, None, 3.0, 3, 0.5),       # still down at its last step
        ("hover", 2, 0.6, 0.6, 0.4, 1, 2, 3, 0.2, 3, 0.5),           # a window of one earlier score
        ("hover", 4, 0.6, 0.533333333, 0.4, 1, 4, 5, 0.133333333, 3, 0.5),
        ("tie", 2, 0.5, 0.5, 0.49, 1, 2, None, 0.01, 3, 0.5),        # 0.5 is at the threshold: solved
    ]
    assert rows(store, "SELECT task_id, step, level_before, lost FROM forgetting_drops_with(w := 1) "
                       "WHERE task_id = 'hover'") == [("hover", 2, 0.6, 0.2), ("hover", 4, 0.6, 0.2)]
    assert rows(store, "SELECT task_id, step FROM forgetting_drops_with(threshold := 0.7)") == [("forgot", 4)]


def test_forgetting_tasks_ranks_by_what_was_lost_not_by_crossings(load):
    store = load(FORGETTING_CASES)
    assert sorted(rows(store, "SELECT * FROM forgetting_tasks")) == [
        # rank, task, lost, step, level_before, level_after, steps_down, recovered, total_lost, events, flags,
        # first_step, last_step
        (1, "forgot", 3.0, 4, 1.0, 0.0, 3, None, 3.0, 1, 3, 4, 4),
        (2, "hover", 0.2, 2, 0.6, 0.4, 1, 3, 0.333333333, 2, 2, 2, 4),   # crossed twice, lost little
        (3, "tie", 0.01, 2, 0.5, 0.49, 1, None, 0.01, 1, 1, 2, 2),
    ]


def test_every_count_of_forgetting_events_is_the_drops(load):
    store = load(FORGETTING_CASES)
    drops = rows(store, "SELECT task_id, count(*) FROM forgetting_drops GROUP BY task_id")
    assert rows(store, "SELECT task_id, forgetting_events FROM forgetting_events WHERE forgetting_events > 0") == drops
    assert rows(store, "SELECT task_id, forgetting_events FROM forgetting_tasks") == drops
    assert rows(store, "SELECT task_id, forgetting_events FROM task_signals WHERE forgetting_events > 0") == drops
    # the steps the windowed signal fired are another count, under their own name, the same wherever shown
    assert rows(store, "SELECT task_id, forgetting_flags FROM forgetting_tasks") == rows(
        store, "SELECT task_id, forgetting_flags FROM task_signals WHERE forgetting_flags > 0") == [
        ("forgot", 3), ("hover", 2), ("tie", 1)]


def test_forgetting_drops_and_tasks_of_an_empty_store(store):
    assert rows(store, "SELECT * FROM forgetting_drops") == rows(store, "SELECT * FROM forgetting_tasks") == []


# -- group_outcomes and boundary -------------------------------------------------------------------

def test_boundary_mixed_groups_only(load):
    store = load([
        traj("a", 1, 1.0), traj("a", 1, 0.0), traj("a", 1, 0.0), traj("a", 1, 1.0),  # mixed, p = 0.5
        traj("b", 1, 0.0), traj("b", 1, 0.0),  # all failures
        traj("c", 1, 1.0),  # one rollout in the group: never mixed
        traj("d", 2, 0.5, group="g"), traj("d", 2, 0.49, group="g"),  # tie at the threshold: mixed
        traj("e", 3, 1.0), traj("e", 3, 1.0),  # all successes
    ])
    assert rows(store, "SELECT * FROM boundary") == [
        ("a", "a@1", 1, 4, 2, 0.5, 0.25), ("d", "g", 2, 2, 1, 0.5, 0.25),
    ]
    assert rows(store, "SELECT group_id, rollouts, successes, p, variance, mean_reward FROM group_outcomes") == [
        ("a@1", 4, 2, 0.5, 0.25, 0.5), ("b@1", 2, 0, 0.0, 0.0, 0.0), ("c@1", 1, 1, 1.0, 0.0, 1.0),
        ("e@3", 2, 2, 1.0, 0.0, 1.0), ("g", 2, 1, 0.5, 0.25, 0.495),
    ]
    assert rows(store, "SELECT group_id FROM boundary_with(threshold := 0.4)") == [("a@1",)]


def test_boundary_uneven_group(load):
    store = load([traj("a", 1, 1.0), traj("a", 1, 0.0), traj("a", 1, 0.0)])
    assert rows(store, "SELECT successes, p, variance FROM boundary") == [(1, round(1 / 3, 9), round(2 / 9, 9))]


# -- rare patterns ----------------------------------------------------------------------------------

RARE_RECORDS = [
    traj("t", 1, 1, pattern="a"), traj("t", 1, 1, pattern="a>a"), traj("t", 1, 1, pattern="a"),
    traj("t", 1, 1, pattern="b>a"),
    traj("u", 2, 1, pattern="b>a"), traj("u", 2, 1, pattern=""), traj("u", 2, 1),  # no actions: no pattern
]


def test_pattern_steps_cumulative_shares(load):
    store = load(RARE_RECORDS)
    # step 1: a x3 (a>a collapses to a), b>a x1, N = 4; step 2: b>a, '' -> N = 6
    assert rows(store, "SELECT * FROM pattern_steps_with(theta := 30, min_n := 4)") == [
        ("", 2, 1, 1, 6, round(1 / 6, 9), True),
        ("a", 1, 3, 3, 4, 0.75, False),
        ("b>a", 1, 1, 1, 4, 0.25, True),
        ("b>a", 2, 1, 2, 6, round(2 / 6, 9), False),
    ]


def test_pattern_steps_min_n_boundary(load):
    store = load(RARE_RECORDS)
    assert rows(store, "SELECT action_pattern, step FROM pattern_steps_with(theta := 30, min_n := 5) WHERE rare") == [
        ("", 2),
    ]
    # the defaults (theta 5, min_n 50): too few trajectories for anything to be rare
    assert rows(store, "SELECT * FROM pattern_steps WHERE rare") == []


def test_rare_patterns(load):
    store = load(RARE_RECORDS)
    assert rows(store, "SELECT * FROM rare_patterns_with(theta := 30, min_n := 4)") == [
        ("", 1, round(1 / 6, 9), True, 2, 2, 1),
        ("a", 3, 0.5, False, 1, 1, 0),
        ("b>a", 2, round(2 / 6, 9), False, 1, 2, 1),
    ]
    assert rows(store, "SELECT action_pattern, rare FROM rare_patterns") == [("", False), ("a", False), ("b>a", False)]


# -- flagged_trajectories --------------------------------------------------------------------------

def test_flagged_trajectories_keeps_every_signal(load):
    store = load([
        traj("f", 1, 1.0, tid="f1", pattern="x"), traj("f", 1, 1.0, tid="f2", pattern="x"),
        traj("f", 2, 0.0, tid="f3", pattern="x"), traj("f", 2, 0.6, tid="f4", pattern="y"),  # score 0.3: forgot; mixed
        traj("g", 2, 0.0, tid="g1", pattern="x"), traj("g", 2, 0.0, tid="g2"),
    ])
    # step 1: x x -> N=2; step 2: x x y -> N = 5, y share 1/5 = 0.2 < 0.3
    assert rows(store, "SELECT trajectory_id, step, signal FROM flagged_trajectories_with(theta := 30, min_n := 5)") == [
        ("f3", 2, "boundary"), ("f3", 2, "forgetting"),
        ("f4", 2, "boundary"), ("f4", 2, "forgetting"), ("f4", 2, "rare"),
    ]
    assert rows(store, "SELECT signal, count(*) FROM flagged_trajectories GROUP BY signal") == [
        ("boundary", 2), ("forgetting", 2),
    ]


# -- task_signals ---------------------------------------------------------------------------------

def test_task_signals_includes_tasks_never_attempted(load):
    store = load(scores("a", 1.0, 0.0) + [traj("b", 1, 1.0), traj("b", 1, 0.0)], tasks=["a", "never"])
    assert rows(store, "SELECT * FROM task_signals") == [
        ("a", 2, 0.0, 2, 1, 1, 2, 0, 0.0, 0),
        ("b", 1, 0.5, 1, 0, 0, 1, 1, 1.0, 0),
        ("never", None, None, 0, 0, 0, 0, 0, None, 0),
    ]


def test_task_signals_counts_rare_trajectories(load):
    store = load(RARE_RECORDS)
    assert rows(store, "SELECT task_id, rare_trajectories FROM task_signals_with(theta := 30, min_n := 4)") == [
        ("t", 1), ("u", 1),
    ]


# -- action_pattern macro ------------------------------------------------------------------------

@pytest.mark.parametrize("names, expected", [
    (["a", "a", "b", "a"], "a>b>a"), ([], ""), (["x"], "x"), (["a", "b", "b", "b", "c"], "a>b>c"),
])
def test_action_pattern(store, names, expected):
    import json

    actions = json.dumps([{"name": n, "arguments": {}} for n in names])
    assert store.scalar("SELECT action_pattern(CAST($a AS JSON))", {"a": actions}) == expected
    assert store.scalar("SELECT action_pattern_from_names(CAST($n AS VARCHAR[]))", {"n": names}) == expected


def test_rollouts_cut_short_by_a_fault_flag_nothing(load):
    faulty = {**traj("a", 2, 0.0), "error": "HTTP 500 from the model server"}
    store = load(scores("a", 1.0) + [faulty, faulty])
    assert rows(store, "SELECT * FROM task_steps") == [("a", 1, 1, 1, 1.0)]
    assert rows(store, "SELECT * FROM flagged_trajectories") == []
    assert rows(store, "SELECT count(*) FROM trajectories WHERE error IS NOT NULL") == [(2,)]


def test_a_tie_at_the_threshold_survives_floating_point_summation(load):
    # summed in this order the mean is 0.49999999999999994, in reverse order 0.5: the score is 0.5 either way
    rewards = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    store = load([traj("a", 1, 1.0)] + [traj("a", 2, r) for r in rewards]
                 + [traj("b", 1, 1.0)] + [traj("b", 2, r) for r in reversed(rewards)])
    assert rows(store, "SELECT task_id, step, score FROM task_steps WHERE step = 2") == [("a", 2, 0.5), ("b", 2, 0.5)]
    assert rows(store, "SELECT * FROM forgetting") == []
    assert rows(store, "SELECT group_id, mean_reward FROM group_outcomes WHERE step = 2") == [("a@2", 0.5), ("b@2", 0.5)]


# -- turn_outcomes ----------------------------------------------------------------------------------

def episode(task, step, reward, *, turns=None, failed_turn=None, users=None, policy=None):
    """A trajectory with the player's per-turn record in meta, or (``users``) only user messages to count."""
    record = traj(task, step, reward)
    if turns is not None:
        record["meta"] = {"turns": turns, "failed_turn": failed_turn}
    if users is not None:
        record["messages"] = [m for i in range(users) for m in ({"role": "user", "content": f"u{i}"},
                                                                  {"role": "assistant", "content": "ok"})]
    if policy is not None:
        record["policy"] = policy
    return record


def test_turn_outcomes_say_which_turn_episodes_break_in(load):
    store = load([
        episode("a", 1, 1.0, turns=3),                      # solved: passes all three turns
        episode("a", 1, 0.0, turns=3, failed_turn=3),       # reached turn 3, broke there
        episode("a", 1, 0.0, turns=2, failed_turn=2),       # cut short in turn 2 (a limit): never reached turn 3
        episode("a", 1, 0.0, turns=3, failed_turn=1),       # went wrong in turn 1, played on to the end
        episode("b", 2, 0.0, users=2),                      # imported: 2 user messages, failed -> in turn 2
        episode("b", 2, 1.0, users=2),
        episode("c", 3, 0.0),                               # no turns recorded, no messages: one turn
        episode("c", 3, 0.0, turns=1, failed_turn=1, policy="reference"),  # not the policy: left out
    ])
    assert rows(store, "SELECT * FROM turn_outcomes") == [
        ("a", 1, 1, 4, 4, 1, 3, 0.25),
        ("a", 1, 2, 4, 4, 1, 3, 0.25),
        ("a", 1, 3, 4, 3, 1, 2, round(1 / 3, 9)),
        ("b", 2, 1, 2, 2, 0, 2, 0.0),
        ("b", 2, 2, 2, 2, 1, 1, 0.5),
        ("c", 3, 1, 1, 1, 1, 0, 1.0),
    ]


def test_turn_outcomes_of_a_store_without_trajectories_is_empty(store):
    assert rows(store, "SELECT * FROM turn_outcomes") == []


def test_drift_turns_sums_turn_outcomes_over_each_rounds_steps(load):
    # no rounds recorded: the store is one round 0 covering every step (drift_rounds)
    store = load([
        episode("a", 1, 0.0, turns=2, failed_turn=2),
        episode("a", 1, 1.0, turns=2),
        episode("b", 2, 0.0, turns=1, failed_turn=1),
    ])
    assert rows(store, "SELECT * FROM drift_turns") == [(0, 1, 3, 1, round(1 / 3, 9)), (0, 2, 2, 1, 0.5)]


# -- round_costs ----------------------------------------------------------------------------------

def phase(store, round_, name, start, finish, seconds, *, attempts=1, store_seconds=None):
    """A run_phases row: ``start`` and ``finish`` in seconds after 10:00:00, None while running."""
    import json

    def at(offset):
        return None if offset is None else f"2026-12-01 10:00:{offset:06.3f}"

    outputs = json.dumps({} if store_seconds is None else {"store_seconds": store_seconds})
    store.execute("INSERT INTO run_phases VALUES ($r, $p, $status, $a, CAST($s AS TIMESTAMP), "
                  "CAST($f AS TIMESTAMP), $sec, $o)",
                  {"r": round_, "p": name, "status": "running" if finish is None else "finished", "a": attempts,
                   "s": at(start), "f": at(finish), "sec": seconds, "o": outputs})


def test_round_costs_split_each_round_into_training_and_feedback(store):
    phase(store, 0, "bootstrap", 0, 5, 5.0)  # builds D_0: neither training nor a round's feedback
    phase(store, 0, "weights", 5, 6, 0.5)
    phase(store, 0, "warmup", 6, 16, 10.0)  # a one-off: neither training nor feedback
    phase(store, 0, "train", 16, 36, 20.0, store_seconds=2.0)  # 2 s of it writing rollouts: feedback
    phase(store, 0, "eval", 36, 38, 1.5)
    phase(store, 0, "validate", 38, 45, 6.0)  # the span (40 s) counts the gaps between phases too
    phase(store, 1, "weights", 45, 46, 1.0)
    phase(store, 1, "train", 46, 58, 10.0, attempts=2, store_seconds=1.0)  # resumed: phases' own seconds
    phase(store, 1, "signals", 58, 59, 1.0)
    phase(store, 2, "weights", 59, 59.5, 0.5)
    phase(store, 2, "train", 59.5, None, None)  # running
    assert rows(store, "SELECT * FROM round_costs") == [
        (0, "finished", 18.0, 2.0, 12.0, round(12 / 18, 9), 10.0, "span"),
        (1, "finished", 9.0, 1.0, 3.0, round(3 / 9, 9), 0.0, "phases"),
        (2, "running", 0.0, 0.0, 0.5, None, 0.0, "phases"),
    ]
    assert rows(store, "SELECT round, training_seconds, feedback_seconds FROM run_rounds") == []  # no rounds rows


def test_round_costs_of_a_store_without_a_run_is_empty(store):
    assert rows(store, "SELECT * FROM round_costs") == []


def test_the_loop_cost_line_sums_the_finished_rounds_next_to_the_papers_figures(store):
    from coevolve_engine.loop.summary import loop_cost

    assert loop_cost(store) == "Loop cost: no finished round with training yet"
    phase(store, 0, "train", 0, 20, 20.0, store_seconds=0.5)
    phase(store, 0, "signals", 20, 21, 0.9)
    phase(store, 1, "train", 21, 31, 10.0, store_seconds=0.5)
    phase(store, 1, "signals", 31, 32, 0.5)
    phase(store, 2, "train", 32, None, None)
    assert loop_cost(store) == (
        "Loop cost: feedback 3.0 s against training 29.0 s over 2 rounds: +10.3% (rounds 7.7-15.8%; store writes "
        "during training 1.0 s, counted as feedback; the paper: +9.67% on AppWorld, +12.76% on BFCL)")


# -- group_health, task_group_health ---------------------------------------------------------------------

def test_group_health_counts_dead_groups_and_the_rollouts_that_carry_gradient(load):
    """Dead: every reward of the group equal (all solved, all failed, equal partial rewards, one rollout); a dead
    group whose recorded successes disagree is neither all solved nor all failed; a faulted rollout counts nowhere."""
    store = load([
        traj("a", 1, 1.0, group="solved"), traj("a", 1, 1.0, group="solved"),
        traj("b", 1, 0.0, group="failed"), traj("b", 1, 0.0, group="failed"), traj("b", 1, 0.0, group="failed"),
        traj("c", 1, 1.0, group="mixed"), traj("c", 1, 0.0, group="mixed"),
        traj("d", 2, 0.25, group="partial"), traj("d", 2, 0.25, group="partial"),
        traj("a", 2, 1.0, group="one"),
        traj("b", 2, 1.0, group="disagree", success=True), traj("b", 2, 1.0, group="disagree", success=False),
        {**traj("c", 2, 1.0, group="faulted"), "error": "the model server timed out"},
        traj("c", 2, 0.0, group="faulted"), traj("c", 2, 1.0, group="faulted"),
    ])
    assert rows(store, "SELECT group_id, rollouts, successes, spread, dead, all_solved, all_failed "
                       "FROM group_spread_with()") == [
        ("disagree", 2, 1, 0.0, True, False, False), ("failed", 3, 0, 0.0, True, False, True),
        ("faulted", 2, 1, 0.5, False, False, False), ("mixed", 2, 1, 0.5, False, False, False),
        ("one", 1, 1, 0.0, True, True, False), ("partial", 2, 0, 0.0, True, False, True),
        ("solved", 2, 2, 0.0, True, True, False)]
    # step, round, groups, dead_groups, all_solved, all_failed, dead_share, mean_spread, rollouts, live, gradient
    assert rows(store, "SELECT * FROM group_health") == [
        (1, 0, 3, 2, 1, 1, 0.666666667, 0.166666667, 7, 2, 0.285714286),
        (2, 0, 4, 3, 1, 1, 0.75, 0.125, 7, 2, 0.285714286)]
    assert rows(store, "SELECT * FROM group_health_with(threshold := 0.2) WHERE step = 2") == [
        (2, 0, 4, 3, 2, 0, 0.75, 0.125, 7, 2, 0.285714286)]  # 0.25 now succeeds: 'partial' is all solved
    # task_id, groups, dead_groups, all_solved, all_failed, dead_share, mean_spread, last_step
    assert rows(store, "SELECT * FROM task_group_health") == [
        ("a", 2, 2, 2, 0, 1.0, 0.0, 2), ("b", 2, 2, 0, 1, 1.0, 0.0, 2), ("c", 2, 0, 0, 0, 0.0, 0.5, 2),
        ("d", 1, 1, 0, 1, 1.0, 0.0, 2)]


def test_group_health_is_empty_without_rollouts(load):
    store = load([], tasks=["a"])
    assert rows(store, "SELECT * FROM group_health") == []
    assert rows(store, "SELECT * FROM task_group_health") == []
