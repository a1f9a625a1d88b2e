"""Synthesis writes every BFCL multi-turn kind, through a scripted OpenAI-compatible server on 127.0.0.1.

The abstraction prompt asks each task's kind (base, miss_func, miss_param, long_context); the scripted model
answers with drafts of that kind, good and bad. Validation runs them in the real BFCL environment: a good draft
of each kind is accepted (and bfcl_eval's own multi_turn_checker, run on the task as its category, takes its
ground truth), while a held-back function called before its release turn, a release turn that does not call
it, a turn lacking a value whose ground truth is not empty, a value no later turn gives, a draft of another
kind than asked and a field that does not parse are refused with their reasons. The kind shares are a
setting, drawn reproducibly from the seed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from collections import Counter

import pytest

from scripted_server import text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")
pytest.importorskip("sentence_transformers")

from coevolve_engine.adapters.calls import parse_python_calls  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module  # noqa: E402
from coevolve_engine.core.endpoint import CallSettings, Endpoint  # noqa: E402
from coevolve_engine.core.errors import CoevolveError  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.bootstrap import UnguidedSynthesizer  # noqa: E402
from coevolve_engine.synthesis.candidates import write_candidates  # noqa: E402
from coevolve_engine.synthesis.llm_synthesizer import check_kinds, draw_kinds  # noqa: E402
from coevolve_engine.synthesis.validation import validate_candidates  # noqa: E402

SEED = 0
FILES_WORLD = 7  # world 7 of seed 0: MessageAPI and GorillaFileSystem (whose long-context world is larger)

EXPLORED = ["mkdir(dir_name='scratch')", "cd(folder='scratch')", "touch(file_name='todo.txt')"]

GOOD = {
    "base": {"turns": ["Where am I right now? Then make a directory named archive_q3 and list what is here."],
             "ground_truth": [["pwd()", "mkdir(dir_name='archive_q3')", "ls()"]]},
    "miss_func": {"turns": ["Make a folder called scratch, go in, create todo.txt and write 'pears' into it.",
                            "Now sort the lines of todo.txt for me.", ""],
                  "ground_truth": [["mkdir(dir_name='scratch')", "cd(folder='scratch')", "touch(file_name='todo.txt')",
                                    "echo(content='pears', file_name='todo.txt')"], [],
                                   ["sort(file_name='todo.txt')"]],
                  "missed_function": {"2": ["sort"]}},
    "miss_param": {"turns": ["Set up a folder named drafts_2026 and step into it.",
                             "Create a new empty file there for my meeting notes.",
                             "Sorry: call the file notes_q3.txt."],
                   "ground_truth": [["mkdir(dir_name='drafts_2026')", "cd(folder='drafts_2026')"], [],
                                    ["touch(file_name='notes_q3.txt')"]],
                   "missed_parameter": {"turn": 1, "parameter": "file_name", "value": "notes_q3.txt"}},
    "long_context": {"turns": ["Show me every file and folder in this directory, hidden ones too, read ideas.csv "
                               "to me, then make a folder called inbox_zero."],
                     "ground_truth": [["ls(a=True)", "cat(file_name='ideas.csv')", "mkdir(dir_name='inbox_zero')"]]},
}

BAD = {  # (draft, the check that refuses it, words its reason must hold)
    "miss_func": [
        ({**GOOD["miss_func"], "ground_truth": [GOOD["miss_func"]["ground_truth"][0] + ["sort(file_name='todo.txt')"],
                                                [], ["sort(file_name='todo.txt')"]]},
         "kind", "sort is held back until turn 2 but the ground truth calls it in turn 0"),
        ({**GOOD["miss_func"], "ground_truth": [*GOOD["miss_func"]["ground_truth"][:2], ["ls()"]]},
         "kind", "turn 2 releases sort but its ground truth does not call it"),
        ({**GOOD["miss_func"], "missed_function": {"two": ["sort"]}},
         "synthesis", "draft 3: field 'missed_function': key 'two' is not a turn index"),
    ],
    "miss_param": [
        ({**GOOD["miss_param"], "ground_truth": [GOOD["miss_param"]["ground_truth"][0], ["touch(file_name='x.txt')"],
                                                 GOOD["miss_param"]["ground_truth"][2]]},
         "kind", "turn 1 lacks file_name but its ground truth is not empty"),
        ({**GOOD["miss_param"], "turns": [*GOOD["miss_param"]["turns"][:2], "Go ahead and make it."]},
         "kind", "no user turn after turn 1 gives file_name = 'notes_q3.txt'"),
    ],
    "long_context": [
        ({"kind": "base", "turns": ["Which folder is this? Create one named reports_2025 and list the files."],
          "ground_truth": [["pwd()", "mkdir(dir_name='reports_2025')", "ls()"]]},
         "synthesis", "field 'kind': asked for a long_context task, the draft is base"),
    ],
}


class Writer:
    """The explorer makes three calls then stops; the abstraction answers with drafts of the kind it was asked."""

    def __init__(self):
        self.asked: list[list[str]] = []

    def __call__(self, request: dict):
        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        if system.startswith("You explore a tool environment"):
            if any(m["role"] == "assistant" for m in messages):
                return text("I made a folder and a file.")
            return tool_calls(*[(c.name, c.arguments) for call in EXPLORED for c in parse_python_calls(call)])
        if system.startswith("You write training tasks"):
            everything = "\n".join(str(m["content"]) for m in messages)
            asked = re.findall(r"^Task \d+: kind (\w+)$", everything, flags=re.M)
            self.asked.append(asked)
            kind = asked[0]
            drafts = [{"kind": kind, **GOOD[kind], "completion_criterion": "the errand is done"}]
            drafts += [{"kind": kind, **draft, "completion_criterion": "the errand is done"}
                       for draft, _, _ in BAD.get(kind, [])]
            return text(json.dumps({"tasks": drafts[:len(asked)]}))
        raise AssertionError(f"unexpected request: {system[:80]!r}")


_tags = itertools.count()


def bfcl_takes_its_own_ground_truth(spec: dict) -> bool:
    """bfcl_eval's multi_turn_checker on the task as an entry of its category, answered with its ground truth."""
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
    executor = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    tag = f"coevolve_kinds_{next(_tags)}"
    entry = {"id": f"{spec['category']}_0", "initial_config": spec["initial_config"],
             "involved_classes": spec["involved_classes"]}
    answers = [[[call] for call in turn] for turn in spec["ground_truth"]]
    try:
        return bool(checker.multi_turn_checker(answers, spec["ground_truth"], entry, spec["category"], tag)["valid"])
    finally:
        for name in [name for name in vars(executor) if name.startswith(tag)]:
            del vars(executor)[name]


