"""The recipes under recipes/: the paper's main BFCL run, its ablations, and a CPU-sized run that CI runs end to
end; and the run-configuration support the ablations need (extends, signals.use, validation.enabled,
synthesizer "none")."""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.config_files import differences, load_config
from coevolve_engine.core.store import Store

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
PAPER = RECIPES / "bfcl_paper.toml"
WEIGHTED = RECIPES / "bfcl_weighted.toml"

# What each recipe changes against the one it extends, and nothing else (each writes its checkpoints to a folder
# named after its store, the default: none sets trainer.output_dir). The paper's ablations extend bfcl_paper.toml
# and change one setting (a [models] role is one setting: a model and where it is served).
ABLATIONS = {
    "synthesis_only": {"synthesis.synthesizer": "none"},
    "random_exploration": {"synthesis.synthesizer": "llm-unguided"},
    "no_forgetting": {"signals.use": ["boundary", "rare"]},
    "no_boundary": {"signals.use": ["forgetting", "rare"]},
    "no_rare": {"signals.use": ["forgetting", "boundary"]},
    "no_validation": {"validation.enabled": False},
    "n_50": {"bootstrap.n": 50},
    "n_200": {"bootstrap.n": 200},
    "f_5": {"trainer.steps_per_round": 5, "rounds": 24},
    "f_20": {"trainer.steps_per_round": 20, "rounds": 6},
    "explorer_swap": {"models.explorer": {"model": "hosted_vllm/Qwen/Qwen3-32B", "api_base": "http://127.0.0.1:8001/v1",
                                          "api_key_env": ""}},
}
# F's sweep keeps the paper's 120 steps: F and the rounds it takes to reach them are one setting, the schedule.
ONE_SETTING = [{"trainer.steps_per_round", "rounds"}]
# The paper's other two models: the policy (and, for the 30B model, how it is launched).
MODELS = {
    "bfcl_paper_qwen2_5_7b": {"trainer.model": "models/Qwen2.5-7B-Instruct", "trainer.policy_name": "qwen2.5-7b"},
    "bfcl_paper_qwen3_30b_a3b": {
        "trainer.model": "models/Qwen3-30B-A3B", "trainer.policy_name": "qwen3-30b-a3b",
        "trainer.launcher": "accelerate launch --num_processes 16 --use_deepspeed --zero_stage 3 "
                            "--zero3_save_16bit_model true --mixed_precision bf16",
        "trainer.options.groups_per_step": 2, "trainer.options.generation_batch_size": 4},
}
# Our extension (weighted sampling) against the paper, and its own ablations against it.
EXTENSION = {"bfcl_weighted": {"curriculum.strategy": "coevolve"}}
WEIGHTED_ABLATIONS = {f"weighted_no_{term}_term": {f"curriculum.settings.{term}": 0.0}
                      for term in ("forgetting", "boundary", "rare")}
ALL = {**{name: (PAPER, keys) for name, keys in {**ABLATIONS, **MODELS, **EXTENSION}.items()},
       **{name: (WEIGHTED, keys) for name, keys in WEIGHTED_ABLATIONS.items()}}


def dotted(config: dict, key: str):
    for part in key.split("."):
        config = config[part]
    return config


def flat(config: dict, prefix: str = "") -> dict:
    """A resolved config as settings: dotted keys to values, tables (free-form ones too) key by key, except that
    a [models] role is one setting (a model and where it is served); an empty table holds no setting."""
    settings = {}
    for key, value in config.items():
        if isinstance(value, dict) and prefix != "models.":
            settings.update(flat(value, f"{prefix}{key}."))
        else:
            settings[prefix + key] = value
    return settings


def differing_keys(base: dict, child: dict) -> set[str]:
    left, right = flat(base), flat(child)
    missing = object()
    return {k for k in set(left) | set(right) if left.get(k, missing) != right.get(k, missing)}


