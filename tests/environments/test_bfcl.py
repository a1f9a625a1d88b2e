"""The BFCL environment: the shared contract, the registry, task loading, tools, refusals and scoring."""

from __future__ import annotations

import copy
import random
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

from environment_contract import EnvironmentContract  # noqa: E402

from coevolve_engine.adapters.environments import ENVIRONMENTS, load_environment  # noqa: E402
from coevolve_engine.core.environment import SpecError, ToolCall, replay  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment  # noqa: E402
from coevolve_engine.core.registry import RegistryError  # noqa: E402

SAMPLE_IDS = [
    "multi_turn_base_0",  # positional ground truth: sort('final_report.pdf')
    "multi_turn_miss_func_0",  # 'sort' held out until turn 3
    "multi_turn_miss_param_0",
    "multi_turn_long_context_0",
    "simple_python_1",  # dotted function name: math.factorial
    "multiple_0",
    "parallel_0",
    "parallel_multiple_0",
]


@pytest.fixture(scope="module")
def bfcl() -> BFCLEnvironment:
    return BFCLEnvironment()


@pytest.fixture(scope="module")
def tasks(bfcl) -> dict[str, dict]:
    """Every loadable shipped task, by BFCL id."""
    return {task["spec"]["bfcl_id"]: task for task in bfcl.load_tasks()}


def spec_of(tasks, bfcl_id: str) -> dict:
    return copy.deepcopy(tasks[bfcl_id]["spec"])


class TestBFCLContract(EnvironmentContract):
    @pytest.fixture
    def environment(self, bfcl):
        return bfcl

    @pytest.fixture
    def sample_tasks(self, tasks):
        return [tasks[bfcl_id] for bfcl_id in SAMPLE_IDS]

    @pytest.fixture
    def invalid_specs(self, tasks):
        multi = spec_of(tasks, "multi_turn_base_0")
        single = spec_of(tasks, "simple_python_1")
        return [
            {**multi, "involved_classes": ["NoSuchAPI"]},
            {**multi, "involved_classes": []},
            {**multi, "ground_truth": multi["ground_truth"][:-1]},
            {**multi, "ground_truth": [["cd(folder=__import__('os').getcwd())"]] + multi["ground_truth"][1:]},
            {**multi, "ground_truth": [["os.system('ls')"]] + multi["ground_truth"][1:]},
            {**multi, "ground_truth": [["buy_stock(symbol='AAPL')"]] + multi["ground_truth"][1:]},
            {**multi, "missed_function": {"9": ["sort"]}},
            {**multi, "turns": [[{"role": "user"}]] * len(multi["turns"])},
            {**single, "category": "simple_java"},
            {**single, "turns": single["turns"] * 2},
            {**single, "functions": []},
            {**single, "ground_truth": [{"no.such.function": {"number": [5]}}]},
        ]


# --- registry and loading ---------------------------------------------------------------------------------


def test_bfcl_is_registered_like_a_plugin():
    assert "bfcl" in ENVIRONMENTS.names()
    assert ENVIRONMENTS.load("bfcl") is BFCLEnvironment
    assert isinstance(load_environment("bfcl"), BFCLEnvironment)
    with pytest.raises(RegistryError, match="known: .*bfcl"):
        load_environment("no-such-environment")


def test_load_tasks_counts_per_category(bfcl):
    counts = {category: sum(1 for _ in bfcl.load_tasks(category=category)) for category in bfcl.categories}
    assert counts == {
        "multi_turn_base": 200,
        "multi_turn_miss_func": 199,  # multi_turn_miss_func_49 is skipped, see below
        "multi_turn_miss_param": 200,
        "multi_turn_long_context": 200,
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
    }
    assert sum(1 for _ in bfcl.load_tasks(category="multi_turn_miss_func", include_defective=True)) == 200
    assert [t["task_id"] for t in bfcl.load_tasks(["parallel", "multiple"], limit=1)] == [
        "bfcl/parallel_0",
        "bfcl/multiple_0",
    ]
    with pytest.raises(ValueError, match="known: multi_turn_base"):
        next(bfcl.load_tasks(category="web_search"))


def test_the_one_defective_shipped_task_is_skipped_for_a_stated_reason(bfcl, caplog):
    """Its ground truth calls 'tail' in turn 1, but bfcl holds 'tail' out until turn 3."""
    with caplog.at_level("WARNING"):
        loaded = {t["spec"]["bfcl_id"] for t in bfcl.load_tasks(category="multi_turn_miss_func")}
    assert "multi_turn_miss_func_49" not in loaded
    assert "multi_turn_miss_func_49" in caplog.text and "'tail', which is held out until turn 3" in caplog.text


def test_task_records_carry_everything_needed(tasks):
    task = tasks["multi_turn_base_0"]
    assert task["task_id"] == "bfcl/multi_turn_base_0" and task["env"] == "bfcl"
    assert task["source"] == "bfcl-eval==2026.3.23:BFCL_v4_multi_turn_base.json"
    assert task["prompt"].startswith("Move 'final_report.pdf'")
    spec = task["spec"]
    assert set(spec) >= {"kind", "category", "turns", "initial_config", "involved_classes", "ground_truth",
                         "long_context", "missed_function", "path"}
    assert spec["long_context"] is False and tasks["multi_turn_long_context_0"]["spec"]["long_context"] is True
    assert tasks["multi_turn_miss_func_0"]["spec"]["missed_function"] == {"3": ["sort"]}


