"""The calc environment: the shared contract, the registry, the splits, skills, scoring and LLM drafts."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from environment_contract import EnvironmentContract

from coevolve_engine.adapters.environments import ENVIRONMENTS, load_environment
from coevolve_engine.core.environment import SpecError, ToolCall, replay
from coevolve_engine.adapters.environments.calc import CalcEnvironment, skill_of
from coevolve_engine.adapters.environments.calc.tasks import (
    SEED_SPACE,
    Cell,
    SkillSpace,
    generate,
    make_spec,
    numbers_in,
)


@pytest.fixture(scope="module")
def calc() -> CalcEnvironment:
    return CalcEnvironment()


@pytest.fixture(scope="module")
def seed_tasks(calc) -> list[dict]:
    return list(calc.load_tasks(split="seed"))


@pytest.fixture(scope="module")
def test_tasks(calc) -> list[dict]:
    return list(calc.load_tasks(split="test"))


def by_skill(tasks: list[dict], **skill) -> dict:
    return next(t for t in tasks if all(t["spec"]["skill"][k] == v for k, v in skill.items()))


class TestCalcContract(EnvironmentContract):
    @pytest.fixture
    def environment(self, calc):
        return calc

    @pytest.fixture
    def sample_tasks(self, seed_tasks, test_tasks):
        return [
            by_skill(seed_tasks, form="steps"),
            by_skill(seed_tasks, form="goal", tools="sub"),
            by_skill(test_tasks, calls=3, operands="large", distractors=2, form="goal"),
            by_skill(test_tasks, calls=2, tools="add,mul", distractors=1, form="steps"),
        ]

    @pytest.fixture
    def invalid_specs(self, test_tasks):
        spec = by_skill(test_tasks, calls=2, form="steps", distractors=1)["spec"]
        goal = by_skill(test_tasks, calls=2, form="goal")["spec"]
        return [
            {**spec, "steps": []},
            {**spec, "steps": [{"op": "div", "n": 2}] + spec["steps"][1:]},
            {**spec, "steps": [{"op": "add", "n": 0}] + spec["steps"][1:]},
            {**spec, "steps": [{"op": "mul", "n": 1}] + spec["steps"][1:]},
            {**spec, "steps": [{"op": "add", "n": "4"}] + spec["steps"][1:]},
            {**spec, "steps": [{"op": "add"}] + spec["steps"][1:]},
            {**spec, "steps": spec["steps"] * 3},
            {**spec, "target": spec["target"] + 1},
            {**spec, "start": True},
            {**spec, "form": "riddle"},
            {**spec, "prompt": ""},
            {**spec, "prompt": spec["prompt"].replace(f"x is {spec['start']}", "x is unknown")},
            {**spec, "prompt": "x is {}. Add some numbers.".format(spec["start"])},
            {**goal, "prompt": goal["prompt"].replace(f"so x is {goal['target']}", "so x is big")},
            {**spec, "skill": {**spec["skill"], "calls": 1}},
            {**spec, "bonus": 1},
            {**spec, "steps": [{"op": "mul", "n": 99}] * 5, "start": 10**8},
        ]


# --- registry and splits ----------------------------------------------------------------------------------


def test_calc_is_registered_next_to_bfcl():
    assert {"bfcl", "calc"} <= set(ENVIRONMENTS.names())
    assert ENVIRONMENTS.load("calc") is CalcEnvironment
    assert isinstance(load_environment("calc"), CalcEnvironment)


def test_splits_are_deterministic_and_sized(calc, seed_tasks, test_tasks):
    assert len(seed_tasks) == 200 and len(test_tasks) == 300
    assert list(calc.load_tasks(split="seed")) == seed_tasks
    assert list(calc.load_tasks(split="test", n=20)) == test_tasks[:20]
    other = list(calc.load_tasks(split="seed", n=20, seed=1))
    assert [t["prompt"] for t in other] != [t["prompt"] for t in seed_tasks[:20]]
    assert other == list(calc.load_tasks(split="seed", n=20, seed=1))
    assert len({t["task_id"] for t in seed_tasks + test_tasks}) == 500
    task = seed_tasks[0]
    assert task["task_id"] == "calc/seed-0-0000" and task["env"] == "calc" and task["source"] == "calc:seed:seed=0"
    assert task["meta"] == {"split": "seed", "skill": task["spec"]["skill"]}
    with pytest.raises(ValueError, match="known: seed, test, full"):
        next(calc.load_tasks(split="train"))
    with pytest.raises(TypeError, match="unknown option"):
        next(calc.load_tasks(kind="x"))
    with pytest.raises(ValueError, match="known: seed, test, full"):
        next(calc.load_tasks(category="multi_turn_base"))
    with pytest.raises(ValueError, match="fewer than"):  # one add of 1..9 to 1..9: 81 distinct tasks
        generate(SkillSpace(tools=("add",), calls=(1,), operands=("small",), distractors=(0,), forms=("steps",)),
                 100, 0)


def test_the_seed_split_covers_part_of_the_skill_space_and_the_test_split_all(seed_tasks, test_tasks):
    def values(tasks, key):
        return Counter(t["spec"]["skill"][key] for t in tasks)

    assert set(values(seed_tasks, "tools")) == {"add", "sub", "mul", "add,sub", "add,mul", "sub,mul"}
    assert set(values(seed_tasks, "calls")) == {1, 2}
    assert set(values(seed_tasks, "operands")) == {"small"}
    assert set(values(seed_tasks, "distractors")) == {0}
    assert set(values(seed_tasks, "form")) == {"steps", "goal"}
    assert set(values(test_tasks, "tools")) == {"add", "sub", "mul", "add,sub", "add,mul", "sub,mul", "add,sub,mul"}
    assert values(test_tasks, "calls") == {1: 100, 2: 100, 3: 100}
    assert values(test_tasks, "operands") == {"small": 150, "large": 150}
    assert set(values(test_tasks, "distractors")) == {0, 1, 2}
    assert min(values(test_tasks, "distractors").values()) >= 90
    assert set(values(test_tasks, "form")) == {"steps", "goal"}
    held_out = {t["prompt"] for t in test_tasks}
    assert not held_out & {t["prompt"] for t in seed_tasks}


def test_tasks_import_takes_the_split_as_its_category(tmp_path, test_tasks):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.core.store import Store

    db = tmp_path / "store.duckdb"
    command = ["tasks", "import", "calc", "--category", "test", "--limit", "12", "--create", "--db", str(db)]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    assert "calc tasks (test): 12 tasks, 12 added" in result.output
    with Store(db, read_only=True) as store:
        rows = store.execute("SELECT task_id, json_extract_string(spec, '$.skill.calls') FROM tasks "
                             "ORDER BY task_id").fetchall()
    assert [task_id for task_id, _ in rows] == [t["task_id"] for t in test_tasks[:12]]
    assert {calls for _, calls in rows} == {"1", "2", "3"}  # skills group in SQL
    result = CliRunner().invoke(cli, ["tasks", "import", "calc", "--category", "train", "--create", "--db", str(db)])
    assert result.exit_code != 0 and "known: seed, test, full" in result.output


def test_full_split_excludes_the_test_prompts(calc, test_tasks):
    full = list(calc.load_tasks(split="full", n=300))
    assert not {t["prompt"] for t in full} & {t["prompt"] for t in test_tasks}
    assert {t["spec"]["skill"]["calls"] for t in full} == {1, 2, 3}


def test_every_generated_task_is_well_formed_and_its_reference_solves_it(calc, seed_tasks, test_tasks):
    for task in seed_tasks + test_tasks:
        assert calc.check_spec(task["spec"]) == [], task["task_id"]
        assert task["spec"]["skill"] == skill_of(task["spec"])
        score = replay(calc, task["task_id"], task["spec"], calc.reference_solution(task["spec"]))
        assert score.success, (task["task_id"], score.reason)


def test_prompts_read_as_intended():
    import random

    spec = make_spec(Cell(("add", "mul"), "small", 0, "steps"), random.Random(3))
    (a, m) = (step["n"] for step in spec["steps"])
    assert spec["prompt"] == f"x is {spec['start']}. Add {a}, then multiply by {m}."
    goal = make_spec(Cell(("sub",), "small", 1, "goal"), random.Random(3))
    assert goal["prompt"].endswith(f"Subtract a number so x is {goal['target']}.")
    hidden = goal["steps"][0]["n"]
    assert hidden not in numbers_in(goal["prompt"]) or hidden in (goal["start"], goal["target"])
    assert goal["skill"]["distractors"] == 1 and SEED_SPACE.calls == (1, 2)


# --- episodes and scoring ---------------------------------------------------------------------------------


def play(calc, spec, calls, reply=None):
    episode = calc.start("t", spec)
    assert episode.next_turn() == spec["prompt"]
    observations = [episode.execute(call) for call in calls]
    episode.end_turn(reply)
    assert episode.next_turn() is None
    return observations, episode.score()


def test_tools_are_three_short_schemas(calc, seed_tasks):
    episode = calc.start("t", seed_tasks[0]["spec"])
    episode.next_turn()
    tools = episode.tools()
    assert [t["function"]["name"] for t in tools] == ["add", "sub", "mul"]
    assert len(json.dumps(tools)) <= 600
    assert episode.system_prompt() is None


def test_scoring_names_what_went_wrong(calc, test_tasks):
    spec = copy.deepcopy(by_skill(test_tasks, chain="add>mul", form="steps")["spec"])
    (a, m) = spec["steps"]
    observations, score = play(calc, spec, [ToolCall("add", {"n": a["n"]}), ToolCall("mul", {"n": m["n"]})])
    assert [o.content for o in observations] == [f"x={spec['start'] + a['n']}", f"x={spec['target']}"]
    assert (score.reward, score.success, score.reason) == (1.0, True, f"solved: add>mul to x={spec['target']}")
    _, score = play(calc, spec, [ToolCall("mul", {"n": m["n"]}), ToolCall("add", {"n": a["n"]})])
    assert score.reason == "wrong chain: called mul>add, want add>mul"
    _, score = play(calc, spec, [ToolCall("add", {"n": a["n"] + 1}), ToolCall("mul", {"n": m["n"]})])
    assert score.reason == f"wrong value: x={(spec['start'] + a['n'] + 1) * m['n']}, want {spec['target']}"
    _, score = play(calc, spec, [ToolCall("add", {"n": "4"}), ToolCall("add", {"n": a["n"]}),
                                 ToolCall("mul", {"n": m["n"]})])
    assert not score.success and score.reason == "1 call(s) refused, first: n must be an integer, got str"
    _, score = play(calc, spec, [])
    assert score.reason == f"no call made; want add>mul to x={spec['target']}"


def test_goal_tasks_accept_any_operand_that_reaches_the_target(calc, seed_tasks):
    spec = by_skill(seed_tasks, form="goal", tools="add")["spec"]
    needed = spec["target"] - spec["start"]
    assert play(calc, spec, [ToolCall("add", {"n": needed})])[1].success
    assert not play(calc, spec, [ToolCall("sub", {"n": -needed})])[1].success  # the chain is part of the task


def test_refusals_leave_x_alone(calc, seed_tasks):
    episode = calc.start("t", seed_tasks[0]["spec"])
    episode.next_turn()
    for call, message in [
        (ToolCall("div", {"n": 2}), "unknown tool 'div'"),
        (ToolCall("add", {"n": 1, "m": 2}), "unknown argument(s) ['m']"),
        (ToolCall("add", {"n": True}), "n must be an integer, got bool"),
        (ToolCall("mul", {"n": 10**9}), "would take x out of"),
    ]:
        observation = episode.execute(call)
        assert observation.error and message in observation.error and observation.content.startswith("Error: ")
    assert episode.x == seed_tasks[0]["spec"]["start"] and episode.calls == []
    for _ in range(20):
        episode.execute(ToolCall("add", {"n": 1}))
    assert len(episode.calls) == 8  # 4 refusals + 8 calls reach the cap of 12; the rest are refused
    assert episode.execute(ToolCall("add", {"n": 1})).error == "more than 12 calls"


def test_start_rejects_a_bad_spec_with_every_problem(calc):
    with pytest.raises(SpecError) as caught:
        calc.start("bad", {"kind": "calc", "start": "3", "steps": [], "form": "x", "prompt": 3})
    assert caught.value.task_id == "bad" and len(caught.value.problems) >= 4


# --- LLM synthesis hooks ----------------------------------------------------------------------------------


def test_exploration_spec_is_a_playable_unscored_episode(calc, seed_tasks):
    seed = seed_tasks[0]["spec"]
    spec = calc.exploration_spec(seed, "Try every tool.")
    assert calc.check_spec(spec) == [] and spec["start"] == seed["start"]
    episode = calc.start("explore", spec)
    assert episode.next_turn() == f"x is {seed['start']}.\n\nTry every tool."
    assert episode.execute(ToolCall("mul", {"n": 3})).content == f"x={3 * seed['start']}"
    score = episode.score()
    assert not score.success and "exploration" in score.reason
    assert calc.reference_solution(spec) is None


def test_drafts_become_specs_with_their_skill(calc, seed_tasks):
    import jsonschema

    seed = seed_tasks[0]["spec"]
    draft = {"turns": ["x is 6. y is 2. Add 5, then multiply by 3."], "ground_truth": [["add(n=5)", "mul(n=3)"]],
             "completion_criterion": "x is 33"}
    jsonschema.validate(draft, calc.draft_schema())
    spec = calc.spec_from_draft(seed, draft)
    assert calc.check_spec(spec) == []
    assert (spec["start"], spec["target"], spec["form"]) == (6, 33, "steps")
    assert spec["skill"] == {"tools": "add,mul", "chain": "add>mul", "calls": 2, "operands": "small",
                             "distractors": 1, "form": "steps"}
    assert replay(calc, "t", spec, calc.reference_solution(spec)).success
    goal = calc.spec_from_draft(seed, {"turns": ["Subtract 12, then add a number so x is 40."],
                                       "ground_truth": [["sub(n=12)", "add(47)"]], "completion_criterion": "-"})
    assert goal["start"] == seed["start"] and goal["form"] == "goal"
    assert calc.check_spec(goal) == [f"the prompt must state the start as 'x is {seed['start']}'"]


@pytest.mark.parametrize("calls, problem", [
    (["os.system('ls')"], "step 1 must be {'op': tool, 'n': integer}: \"os.system('ls')\""),
    (["add(n=x)"], "step 1 must be {'op': tool, 'n': integer}"),
    (["add(n=1, m=2)"], "must pass exactly one argument n"),
    (["div(n=2)"], "step 1: unknown tool 'div'"),
    (["add(n='2')"], "step 1: n must be an integer, got '2'"),
])
def test_bad_drafts_become_specs_that_name_their_defect(calc, seed_tasks, calls, problem):
    spec = calc.spec_from_draft(seed_tasks[0]["spec"], {"turns": ["x is 1. Add 2."], "ground_truth": [calls],
                                                         "completion_criterion": "x is 3"})
    problems = calc.check_spec(spec)
    assert problems and problem in problems[0]
    json.dumps(spec)


# --- the episode player's view of the environment -----------------------------------------------------------


def test_the_player_opens_every_calc_task_with_its_prompt_and_the_environments_tools(calc, seed_tasks, test_tasks):
    from coevolve_engine.trainers.sft import _opening

    for task in seed_tasks[:5] + test_tasks[:5]:
        opening, turn_tools = _opening(calc, task)
        assert opening[-1] == {"role": "user", "content": calc.start(task["task_id"], task["spec"]).next_turn()}
        assert len(turn_tools) == len(task["spec"].get("turns") or [task["spec"]["prompt"]])  # one per user turn
        assert all([t["function"]["name"] for t in tools] == ["add", "sub", "mul"] for tools in turn_tools)


# --- tasks of several user turns on the same register --------------------------------------------------------


def test_every_split_holds_two_and_three_turn_tasks_that_their_reference_solves(calc):
    from coevolve_engine.core.environment import replay

    for split in ("seed", "test", "full"):
        tasks = list(calc.load_tasks(split=split))
        turns = {len(t["spec"].get("turns", [t["prompt"]])) for t in tasks}
        assert turns == ({1, 2} if split == "seed" else {1, 2, 3}), split
        for task in tasks:
            if task["spec"].get("turns"):
                assert task["spec"]["skill"]["turns"] == "each" and calc.check_spec(task["spec"]) == []
                solution = calc.reference_solution(task["spec"])
                assert [len(calls) for calls in solution] == [1] * len(task["spec"]["turns"])
                assert replay(calc, task["task_id"], task["spec"], solution).success


def test_a_multi_turn_task_names_the_turn_where_it_went_wrong(calc, test_tasks):
    from coevolve_engine.core.environment import ToolCall

    task = next(t for t in test_tasks if len(t["spec"].get("turns", [])) == 3 and t["spec"]["form"] == "steps")
    steps = task["spec"]["steps"]

    def play(per_turn):
        episode = calc.start(task["task_id"], task["spec"])
        messages = []
        while (message := episode.next_turn()) is not None:
            messages.append(message)
            for op, n in per_turn[len(messages) - 1] if len(messages) <= len(per_turn) else []:
                episode.execute(ToolCall(op, {"n": n}))
            episode.end_turn("Done.")
        return messages, episode.score()

    right = [[(s["op"], s["n"])] for s in steps]
    messages, score = play(right)
    assert messages == task["spec"]["turns"] and score.success and score.failed_turn is None
    wrong_n = steps[2]["n"] + 1 if steps[2]["op"] != "mul" else 2 + (steps[2]["n"] == 2)
    assert play(right[:2] + [[(steps[2]["op"], wrong_n)]])[1].failed_turn == 3
    assert play(right[:1])[1].failed_turn == 2  # nothing done in turn 2
    all_at_once = [[(s["op"], s["n"]) for s in steps]]  # the right chain, but all of it in turn 1
    score = play(all_at_once)[1]
    assert not score.success and score.failed_turn == 1 and "one call in each turn" in score.reason


def test_partial_credit_is_the_fraction_done_right_and_success_stays_whole(test_tasks):
    partial = load_environment("calc", partial_credit=True)
    spec = next(t for t in test_tasks if t["spec"]["skill"]["calls"] == 3 and not t["spec"].get("turns")
                and t["spec"]["form"] == "steps" and "mul" not in t["spec"]["skill"]["tools"])["spec"]
    steps = spec["steps"]
    right = [ToolCall(s["op"], {"n": s["n"]}) for s in steps]
    off = [ToolCall(s["op"], {"n": s["n"] + 1}) for s in steps]

    def score(env, calls):
        return replay(env, "t", spec, [calls])

    assert (score(partial, right).reward, score(partial, right).success) == (1.0, True)
    # the first two calls right, the third off: 2 of 3; a failure, the reason says the credit
    got = score(partial, right[:2] + off[2:])
    assert (round(got.reward, 9), got.success) == (round(2 / 3, 9), False) and "partial credit 0.67" in got.reason
    assert round(score(partial, right[:1] + off[1:]).reward, 9) == round(1 / 3, 9)
    assert score(partial, off).reward == 0.0 and score(partial, []).reward == 0.0
    # a wrong first call spoils what follows: the register is off from then on
    assert score(partial, off[:1] + right[1:]).reward == 0.0
    # extra calls cost credit: the whole chain right, then one more call: capped below a success
    extra = score(partial, right + [ToolCall("add", {"n": 1})])
    assert not extra.success and round(extra.reward, 9) == round(2 / 3, 9)
    # a refused call counts as an attempt: 2 right of max(3, 2 applied + 1 refused)
    refused = score(partial, right[:2] + [ToolCall("add", {"n": "x"})])
    assert not refused.success and round(refused.reward, 9) == round(2 / 3, 9)
    # the default environment keeps the paper's binary reward; the verdicts are the same
    binary = CalcEnvironment()
    for calls in (right[:2] + off[2:], off, right + [ToolCall("add", {"n": 1})]):
        assert (score(binary, calls).reward, score(binary, calls).success) == (0.0, score(partial, calls).success)
    with pytest.raises(TypeError, match="partial_credit must be true or false"):
        CalcEnvironment(partial_credit="yes")


def test_partial_credit_of_a_multi_turn_task_counts_the_turns_before_the_failed_one(test_tasks):
    partial = CalcEnvironment(partial_credit=True)
    task = next(t for t in test_tasks if len(t["spec"].get("turns", [])) == 3 and t["spec"]["form"] == "steps")
    spec, steps = task["spec"], task["spec"]["steps"]
    right = [[ToolCall(s["op"], {"n": s["n"]})] for s in steps]
    assert replay(partial, "t", spec, right).reward == 1.0
    wrong_n = steps[2]["n"] + 1 if steps[2]["op"] != "mul" else 2 + (steps[2]["n"] == 2)
    last_off = replay(partial, "t", spec, right[:2] + [[ToolCall(steps[2]["op"], {"n": wrong_n})]])
    assert (last_off.failed_turn, round(last_off.reward, 9), last_off.success) == (3, round(2 / 3, 9), False)
    assert round(replay(partial, "t", spec, right[:1]).reward, 9) == round(1 / 3, 9)  # nothing in turn 2
    all_at_once = replay(partial, "t", spec, [[call for (call,) in right]])  # the chain, all in turn 1
    assert (all_at_once.failed_turn, all_at_once.reward) == (1, 0.0)