def test_one_draft_of_each_kind_is_accepted_and_the_bad_ones_are_refused(db_path, scripted_server):
    env = load_environment("bfcl")
    world = env.exploration_worlds(FILES_WORLD + 1, SEED)[FILES_WORLD]
    writer = Writer()
    scripted_server.respond_with(writer)
    candidates = []
    for kind in ("base", "miss_func", "miss_param", "long_context"):
        synthesizer = UnguidedSynthesizer(store_path=db_path, model=scripted_server.endpoint(), env="bfcl",
                                          calls=CallSettings(timeout=5, retries=0), max_explore_steps=6, kinds={kind: 1},
                                          tasks_per_world=1 + len(BAD.get(kind, [])))
        candidates += synthesizer.for_world(env, world, index=FILES_WORLD, seed=SEED, round=0)
    assert [kinds[0] for kinds in writer.asked] == ["base", "miss_func", "miss_param", "long_context"]
    with Store(db_path) as store:
        write_candidates(store, candidates)
    report = validate_candidates(db_path, env=env)

    by_id = {v.candidate_id: v for v in report.verdicts}
    assert len(by_id) == len(candidates) == 10
    verdicts = {(c.provenance["kind"], c.provenance["draft"]): by_id[c.candidate_id] for c in candidates}
    for kind in GOOD:
        verdict = verdicts[(kind, 0)]
        assert verdict.verdict == "accepted", (kind, verdict.checks)
        assert [check.check for check in verdict.checks][:3] == ["synthesis", "kind", "schema"]
    for kind, bad in BAD.items():
        for index, (_, reason, words) in enumerate(bad, start=1):
            verdict = verdicts.get((kind, index)) or verdicts[("base", index)]  # a draft of another kind says so
            assert verdict.reason == reason, (kind, index, verdict.checks)
            assert words in verdict.checks[-1].detail, verdict.checks[-1].detail
    assert report.accepted == 4 and report.by_reason == {"kind": 4, "synthesis": 2}

    with Store(db_path, read_only=True) as store:
        rows = store.execute("SELECT task_id, spec, meta FROM tasks WHERE source = 'synthesized'").fetchall()
        refused = store.execute("SELECT reason, checks FROM candidates WHERE verdict = 'rejected'").fetchall()
    assert sorted(reason for reason, _ in refused) == ["kind"] * 4 + ["synthesis"] * 2  # stored as any refusal
    specs = {json.loads(meta)["kind"]: json.loads(spec) for _, spec, meta in rows}
    assert {kind: spec["category"] for kind, spec in specs.items()} == {kind: f"multi_turn_{kind}" for kind in GOOD}
    assert specs["miss_func"]["missed_function"] == {"2": ["sort"]} and specs["miss_func"]["turns"][2] == []
    assert specs["miss_param"]["ground_truth"][1] == [] and specs["miss_param"]["missed_function"] == {}
    assert specs["long_context"]["long_context"] is True and specs["base"]["long_context"] is False
    for kind, spec in specs.items():
        assert bfcl_takes_its_own_ground_truth(spec), kind

    # the held-back tool is offered from its release turn on, as BFCL's loop adds it, with BFCL's prompt
    episode = env.start("t", specs["miss_func"])
    offered = []
    while (prompt := episode.next_turn()) is not None:
        offered.append(("sort" in [t["function"]["name"] for t in episode.tools()], prompt))
    assert [has for has, _ in offered] == [False, False, True]
    assert "updated some more functions" in offered[2][1]

    # the long-context world returns far longer results than the plain one: BFCL's setting is applied
    plain = {**specs["long_context"], "long_context": False}
    read = []
    for spec in (plain, specs["long_context"]):
        episode = env.start("t", spec)
        episode.next_turn()
        read.append([episode.execute(call).content for call in env.reference_solution(spec)[0]][1])
    assert len(read[1]) > 10 * len(read[0])