def test_importing_bfcl_leaves_site_packages_alone(tmp_path):
    """With BFCL_PROJECT_ROOT unset we point it at a cache folder before bfcl_eval's config is imported."""
    script = textwrap.dedent(
        """
        import os, pathlib, bfcl_eval
        from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
        from coevolve_engine.core.environment import replay
        env = BFCLEnvironment()
        task = next(env.load_tasks("simple_python", limit=1))
        assert replay(env, task["task_id"], task["spec"], env.reference_solution(task["spec"])).success
        print(os.environ["BFCL_PROJECT_ROOT"])
        print(pathlib.Path(bfcl_eval.__file__).resolve().parents[1])
        """
    )
    environ = {k: v for k, v in os.environ.items() if k != "BFCL_PROJECT_ROOT"}
    environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True)
    project_root, site_packages = done.stdout.split()
    assert project_root == str(tmp_path / "cache" / "coevolve-engine" / "bfcl")
    assert (tmp_path / "cache" / "coevolve-engine" / "bfcl" / "score").is_dir()
    assert not [name for name in ("result", "score", ".file_locks") if os.path.exists(os.path.join(site_packages, name))]


# --- tools and turns --------------------------------------------------------------------------------------


def tool_names(episode) -> list[str]:
    return [tool["function"]["name"] for tool in episode.tools()]


def test_miss_func_holds_a_tool_out_until_its_turn(bfcl, tasks):
    spec = spec_of(tasks, "multi_turn_miss_func_0")
    episode = bfcl.start("t", spec)
    for turn in range(3):
        assert episode.next_turn()
        assert "sort" not in tool_names(episode)
        episode.end_turn(None)
    # a model that calls it before its turn is not refused: BFCL's executor runs every public method
    early = bfcl.start("t", spec)
    early.next_turn()
    ran = early.execute(ToolCall("sort", {"file_name": "final_report.pdf"}))
    assert "not available" not in ran.content
    assert episode.next_turn() == "I have updated some more functions you can choose from. What about now?"
    assert tool_names(episode)[-1] == "sort"


def test_single_turn_tools_rename_dots_and_translate_types(bfcl, tasks):
    episode = bfcl.start("t", spec_of(tasks, "simple_python_1"))
    assert episode.next_turn().startswith("Calculate the factorial")
    (tool,) = episode.tools()
    assert tool["function"]["name"] == "math_factorial"
    assert tool["function"]["parameters"]["type"] == "object"
    assert episode.execute(ToolCall("math_factorial", {"number": 5})).error is None
    assert episode.score().success


def test_single_turn_answers_are_judged_whole(bfcl, tasks):
    """As in BFCL, the answer is every call made: a refused call fails it even if a good one follows."""
    episode = bfcl.start("t", spec_of(tasks, "simple_python_1"))
    episode.next_turn()
    assert episode.execute(ToolCall("math.factorial", {"number": 5})).error  # the agent sees math_factorial
    assert episode.execute(ToolCall("math_factorial", {"number": 5})).error is None
    score = episode.score()
    assert not score.success and score.reason.startswith("invalid call: unknown tool 'math.factorial'")


# --- refusals: nothing runs, nothing changes --------------------------------------------------------------


def public_state(episode) -> dict:
    return {name: copy.deepcopy({k: v for k, v in vars(instance).items() if not k.startswith("_")})
            for name, instance in episode._api.instances.items()}