def settings_differing(base: dict, child: dict) -> list[str]:
    """The settings in which two resolved configs differ, the keys of one ONE_SETTING group named together."""
    keys = differing_keys(base, child)
    grouped = [" + ".join(sorted(keys & group)) for group in ONE_SETTING if keys & group]
    return sorted(grouped + [k for k in keys if not any(k in group for group in ONE_SETTING)])


@pytest.mark.parametrize("name", ["bfcl_paper", "cpu_tiny"])
def test_the_full_recipes_set_every_field_each_with_a_comment(name):
    path = RECIPES / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    assert not list(differences(load_config(path).to_dict(), {**RunConfig().to_dict(), **data}))
    for section in ("models", "bootstrap", "warmup", "trainer", "signals", "patterns", "synthesis", "validation",
                    "curriculum", "eval"):
        assert set(data[section]) >= set(getattr(RunConfig(), section).__dict__), f"{name}: [{section}] lacks fields"
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^[a-z_]+ = ", line):
            assert lines[index - 1].startswith("#"), f"{name}: no comment above {line!r}"


def test_the_paper_recipe_has_the_papers_method_and_settings():
    c = load_config(PAPER)
    o = c.trainer.options
    assert (c.bootstrap.n, c.trainer.steps_per_round, c.rounds * c.trainer.steps_per_round) == (100, 10, 120)
    assert (o["group_size"], o["learning_rate"], o["beta"], o["epsilon"], o["epsilon_high"],
            o["temperature"]) == (8, 1e-6, 1e-3, 0.2, 0.28, 0.9)
    # episodes are played as BFCL's inference plays them: no episode cap, 21 answers a turn (`count > 20`)
    assert (c.episode.max_steps, c.episode.max_model_calls_per_turn) == (0, 21)
    processes = int(c.trainer.launcher.split("--num_processes")[1].split()[0])
    assert o["groups_per_step"] * processes == 32  # batch 32: tasks (GRPO groups) per optimizer step
    assert c.eval.every == 1 and c.signals.theta == 5.0
    assert c.trainer.launcher.startswith("accelerate launch")
    # the paper's method: uniform over the growing task set, forgetting per trajectory, all signals, validation
    assert (c.curriculum.strategy, c.curriculum.settings) == ("uniform", {})
    assert c.signals.forgetting_form == "trajectory" and c.signals.use == ["forgetting", "boundary", "rare"]
    assert c.synthesis.synthesizer == "llm" and c.validation.enabled
    # the explorer is Qwen3-Max, for D_0 and for each round's exploration: the one [models] explorer, which the
    # bootstrap and the llm synthesizer are both handed
    assert c.models.explorer.model == "openai/qwen3-max"
    assert {role: endpoint.model for role, endpoint in c.models.exploration().items()} == {
        "explorer": "openai/qwen3-max", "model": "openai/qwen3-max"}
    assert "explorer_model" not in c.synthesis.options and "model" not in c.synthesis.options


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_recipe_keeps_the_batch_at_32_tasks_and_notes_its_gpu_memory(name):
    c = load_config(RECIPES / f"{name}.toml")
    processes = int(c.trainer.launcher.split("--num_processes")[1].split()[0])
    assert c.trainer.options["groups_per_step"] * processes == 32
    assert "as bench/scale_rehearsal.py predicts it" in (RECIPES / f"{name}.toml").read_text()
    assert "as bench/scale_rehearsal.py predicts it" in PAPER.read_text()


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_recipe_differs_from_the_one_it_extends_in_exactly_its_keys(name):
    base, expected = ALL[name]
    assert tomllib.loads((RECIPES / f"{name}.toml").read_text())["extends"] == base.name
    parent = load_config(base).to_dict()
    child = load_config(RECIPES / f"{name}.toml").to_dict()
    assert differing_keys(parent, child) == set(expected)
    for key, value in expected.items():
        assert dotted(child, key) == value
    assert child["trainer"]["output_dir"] == ""  # checkpoints beside the store, named after it