def test_a_long_context_task_needs_a_class_that_reads_the_setting():
    env = load_environment("bfcl")
    world = env.exploration_worlds(FILES_WORLD + 1, SEED)[FILES_WORLD]
    draft = {"kind": "long_context", "turns": ["Add 2 and 3, then 4 and 5, then 6 and 7."],
             "ground_truth": [["add(a=2, b=3)", "add(a=4, b=5)", "add(a=6, b=7)"]]}
    files = env.spec_from_draft({**world, "involved_classes": ["GorillaFileSystem", "MathAPI"]}, draft)
    assert env.kind_problems(files) == []
    math_only = env.spec_from_draft({**world, "involved_classes": ["MathAPI"], "initial_config": {}}, draft)
    assert env.kind_problems(math_only) == ["none of MathAPI reads BFCL's long-context setting (loading the world "
                                            "with it changes nothing)"]


def test_draft_fields_that_contradict_the_kind_are_named():
    env = load_environment("bfcl")
    world = env.exploration_worlds(FILES_WORLD + 1, SEED)[FILES_WORLD]
    cases = [
        ({**GOOD["base"], "missed_function": {"1": ["sort"]}}, "field 'missed_function': only a miss_func draft"),
        ({**GOOD["miss_func"], "kind": "miss_func", "missed_function": {}}, "field 'missed_function': a miss_func"),
        ({**GOOD["miss_func"], "kind": "miss_func", "missed_function": {"2": []}}, "field 'missed_function'['2']"),
        ({**GOOD["miss_param"], "kind": "miss_param", "missed_parameter": {"turn": "1", "parameter": "file_name",
                                                                            "value": "a"}},
         "field 'missed_parameter.turn'"),
        ({**GOOD["miss_param"], "kind": "miss_param", "missed_parameter": None}, "field 'missed_parameter'"),
        ({**GOOD["base"], "kind": "chatty"}, "field 'kind': 'chatty' is not one of"),
    ]
    for draft, words in cases:
        with pytest.raises(ValueError, match=re.escape(words)):
            env.spec_from_draft(world, draft)


def test_the_recipe_shares_are_honoured_over_a_seeded_draw():
    import tomllib
    from pathlib import Path

    recipe = tomllib.loads((Path(__file__).parents[1] / "recipes" / "bfcl_paper.toml").read_text())
    kinds = recipe["synthesis"]["kinds"]
    env = load_environment("bfcl")
    shares = check_kinds(kinds, env.draft_kinds())
    assert shares == {"base": 0.25, "miss_func": 0.25, "miss_param": 0.25, "long_context": 0.25}
    draws = [kind for world in range(400)
             for kind in draw_kinds(shares, 1, seed=SEED, label=f"explore/bfcl world {SEED}/{world}")]
    counts = Counter(draws)
    assert set(counts) == set(shares) and all(abs(counts[k] / 400 - shares[k]) < 0.06 for k in shares), counts
    again = [kind for world in range(400)
             for kind in draw_kinds(shares, 1, seed=SEED, label=f"explore/bfcl world {SEED}/{world}")]
    assert again == draws  # the same seed draws the same kinds
    assert draws != [kind for world in range(400)
                     for kind in draw_kinds(shares, 1, seed=SEED + 1, label=f"explore/bfcl world {SEED + 1}/{world}")]
    skewed = check_kinds({"base": 3, "miss_func": 1}, env.draft_kinds())
    counts = Counter(draw_kinds(skewed, 800, seed=SEED, label="x"))
    assert abs(counts["base"] / 800 - 0.75) < 0.05 and set(counts) == {"base", "miss_func"}
    for bad, words in (({"chatty": 1}, "'chatty' not written by this environment"),
                       ({"base": -1}, "kinds.base: a share must be a number >= 0"),
                       ({"base": 0}, "the shares sum to 0")):
        with pytest.raises(CoevolveError, match=re.escape(words)):
            check_kinds(bad, env.draft_kinds())
    calc = load_environment("calc")
    with pytest.raises(CoevolveError, match="it writes base"):
        check_kinds(kinds, calc.draft_kinds())