@pytest.mark.parametrize(
    "call, message",
    [
        (ToolCall("__import__", {"name": "os"}), "'__import__' is private"),
        (ToolCall("_load_scenario", {"scenario": {}}), "'_load_scenario' is private"),
        (ToolCall("post_tweet", {"content": "hi"}), "unknown tool 'post_tweet'"),  # TwitterAPI is declared
        (ToolCall("buy_stock", {"symbol": "AAPL"}), "unknown tool 'buy_stock'"),
        (ToolCall("place_order", {"order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}),
         "unknown tool 'place_order'"),  # TradingBot is not declared by this task
        (ToolCall("mkdir", {"dir_name": object()}), "argument 'dir_name' is not a literal"),
        (ToolCall("mkdir", {"dir_name": {1, 2}}), "argument 'dir_name' is not a literal"),
        (ToolCall("mkdir", "dir_name='x'"), "arguments must be an object"),
    ],
)
def test_forbidden_calls_get_an_error_and_change_nothing(bfcl, tasks, call, message):
    spec = spec_of(tasks, "multi_turn_base_0")
    spec["involved_classes"] = ["GorillaFileSystem"]
    episode = bfcl.start("t", spec)
    episode.next_turn()
    before = public_state(episode)
    observation = episode.execute(call)
    assert observation.error and message in observation.error
    assert observation.content.startswith("Error during execution: ")
    assert public_state(episode) == before


def test_parse_refusals_name_what_was_refused():
    from coevolve_engine.adapters.calls import CallParseError, parse_python_calls

    for text in ["__import__('os').system('ls')", "os.system('ls')", "mkdir(dir_name=open('x').read())",
                 "mkdir(dir_name=lambda: 1)", "mkdir(dir_name=[c for c in 'ab'])", "mkdir(dir_name=f'{x}')"]:
        with pytest.raises(CallParseError):
            parse_python_calls(text, {"mkdir": ["dir_name"]})


def test_a_tool_that_raises_is_an_error_observation(bfcl, tasks):
    episode = bfcl.start("t", spec_of(tasks, "multi_turn_base_0"))
    episode.next_turn()
    observation = episode.execute(ToolCall("cd", {"no_such_parameter": "x"}))
    assert observation.error.startswith("TypeError")
    assert observation.content.startswith("Error during execution: ")


def test_domain_errors_are_reported_as_errors(bfcl, tasks):
    episode = bfcl.start("t", spec_of(tasks, "multi_turn_base_0"))
    episode.next_turn()
    observation = episode.execute(ToolCall("cd", {"folder": "no_such_folder"}))
    assert observation.error and "no_such_folder" in observation.content


# --- scoring ----------------------------------------------------------------------------------------------


def test_every_shipped_single_turn_answer_scores_1(bfcl, tasks):
    single = [task for task in tasks.values() if task["spec"]["kind"] == "single_turn"]
    failures = [
        (task["task_id"], score.reason)
        for task in single
        if not (score := replay(bfcl, task["task_id"], task["spec"], bfcl.reference_solution(task["spec"]))).success
    ]
    assert len(single) == 1000 and failures == []


def test_wrong_single_turn_answers_score_zero(bfcl, tasks):
    spec = spec_of(tasks, "simple_python_1")
    assert not replay(bfcl, "t", spec, [[ToolCall("math_factorial", {"number": 6})]]).success
    assert not replay(bfcl, "t", spec, [[]]).success
    two = replay(bfcl, "t", spec, [[ToolCall("math_factorial", {"number": 5})] * 2])
    assert (two.success, two.reward) == (False, 0.0) and "wrong_count" in two.reason


def test_parallel_answers_may_come_in_any_order(bfcl, tasks):
    spec = spec_of(tasks, "parallel_0")
    solution = bfcl.reference_solution(spec)
    assert len(solution[0]) > 1
    assert replay(bfcl, "t", spec, [list(reversed(solution[0]))]).success


def test_multi_turn_failure_names_the_turn_and_the_check(bfcl, tasks):
    spec = spec_of(tasks, "multi_turn_base_0")
    solution = bfcl.reference_solution(spec)
    score = replay(bfcl, "t", spec, [solution[0], [], *solution[2:]])
    assert not score.success and score.reason.startswith("turn 1: multi_turn:empty_turn_model_response")
    score = replay(bfcl, "t", spec, [solution[0][:-1], *solution[1:]])
    assert score.reason.startswith("turn 0: multi_turn:instance_state_mismatch")


def test_score_counts_turns_never_played_as_empty(bfcl, tasks):
    spec = spec_of(tasks, "multi_turn_base_0")
    episode = bfcl.start("t", spec)
    episode.next_turn()
    for call in bfcl.reference_solution(spec)[0]:
        episode.execute(call)
    score = episode.score()  # ends the open turn; turns 1-3 were never played
    assert not score.success and score.reason.startswith("turn 1: not played")


def test_start_rejects_a_bad_spec_with_every_problem(bfcl):
    with pytest.raises(SpecError) as caught:
        bfcl.start("bad", {"kind": "multi_turn", "turns": [], "involved_classes": ["NoSuchAPI"]})
    assert caught.value.task_id == "bad" and len(caught.value.problems) >= 2


# --- robustness against malformed specs -------------------------------------------------------------------

JUNK_VALUES = [None, 0, -1, 1.5, True, "", "x", [], [[]], [None], [["x"]], [{"role": 1}], {}, {"a": 1},
               {"0": [1]}, {"0": [["a"]]}, ["GorillaFileSystem"]]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from _paths(item, prefix + (index,))


def test_mutated_specs_are_rejected_or_run_never_crash(bfcl, tasks):
    """Junk at any place in a spec gives problems from check_spec and SpecError from start, or a playable task."""
    rng = random.Random(20261130)
    for bfcl_id in SAMPLE_IDS:
        spec = tasks[bfcl_id]["spec"]
        paths = [path for path in _paths(spec) if 0 < len(path) <= 4]
        for _ in range(60):
            path, junk = rng.choice(paths), rng.choice(JUNK_VALUES)
            mutated = copy.deepcopy(spec)
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = copy.deepcopy(junk)
            problems = bfcl.check_spec(mutated)
            try:
                episode = bfcl.start("t", mutated)
            except SpecError:
                assert problems, (bfcl_id, path, junk)
                continue
            assert problems == [], (bfcl_id, path, junk)
            while episode.next_turn() is not None:
                episode.tools()
                episode.end_turn(None)
            assert 0.0 <= episode.score().reward <= 1.0