def extends(path: Path) -> str | None:
    return tomllib.loads(path.read_text()).get("extends")


def test_every_ablation_differs_from_the_recipe_it_extends_in_one_setting():
    """Every recipe that extends another, except the paper run on its other models (bfcl_paper_qwen*), is an
    ablation (or, bfcl_weighted, our extension): its resolved config differs from its base's in one setting."""
    ablations = sorted(p for p in RECIPES.glob("*.toml") if extends(p) and not p.stem.startswith("bfcl_paper_"))
    assert {p.stem for p in ablations} == {*ABLATIONS, *EXTENSION, *WEIGHTED_ABLATIONS}
    assert {extends(p) for p in ablations} == {"bfcl_paper.toml", "bfcl_weighted.toml"}
    wrong = {}
    for path in ablations:
        base = load_config(path.parent / extends(path)).to_dict()
        differing = settings_differing(base, load_config(path).to_dict())
        if len(differing) != 1:
            wrong[f"{path.name} (against {extends(path)})"] = differing
    assert not wrong, f"recipes that do not differ from their base in exactly one setting: {wrong}"


def test_the_one_setting_check_counts_a_second_setting(tmp_path):
    """The check above can fail: a recipe that also changes the rollout temperature differs in two settings,
    and a swapped explorer with its own key variable is still one."""
    two = write(tmp_path, "two.toml", f"extends = '{PAPER}'\n[signals]\nuse = ['rare']\n"
                                      "[trainer.options]\ntemperature = 1.0\n")
    base = load_config(PAPER).to_dict()
    assert settings_differing(base, load_config(two).to_dict()) == ["signals.use", "trainer.options.temperature"]
    one = write(tmp_path, "one.toml", f"extends = '{PAPER}'\n[models.explorer]\nmodel = 'hosted_vllm/m'\n"
                                      "api_base = 'http://127.0.0.1:9/v1'\napi_key_env = 'VLLM_KEY'\n")
    assert settings_differing(base, load_config(one).to_dict()) == ["models.explorer"]


def test_the_papers_ablations_keep_uniform_sampling():
    for name in ABLATIONS:
        config = load_config(RECIPES / f"{name}.toml")
        assert config.curriculum.strategy == "uniform" and config.signals.forgetting_form == "trajectory", name


def test_print_config_shows_the_paper_recipe_uniform_with_per_trajectory_forgetting():
    result = CliRunner().invoke(cli, ["run", "--config", str(PAPER), "--print-config"])
    assert result.exit_code == 0, result.output
    printed = tomllib.loads(result.output)
    assert printed["curriculum"]["strategy"] == "uniform" and printed["signals"]["forgetting_form"] == "trajectory"
    assert "Forgetting's form" in result.output  # the field's help is printed with it


def test_print_config_prints_a_recipe_merged_over_the_one_it_extends():
    result = CliRunner().invoke(cli, ["run", "--config", str(RECIPES / "weighted_no_rare_term.toml"),
                                      "--print-config"])
    assert result.exit_code == 0, result.output
    printed = tomllib.loads(result.output)
    assert "extends" not in printed
    assert printed["signals"]["use"] == ["forgetting", "boundary", "rare"] and printed["bootstrap"]["n"] == 100
    assert printed["trainer"]["options"]["learning_rate"] == 1e-6 and printed["curriculum"]["settings"]["rare"] == 0
    assert printed["curriculum"]["strategy"] == "coevolve"


# -- extends ------------------------------------------------------------------------------------------------