def test_the_run_hands_its_kinds_to_llm_synthesizers_only():
    from coevolve_engine.loop.config import RunConfig
    from coevolve_engine.loop.feedback import synthesizer_options

    config = RunConfig()
    config.synthesis.kinds = {"base": 1, "miss_func": 1}
    config.synthesis.synthesizer = "llm"
    config.synthesis.options = {"model": "m"}
    options = synthesizer_options(config)  # with [models]' explorer and abstraction model, the options' own first
    assert options["kinds"] == {"base": 1, "miss_func": 1} and options["model"] == "m"
    config.synthesis.synthesizer = "offline:bfcl"
    assert synthesizer_options(config) == {"model": "m"}


class DeclaringSynthesizer:
    """A plugin synthesizer built on no class of the engine's: what it needs is only what it declares."""

    explores = True
    writes_kinds = True

    def __init__(self, **options):
        self.options = options


def test_the_run_reads_what_a_plugin_declares_never_its_name_or_class():
    from coevolve_engine.core.candidates import declares
    from coevolve_engine.loop.config import RunConfig
    from coevolve_engine.loop.feedback import synthesizer_options
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS

    SYNTHESIZERS.register("test-declaring", f"{__name__}:DeclaringSynthesizer")
    try:
        config = RunConfig()
        config.models.explorer.model = "openai/explorer"
        config.models.explorer.api_base = "http://127.0.0.1:9/v1"  # the abstraction model, left empty, is it
        config.synthesis.kinds = {"base": 1}
        config.synthesis.synthesizer = "test-declaring"
        config.synthesis.options = {"temperature": 0.2}
        options = synthesizer_options(config)
        explorer = Endpoint("openai/explorer", "http://127.0.0.1:9/v1")
        assert options["explorer"] == options["model"] == explorer and options["kinds"] == {"base": 1}
        assert options["temperature"] == 0.2
        DeclaringSynthesizer.explores = DeclaringSynthesizer.writes_kinds = False
        assert synthesizer_options(config) == {"temperature": 0.2}  # it declares neither: its own options alone
        loaded = SYNTHESIZERS.load("test-declaring")
        assert declares(loaded, "needs_patterns") and not declares(loaded, "reads_summaries")  # the defaults
        assert declares(SYNTHESIZERS.load("llm"), "reads_summaries")
        assert not declares(SYNTHESIZERS.load("llm-unguided"), "needs_patterns")
    finally:
        DeclaringSynthesizer.explores = DeclaringSynthesizer.writes_kinds = True
        SYNTHESIZERS._entries.pop("test-declaring", None)


def test_the_commands_take_kinds_and_name_a_wrong_one(tmp_path):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli

    db = str(tmp_path / "kinds.duckdb")
    result = CliRunner().invoke(cli, ["bootstrap", "--env", "bfcl", "--explorer-model", "openai/scripted", "--n", "1",
                                      "--kinds", "base=1,chatty=1", "--no-progress", "--create", "--db", db])
    assert result.exit_code != 0 and "kinds: 'chatty' not written by this environment" in result.output, result.output
    result = CliRunner().invoke(cli, ["synthesize", "--synthesizer", "llm", "--model", "m", "--kinds", "base",
                                      "--db", db])
    assert result.exit_code == 2 and "'base' is not KIND=SHARE" in result.output, result.output


def test_a_run_refuses_kinds_its_environment_does_not_write_before_it_starts(tmp_path):
    from coevolve_engine.loop import RunLoop
    from coevolve_engine.loop.config import ConfigError
    from coevolve_engine.loop.config_files import load_config
    from coevolve_engine.loop.preflight import check_plugins

    config = load_config(None, ["trainer.model=p", "env=calc", "synthesis.synthesizer=llm",
                                "synthesis.options={model = 'm'}", "synthesis.kinds={base = 1, miss_func = 1}"])
    with pytest.raises(ConfigError, match=re.escape("synthesis.kinds: kinds: 'miss_func' not written by this "
                                                    "environment; it writes base")):
        check_plugins(RunLoop(tmp_path / "s.duckdb", config).context)
