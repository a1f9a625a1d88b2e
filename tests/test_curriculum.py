"""Curriculum strategies on small literal stores, against weights computed by hand; the task_curriculum
macro they read; weight sets written, refused, replaced and read back; the reason between rounds."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from coevolve_engine.curriculum import (
    STRATEGIES, CurriculumError, CurriculumStrategy, compute_weights, load_strategy, load_weights,
)
from coevolve_engine.core.signal_params import SignalParams

# theta 10 %, min_n 0: task 'one''s single rollout (pattern x, 1 of 13 patterned rollouts at step 3) is rare
PARAMS = SignalParams(threshold=0.5, w=3, theta=10, min_n=0)


def group(task, step, *rewards, pattern=None):
    records = [{"task_id": task, "step": step, "reward": r} for r in rewards]
    if pattern is not None:
        for record in records:
            record["actions"] = [{"name": pattern, "arguments": {}}]
    return records


@pytest.fixture
def literal(store):
    """Six tasks, steps 1-3: never attempted, new synthesized, one rollout, all failures, mixed then
    forgotten, always solved."""
    store.add_records("tasks", [{"task_id": t} for t in ("never", "one", "fail", "mixed", "solved")]
                      + [{"task_id": "new", "source": "synthesized"}])
    records = group("one", 3, 1.0, pattern="x")
    for step in (1, 2, 3):
        records += group("fail", step, 0.0, 0.0)
        records += group("solved", step, 1.0, 1.0, pattern="y")
    records += group("mixed", 1, 1.0, 1.0, pattern="y") + group("mixed", 2, 1.0, 0.0, pattern="y")
    records += group("mixed", 3, 0.0, 0.0, pattern="y")
    store.add_records("trajectories", records)
    return store


def weights_of(store, strategy, settings=None, params=PARAMS):
    chosen = load_strategy(strategy, settings)
    result = chosen.weigh(chosen.facts(store, params))
    return {row["task_id"]: row["weight"] for row in result.weights.iter_rows(named=True)}, result


def approx(expected: dict) -> dict:
    return {key: pytest.approx(value, abs=1e-12) for key, value in expected.items()}


# -- the facts the strategies read ----------------------------------------------------------------

def test_task_curriculum_facts(literal):
    rows = literal.execute(
        "SELECT task_id, source, rollouts, scored_steps, latest_step, latest_score, steps_since_attempt, "
        "last_group_rollouts, last_group_successes, last_group_p, round(forgetting_recent, 9), "
        "round(boundary_recent, 9), round(rare_recent, 9), round(dead_recent, 9) "
        "FROM task_curriculum_with(threshold := 0.5, w := 3, theta := 10, min_n := 0, recent := 3) ORDER BY task_id"
    ).fetchall()
    third = round(1 / 3, 9)
    # dead_recent: groups whose rewards are all equal, a single rollout's included ('one'); 'mixed' had
    # 1.0 1.0 | 1.0 0.0 | 0.0 0.0, two of its three groups dead
    assert rows == [
        ("fail", None, 6, 3, 3, 0.0, 0, 2, 0, 0.0, 0.0, 0.0, 0.0, 1.0),
        ("mixed", None, 6, 3, 3, 0.0, 0, 2, 0, 0.0, third, third, 0.0, round(2 / 3, 9)),
        ("never", None, 0, 0, None, None, 3, None, None, None, 0.0, 0.0, 0.0, 0.0),  # now 3 - first 1 + 1
        ("new", "synthesized", 0, 0, None, None, 3, None, None, None, 0.0, 0.0, 0.0, 0.0),
        ("one", None, 1, 1, 3, 1.0, 0, 1, 1, 1.0, 0.0, 0.0, 1.0, 1.0),
        ("solved", None, 6, 3, 3, 1.0, 0, 2, 2, 1.0, 0.0, 0.0, 0.0, 1.0),
    ]


def test_task_curriculum_recent_window(literal):
    # over the last step only, 'mixed' forgot at its one recent step and had no mixed group there
    row = literal.execute("SELECT forgetting_recent, boundary_recent, dead_recent "
                          "FROM task_curriculum_with(recent := 1) WHERE task_id = 'mixed'").fetchall()
    assert row == [(1.0, 0.0, 1.0)]


def test_task_curriculum_forgetting_form(literal):
    # 'mixed': steps 1-3 score 1.0, 0.5, 0.0. Group form: forgetting fired at 1 of its 3 recent steps. Trajectory
    # form: 3 of its 6 recent rollouts failed after a success-level score (step 2's 0, step 3's two 0s).
    sql = ("SELECT task_id, round(forgetting_recent, 9) FROM task_curriculum_with(forgetting_form := '{}') "
           "WHERE forgetting_recent > 0 ORDER BY task_id")
    assert literal.execute(sql.format("group")).fetchall() == [("mixed", round(1 / 3, 9))]
    assert literal.execute(sql.format("trajectory")).fetchall() == [("mixed", 0.5)]
    with pytest.raises(Exception, match="forgetting_form must be 'group' or 'trajectory'"):
        literal.execute(sql.format("task")).fetchall()


def test_task_curriculum_empty_history(store):
    store.add_records("tasks", [{"task_id": "a"}])
    assert store.execute("SELECT steps_since_attempt, rollouts FROM task_curriculum").fetchall() == [(0, 0)]


# -- strategies, by hand ----------------------------------------------------------------------------

def test_uniform(literal):
    weights, _ = weights_of(literal, "uniform")
    assert weights == {t: 1.0 for t in ("fail", "mixed", "never", "new", "one", "solved")}


def test_coevolve_terms(literal):
    weights, result = weights_of(literal, "coevolve")
    # w = 1 + 2 forgetting + 1 boundary + 1 rare + 0.5 min(stale / 10, 1) + 2 [new synthesized]
    assert weights == approx({
        "never": 1 + 0.5 * 0.3,             # never attempted: 3 steps stale, no boost (not synthesized)
        "new": 1 + 0.5 * 0.3 + 2,           # synthesized and never attempted: the boost
        "one": 1 + 1.0,                     # its one rollout had a rare pattern
        "fail": 1.0,                        # all failures: no mixed group, nothing forgotten
        "mixed": 1 + 2 / 3 + 1 / 3,         # forgot at 1 of its 3 steps, 1 of 3 groups mixed
        "solved": 1.0,
    })
    for row in result.weights.iter_rows(named=True):  # the components add up to the weight
        assert sum(row["components"].values()) == pytest.approx(row["weight"])
    assert set(result.weights["components"][0]) == {"base", "forgetting", "boundary", "rare", "staleness",
                                                      "new_task"}


def test_coevolve_settings_and_staleness_cap(literal):
    weights, _ = weights_of(literal, "coevolve", {"staleness_horizon": "2", "staleness": "1", "new_task": "0",
                                                  "forgetting": "0", "boundary": "0", "rare": "0"})
    assert weights == approx({"never": 2.0, "new": 2.0, "one": 1.0, "fail": 1.0, "mixed": 1.0, "solved": 1.0})


def test_coevolve_dead_term(literal):
    weights, result = weights_of(literal, "coevolve", {"dead": "0.9"})
    plain, plain_result = weights_of(literal, "coevolve")
    # - 0.9 x the share of its recent groups that were dead: all of them for fail, one and solved, 2 of 3 for
    # mixed, none for a task never attempted
    dead = {"never": 0.0, "new": 0.0, "one": 1.0, "fail": 1.0, "mixed": 2 / 3, "solved": 1.0}
    assert weights == approx({task: plain[task] - 0.9 * share for task, share in dead.items()})
    for row in result.weights.iter_rows(named=True):
        assert sum(row["components"].values()) == pytest.approx(row["weight"])
        assert row["weight"] > 0
    # off (the default), the term is not among the components: weight sets are those made before it existed
    assert "dead" not in plain_result.weights["components"][0]
    assert result.weights["components"][0]["dead"] == pytest.approx(-0.9)  # 'fail', first by task_id
    with pytest.raises(CurriculumError, match="dead must be below base"):
        load_strategy("coevolve", {"dead": "1.0"})


def test_dapo_filter(literal):
    weights, result = weights_of(literal, "dapo-filter")
    # all-failure (fail, mixed's last group) and all-success (solved) groups are filtered; a single rollout
    # cannot show mixed outcomes and is kept unless min_rollouts=1; never attempted is kept
    assert weights == {"never": 1.0, "new": 1.0, "one": 1.0, "fail": 0.0, "mixed": 0.0, "solved": 0.0}
    assert result.notes == ()
    weights, _ = weights_of(literal, "dapo-filter", {"min_rollouts": "1"})
    assert weights["one"] == 0.0


def test_dapo_filter_falls_back_to_uniform(store):
    store.add_records("tasks", [{"task_id": "solved"}, {"task_id": "fail"}])
    store.add_records("trajectories", group("solved", 1, 1.0, 1.0) + group("fail", 1, 0.0, 0.0))
    weights, result = weights_of(store, "dapo-filter")
    assert weights == {"solved": 1.0, "fail": 1.0}
    assert "uniform fallback" in result.notes[0]
    assert result.weights["components"].to_list()[0]["fallback"] is True


def test_plr_unseen_first_and_staleness(literal):
    weights, _ = weights_of(literal, "plr", {"beta": "1"})
    # S = p(1-p) of the last group: 0 for every attempted task (rank 3, tied), unseen rank 1 (tied)
    # h = 1/rank: 1, 1, 1/3 x 4 -> P_S = 0.3, 0.3, 0.1 x 4; staleness 3, 3, 0 x 4 -> P_C = 0.5, 0.5, 0 x 4
    # P = 0.9 P_S + 0.1 P_C
    assert weights == approx({"never": 0.32, "new": 0.32, "one": 0.09, "fail": 0.09, "mixed": 0.09,
                              "solved": 0.09})


@pytest.fixture
def plr_store(store):
    store.add_records("tasks", [{"task_id": t} for t in "ABCD"])
    store.add_records("trajectories", group("A", 1, 1.0, 0.0) + group("B", 1, 1.0, 1.0, 1.0, 0.0)
                      + group("C", 1, 1.0, 0.0, 0.0, 0.0) + group("D", 1, 1.0, 1.0))
    return store


def test_plr_variance_ranks(plr_store):
    weights, result = weights_of(plr_store, "plr", {"beta": "1"})
    # S = .25, .1875, .1875, 0 -> ranks 1, 2, 2, 4 -> h 1, 1/2, 1/2, 1/4 -> P_S 4/9, 2/9, 2/9, 1/9
    # nothing stale (all attempted at the latest step): P_C uniform 1/4
    assert weights == approx({"A": 0.9 * 4 / 9 + 0.025, "B": 0.9 * 2 / 9 + 0.025, "C": 0.9 * 2 / 9 + 0.025,
                              "D": 0.9 / 9 + 0.025})
    assert sum(weights.values()) == pytest.approx(1.0)
    assert [c["rank"] for c in result.weights["components"].to_list()] == [1.0, 2.0, 2.0, 4.0]


def test_plr_failure_score_and_beta(plr_store):
    weights, _ = weights_of(plr_store, "plr", {"beta": "1", "score": "failure", "rho": "0"})
    # S = 1 - score = .5, .25, .75, 0 -> ranks 2, 3, 1, 4 -> h 1/2, 1/3, 1, 1/4 (sum 25/12)
    assert weights == approx({"A": 6 / 25, "B": 4 / 25, "C": 12 / 25, "D": 3 / 25})
    sharp, _ = weights_of(plr_store, "plr", {"beta": "0.5", "score": "failure", "rho": "0"})
    # h = rank^-2: 1/4, 1/9, 1, 1/16 (sum 205/144)
    assert sharp == approx({"A": 36 / 205, "B": 16 / 205, "C": 144 / 205, "D": 9 / 205})


@pytest.mark.parametrize("name", ["uniform", "coevolve", "plr", "dapo-filter"])
def test_every_strategy_keeps_the_contract(literal, name):
    """The suite every strategy (plugins too) must pass: one finite weight >= 0 per task, in order."""
    strategy = STRATEGIES.load(name)()
    assert isinstance(strategy, CurriculumStrategy)
    facts = strategy.facts(literal, PARAMS)
    result = strategy.weigh(facts)
    assert result.weights.columns[:3] == ["task_id", "weight", "components"]
    assert result.weights["task_id"].to_list() == facts["task_id"].to_list()
    weights = result.weights["weight"].to_numpy()
    assert np.all(np.isfinite(weights)) and np.all(weights >= 0) and weights.sum() > 0
    for field in dataclasses.fields(strategy.Config):
        assert field.metadata.get("help"), f"{name}.{field.name} has no help"


# -- settings and errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, settings, message", [
    ("coevolve", {"boundray": "2"}, "has no setting 'boundray'; its settings: base, boundary"),
    ("coevolve", {"boundary": "lots"}, "setting boundary takes a float, got 'lots'"),
    ("coevolve", {"base": "0"}, "base must be > 0"),
    ("plr", {"rho": "1.5"}, r"rho is a mixing share in \[0, 1\]"),
    ("plr", {"score": "regret"}, "score must be one of variance, failure"),
    ("plr", {"unseen_first": "maybe"}, "takes a bool"),
    ("nope", {}, "unknown curriculum strategy 'nope'; known: coevolve, dapo-filter, plr, uniform"),
])
def test_bad_settings_say_what_and_how(name, settings, message):
    with pytest.raises(Exception, match=message):
        load_strategy(name, settings)


# -- weight sets in the store ---------------------------------------------------------------------

def test_weights_round_trip(literal):
    written = compute_weights(literal, 0, "coevolve", PARAMS)
    loaded = load_weights(literal, 0)
    assert list(loaded.task_ids) == ["fail", "mixed", "never", "new", "one", "solved"]
    np.testing.assert_allclose(loaded.weights, [1.0, 2.0, 1.15, 3.15, 2.0, 1.0])
    np.testing.assert_array_equal(loaded.weights, written.weights)
    assert loaded.strategy == "coevolve" and loaded.round == 0 and loaded.step == 3
    assert loaded.params["signals"] == PARAMS.bind() and loaded.params["strategy"]["boundary"] == 1.0
    components = dict(literal.execute("SELECT task_id, components FROM task_weights WHERE round = 0").fetchall())
    assert json.loads(components["new"]) == {"base": 1.0, "forgetting": 0.0, "boundary": 0.0, "rare": 0.0,
                                             "staleness": pytest.approx(0.15), "new_task": 2.0}
    assert literal.execute("SELECT tasks, nonzero, strategy FROM weight_sets").fetchall() == [(6, 6, "coevolve")]
    assert loaded.probabilities.sum() == pytest.approx(1.0)
    assert load_weights(literal).round == 0  # latest by default


def test_existing_round_is_refused_then_replaced(literal):
    compute_weights(literal, 0, "uniform", PARAMS)
    with pytest.raises(CurriculumError, match="round 0 already has weights .strategy uniform.; pass replace=True"):
        compute_weights(literal, 0, "dapo-filter", PARAMS)
    assert load_weights(literal, 0).strategy == "uniform"  # untouched
    compute_weights(literal, 0, "dapo-filter", PARAMS, replace=True)
    replaced = load_weights(literal, 0)
    assert replaced.strategy == "dapo-filter" and replaced.weights.tolist() == [0, 0, 1, 1, 1, 0]
    assert literal.scalar("SELECT count(*) FROM task_weights WHERE round = 0") == 6


def test_a_failing_strategy_writes_nothing(literal):
    class Broken(CurriculumStrategy):
        name = "broken"
        Config = STRATEGIES.load("uniform").Config

        def weigh(self, facts):
            from coevolve_engine.curriculum import StrategyResult
            import polars as pl

            return StrategyResult(facts.select("task_id", pl.lit(-1.0).alias("weight"), pl.lit(0).alias("components")))

    with pytest.raises(CurriculumError,
                       match="strategy 'broken': task 'fail' has weight -1.0; a weight is a finite number >= 0"):
        compute_weights(literal, 0, Broken(), PARAMS)
    assert literal.scalar("SELECT count(*) FROM task_weights") == 0
    assert literal.scalar("SELECT count(*) FROM weight_sets") == 0


def test_errors_on_empty_store_and_missing_round(store):
    with pytest.raises(CurriculumError, match="no training tasks to weigh .eval tasks are never weighed.; add some with"):
        compute_weights(store, 0, "uniform")
    with pytest.raises(CurriculumError, match="no weights yet; compute them with"):
        load_weights(store)
    store.add_records("tasks", [{"task_id": "a"}])
    compute_weights(store, 0, "uniform")
    with pytest.raises(CurriculumError, match=r"round 3 has no weights \(rounds with weights: 0\)"):
        load_weights(store, 3)


def test_reason_compares_with_the_previous_round(literal):
    first = compute_weights(literal, 0, "coevolve", PARAMS)
    assert first.reason.startswith("first weight set (coevolve): 6 tasks (1 synthesized); 1 task flagged "
                                   "forgetting; 1 task flagged boundary; 1 task flagged rare; Jensen-Shannon")
    # step 4: 'fail' becomes a boundary group, 'solved' forgets; two synthesized tasks arrive
    literal.add_records("tasks", [{"task_id": "s1", "source": "synthesized"},
                                  {"task_id": "s2", "source": "synthesized"}])
    literal.add_records("trajectories", group("fail", 4, 1.0, 0.0) + group("solved", 4, 0.0, 0.0, pattern="y"))
    second = compute_weights(literal, 1, "coevolve", PARAMS)
    p = dict(zip(first.task_ids, first.weights / first.weights.sum()))
    q = dict(zip(second.task_ids, second.weights / second.weights.sum()))
    js = 0.0
    for task in set(p) | set(q):
        a, b = p.get(task, 0.0), q.get(task, 0.0)
        m = (a + b) / 2
        js += (a * math.log2(a / m) if a else 0) / 2 + (b * math.log2(b / m) if b else 0) / 2
    assert second.reason == ("2 tasks added (2 synthesized); 1 task newly flagged forgetting; 1 task newly flagged "
                             f"boundary; Jensen-Shannon divergence {js:.3g} from round 0")
    stored = literal.scalar("SELECT reason FROM weight_sets WHERE round = 1")
    assert stored == second.reason