def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_extends_chains_merge_tables_key_by_key_and_paths_are_relative_to_the_file(tmp_path):
    write(tmp_path, "base/base.toml", "rounds = 5\n[trainer]\nmodel = 'm'\n[trainer.options]\nbeta = 0.0\n"
                                      "learning_rate = 1e-3\n")
    write(tmp_path, "base/middle.toml", "extends = 'base.toml'\n[trainer.options]\nbeta = 0.5\n")
    child = write(tmp_path, "child.toml", "extends = 'base/middle.toml'\nseed = 7\n")
    config = load_config(child, ["trainer.options.temperature=1.0"])
    assert (config.rounds, config.seed, config.trainer.model) == (5, 7, "m")
    assert config.trainer.options == {"beta": 0.5, "learning_rate": 1e-3, "temperature": 1.0}


@pytest.mark.parametrize(("files", "message"), [
    ({"a.toml": "extends = 'b.toml'\n", "b.toml": "extends = 'a.toml'\n"}, "`extends` makes a cycle: a.toml -> "
                                                                             "b.toml -> a.toml"),
    ({"a.toml": "extends = 'a.toml'\n"}, "`extends` makes a cycle: a.toml -> a.toml"),
    ({"a.toml": "extends = 'nope.toml'\n"}, "nope.toml: no such file"),
    ({"a.toml": "extends = 3\n"}, "a.toml: extends must be the path of another config file, got 3"),
    ({"a.toml": "extends = 'b.toml'\n", "b.toml": "[trainer]\nmodle = 'x'\n"},
     "b.toml: unknown setting trainer.modle (did you mean trainer.model?)"),
    ({"a.toml": "extends = 'b.toml'\n[signals]\nuse = 'rare'\n", "b.toml": "[trainer]\nmodel = 'x'\n"},
     "a.toml: signals.use must be a list, got 'rare'"),
])
def test_bad_extends_are_refused_naming_the_files(tmp_path, files, message):
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "a.toml")
    assert message in str(caught.value)


# -- the ablations' settings ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("override", "message"), [
    ("signals.use=[]", "signals.use must list distinct signals among forgetting, boundary, rare, got [] (to switch "
                       "all feedback off, set synthesis.synthesizer = \"none\")"),
    ("signals.use=['rare', 'luck']", "signals.use must list distinct signals"),
    ("signals.use=[1]", "signals.use must be a list of strings, got [1]"),
    ("bootstrap.n=5", "models.explorer.model is required when bootstrap.n > 0"),
    ("bootstrap.n=-1", "bootstrap.n must be >= 0, got -1"),
    ("validation.enabled=1", "validation.enabled must be true or false, got 1"),
    ("signals.forgetting_form=steps", "signals: forgetting_form must be one of group, trajectory, got 'steps'"),
])
def test_bad_ablation_settings_are_refused_naming_the_key(override, message):
    with pytest.raises(ConfigError) as caught:
        load_config(None, ["trainer.model=p", override])
    assert message in str(caught.value)


def test_the_phases_follow_the_ablation_settings(tmp_path):
    from coevolve_engine.loop import RunLoop

    def phases(*overrides: str) -> dict[int, list[str]]:
        loop = RunLoop(tmp_path / "s.duckdb", load_config(None, ["trainer.model=p", *overrides]))
        return {r: loop.phases(r) for r in (0, 1)}

    full = ["weights", "train", "eval", "signals", "patterns", "synthesize", "validate"]
    assert phases() == {0: full, 1: full}
    assert phases("bootstrap.n=4", "models.explorer.model=x") == {0: ["bootstrap", *full], 1: full}
    assert phases("synthesis.synthesizer=none") == {0: ["weights", "train", "eval"], 1: ["weights", "train", "eval"]}
    # every 2nd round, and always the first (with the starting policy) and the last
    assert phases("synthesis.synthesizer=none", "eval.every=2") == {0: ["weights", "train", "eval"],
                                                                   1: ["weights", "train", "eval"]}
    assert phases("synthesis.synthesizer=none", "eval.every=2", "rounds=5") == {
        0: ["weights", "train", "eval"], 1: ["weights", "train", "eval"]}
    loop = RunLoop(tmp_path / "s.duckdb", load_config(None, ["trainer.model=p", "eval.every=2", "rounds=6"]))
    assert [r for r in range(6) if "eval" in loop.phases(r)] == [0, 1, 3, 5]
    loop = RunLoop(tmp_path / "s.duckdb", load_config(None, ["trainer.model=p", "eval.every=3", "rounds=5"]))
    assert [r for r in range(5) if "eval" in loop.phases(r)] == [0, 2, 4]
    assert phases("eval.every=0")[0] == ["weights", "train", "signals", "patterns", "synthesize", "validate"]


def test_signals_use_limits_the_flagged_trajectories_patterns_are_made_of(db):
    from coevolve_engine.patterns import PatternSelection, find_patterns
    from coevolve_engine.patterns.select import select_flagged
    from coevolve_engine.core.signal_params import SignalParams

    params = SignalParams()
    with Store(db) as store:
        step = store.scalar("SELECT max(step) FROM scored_trajectories")
        every = select_flagged(store, step, params, limit=10_000, first_step=0)
        by_signal = {name: {r["trajectory_id"] for r in every.rows if name in r["signals"]}
                     for name in ("forgetting", "boundary", "rare")}
        assert all(by_signal.values()), "the pattern store should flag every signal"
        kept = select_flagged(store, step, params, limit=10_000, first_step=0, signals=["rare", "boundary"])
        assert {r["trajectory_id"] for r in kept.rows} == by_signal["boundary"] | by_signal["rare"]
        assert kept.flagged == len(by_signal["boundary"] | by_signal["rare"]) < every.flagged
        assert all(set(r["signals"]) <= {"boundary", "rare"} and r["signals"] for r in kept.rows)
        report = find_patterns(store, PatternSelection(round=5, step=step, first_step=0, params=params,
                                                       signals=["forgetting"], max_k=2, seed=0))
        assert report.flagged == len(by_signal["forgetting"])
        assert {p.dominant_signal for p in report.patterns} == {"forgetting"}
        assert all(p.signal_counts["boundary"] == p.signal_counts["rare"] == 0 for p in report.patterns)
        stored = json.loads(store.scalar("SELECT any_value(params) FROM failure_patterns WHERE round = 5"))
        assert stored["signals"] == ["forgetting"]


def test_validation_off_accepts_runnable_candidates_only_after_synthesis_and_schema(db_path):
    pytest.importorskip("bfcl_eval")
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.synthesis.candidates import Candidate, write_candidates
    from coevolve_engine.synthesis.validation import ValidationOptions, validate_candidates

    env = load_environment("bfcl")
    task = next(t for t in env.load_tasks(category="multi_turn_base") if "GorillaFileSystem"
                in t["spec"]["involved_classes"])

    def candidate(name: str, ground_truth=None, error=None) -> Candidate:
        spec = dict(task["spec"], turns=[[{"role": "user", "content": f"{name}: errand {i}."}]
                                         for i in range(len(task["spec"]["turns"]))])
        if ground_truth is not None:
            spec["ground_truth"] = ground_truth
        provenance = {"synthesis_error": error} if error else {}
        return Candidate.create(round=0, pattern_id=None, signal=None, env="bfcl", synthesizer="test",
                                prompt=f"{name}: errand 0.", spec=spec, provenance=provenance)

    failing_truth = [["cat(file_name='no_such_file_anywhere.txt')"]] * len(task["spec"]["turns"])
    cands = {"good": candidate("good"), "fails_at_runtime": candidate("fails", failing_truth),
             "unknown_call": candidate("unknown", [["launch_rocket(speed=3)"]] * len(task["spec"]["turns"])),
             "unwritten": candidate("unwritten", error="abstraction: the answer was not JSON")}
    with Store(db_path) as store:
        store.add_records("tasks", [task], label="seed")
        write_candidates(store, list(cands.values()))
    seen = []
    report = validate_candidates(db_path, round=0, env=env, options=ValidationOptions(runnable_only=True),
                                 on_verdict=seen.append)
    verdicts = {v.candidate_id: v for v in report.verdicts}
    assert len(seen) == 4
    reason = {name: verdicts[c.candidate_id].reason for name, c in cands.items()}
    # a ground truth that fails when run is accepted: that is what switching validation off means
    assert reason == {"good": "accepted", "fails_at_runtime": "accepted", "unknown_call": "schema",
                      "unwritten": "synthesis"}
    assert [c.check for c in verdicts[cands["good"].candidate_id].checks] == ["synthesis", "schema"]
    with Store(db_path, read_only=True) as store:
        added = {r for (r,) in store.execute("SELECT task_id FROM tasks WHERE source = 'synthesized'").fetchall()}
        assert added == {cands["good"].task_id, cands["fails_at_runtime"].task_id}
        assert store.scalar("SELECT count(*) FROM candidates WHERE verdict = 'pending'") == 0
        # no eval task in this store: the similarity to the eval set is measured but has nothing to compare with
        assert store.scalar("SELECT count(*) FROM candidates WHERE eval_similarity IS NOT NULL") == 0


# -- the CPU recipe, end to end ---------------------------------------------------------------------------------

WORLD = re.compile(r"bfcl world \d+/(\d+)")


def errand(classes: list[str], config: dict) -> tuple[str, list[str]]:
    """A user request and the calls that do it, in a world with one of these classes."""
    if "TradingBot" in classes:
        symbol = next(s for s in ("ZETA", "SYNX", "NEPT") if s not in config["TradingBot"]["watch_list"])
        return (f"Look up {symbol}, put it on my watchlist and then show me the whole watchlist.",
                [f"get_stock_info(symbol='{symbol}')", f"add_to_watchlist(stock='{symbol}')", "get_watchlist()"])
    if "VehicleControlAPI" in classes:
        return ("Check my tire pressure and the temperature outside, then show 'tires and weather checked' on the "
                "display.", ["check_tire_pressure()", "get_outside_temperature_from_google()",
                             "display_log(messages=['tires and weather checked'])"])
    if "GorillaFileSystem" in classes:
        return ("Make a folder called cpu_recipe_notes, go into it and create an empty todo.txt there.",
                ["mkdir(dir_name='cpu_recipe_notes')", "cd(folder='cpu_recipe_notes')", "touch(file_name='todo.txt')"])
    if "MathAPI" in classes:
        return ("Add 17 and 25, multiply 6 by 7, then give me the square root of 1764 to 2 decimals.",
                ["add(a=17, b=25)", "multiply(a=6, b=7)", "square_root(number=1764, precision=2)"])
    raise AssertionError(f"no errand scripted for {classes}")


class ScriptedExplorer:
    """The explorer and abstraction models of the bootstrap: in each world, one errand's calls, then a draft of
    it as a task."""

    def __init__(self, worlds: list[dict]):
        self.worlds = worlds

    def __call__(self, request: dict):
        from coevolve_engine.adapters.calls import parse_python_calls
        from scripted_server import text, tool_calls

        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n".join(str(m.get("content")) for m in messages if m["role"] == "user")
        world = self.worlds[int(WORLD.search(user).group(1))]
        prompt, calls = errand(world["involved_classes"], world["initial_config"])
        if system.startswith("You explore a tool environment"):
            if any(m["role"] == "assistant" for m in messages):
                return text("Done exploring.")
            return tool_calls(*[(call.name, call.arguments) for c in calls for call in parse_python_calls(c, {})])
        if system.startswith("You write training tasks"):
            return text(json.dumps({"tasks": [{"turns": [prompt], "ground_truth": [calls],
                                               "completion_criterion": "the errand is done"}]}))
        raise AssertionError(f"unexpected request: {system[:80]!r}")


@pytest.fixture
def cpu_run(tmp_path, scripted_server):
    """The CPU recipe prepared as its header says and run with the CLI, the explorer a scripted server."""
    for module in ("torch", "trl", "bfcl_eval", "sentence_transformers"):
        pytest.importorskip(module)
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm is not installed")
    from coevolve_engine.adapters.environments import load_environment

    db, policy = tmp_path / "cpu.duckdb", tmp_path / "policy"
    runner = CliRunner()
    for args in (["init"], ["tasks", "import", "bfcl", "--category", "multi_turn_base", "--split", "eval",
                            "--limit", "20"]):
        result = runner.invoke(cli, [*args, "--db", str(db)])
        assert result.exit_code == 0, result.output
    runpy.run_path(str(RECIPES / "build_tiny_policy.py"))["build"](policy)
    seed = load_config(RECIPES / "cpu_tiny.toml").seed
    scripted_server.respond_with(ScriptedExplorer(load_environment("bfcl").exploration_worlds(6, seed)))
    result = runner.invoke(cli, ["run", "--config", str(RECIPES / "cpu_tiny.toml"), "--db", str(db),
                                 "--set", f"models.explorer.api_base={scripted_server.api_base}",
                                 "--set", f"trainer.model={json.dumps(str(policy))}"])
    assert result.exit_code == 0, result.output
    return db, result.output


def rows(db: Path, sql: str) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.execute(sql).fetchall()


def test_the_cpu_recipe_runs_end_to_end_and_evaluates_every_round(cpu_run):
    db, output = cpu_run
    assert "2 of 2 rounds finished" in output
    phases = rows(db, "SELECT round, phase, status FROM run_phases ORDER BY round, started_at")
    full = ["weights", "train", "eval", "signals", "patterns", "synthesize", "validate"]
    assert [(r, p) for r, p, _ in phases] == [(0, "bootstrap")] + [(0, p) for p in full] + [(1, p) for p in full]
    assert {s for *_, s in phases} == {"finished"}
    # D_0: the bootstrap's accepted tasks are the training set round 0 drew from
    (bootstrap,), = rows(db, "SELECT outputs FROM run_phases WHERE phase = 'bootstrap'")
    assert json.loads(bootstrap)["accepted_total"] == 3 and json.loads(bootstrap)["train_tasks"] == 3
    d0 = {t for (t,) in rows(db, "SELECT task_id FROM tasks WHERE split = 'train'")}
    assert len(d0) == 3
    drawn = {t for (t,) in rows(db, "SELECT DISTINCT task_id FROM trajectories WHERE step BETWEEN 1 AND 2")}
    assert drawn and drawn <= d0
    # an evaluation per round (and the starting policy), each with a result per eval task
    evaluations = rows(db, "SELECT round, label, tasks, (SELECT count(*) FROM eval_results r "
                           "WHERE r.eval_id = e.eval_id) FROM evaluations e ORDER BY round NULLS FIRST")
    assert [(r, label) for r, label, *_ in evaluations] == [(None, "start"), (0, "round 0"), (1, "round 1")]
    assert {(tasks, results) for *_, tasks, results in evaluations} == {(3, 3)}
    eval_ids = {t for (t,) in rows(db, "SELECT DISTINCT task_id FROM eval_results")}
    assert len(eval_ids) == 3 and not eval_ids & d0
    assert rows(db, "SELECT DISTINCT split FROM tasks t JOIN eval_results r USING (task_id)") == [("eval",)]
    # no trainer.output_dir: each round's checkpoint went to a folder named after the store, beside it
    checkpoints = [Path(c) for (c,) in rows(db, "SELECT checkpoint FROM rounds ORDER BY round")]
    folder = (db.parent / "cpu" / "checkpoints").resolve()
    assert len(checkpoints) == 2 and all(c.resolve().is_relative_to(folder) and c.exists() for c in checkpoints)
