"""The run's configuration: a TOML file with help for every field, overrides, and clear refusals."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.config_files import differences, load_config
from coevolve_engine.loop.template import render_template

RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def write(tmp_path, text: str):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_file_values_and_overrides_reach_the_config(tmp_path):
    path = write(tmp_path, """
rounds = 3
[trainer]
model = "policy"
steps_per_round = 4
[trainer.options]
group_size = 2
[curriculum]
strategy = "plr"
""")
    config = load_config(path, ["trainer.options.learning_rate=1e-3", "signals.w=5", "trainer.model=/models/x",
                                "synthesis.synthesizer=offline:bfcl"])
    assert config.rounds == 3 and config.trainer.steps_per_round == 4
    assert config.trainer.options == {"group_size": 2, "learning_rate": 1e-3}
    assert config.trainer.model == "/models/x"  # a bare word is taken as text
    assert config.signals.w == 5 and config.curriculum.strategy == "plr"
    assert config.synthesis.synthesizer == "offline:bfcl"
    assert config.signals.theta == 5.0 and isinstance(config.signals.theta, float)


@pytest.mark.parametrize(("text", "override", "message"), [
    ("[trainer]\nmodel = 'p'\nstep_per_round = 4\n", None, "unknown setting trainer.step_per_round (did you mean "
                                                           "trainer.steps_per_round?)"),
    ("[trainer]\nmodel = 'p'\nsteps_per_round = 'four'\n", None,
     "trainer.steps_per_round must be an integer, got 'four'"),
    ("[trainer]\nmodel = 'p'\n[signals]\nthreshold = true\n", None, "signals.threshold must be a number, got True"),
    ("[trainer]\nmodel = 'p'\noptions = 3\n", None, "trainer.options must be a table, got 3"),
    ("[trainer]\nmodel = 'p'\nsteps_per_round = 0\n", None, "trainer.steps_per_round must be at least 1, got 0"),
    ("rounds = 2\n", None, "trainer.model is required"),
    ("[trainer]\nmodel = 'p'\n", "validation.novelty_threshold=0", "validation.novelty_threshold must be in (0, 1]"),
    ("[trainer]\nmodel = 'p'\n", "validation.contamination_threshold=1.5",
     "validation.contamination_threshold must be in (0, 1]"),
    ("[trainer]\nmodel = 'p'\n", "signals", "--set 'signals' is not KEY=VALUE"),
    ("[trainer]\nmodel = 'p'\n", "signals.w=0", "signals: the forgetting window w must be at least 1"),
    ("[trainer\n", None, "not valid TOML"),
])
def test_bad_configuration_is_refused_naming_the_key(tmp_path, text, override, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, [override] if override else [])
    assert message in str(caught.value)
    if override is None and "required" not in message and "at least" not in message:
        assert str(path) in str(caught.value)


def test_a_missing_file_says_how_to_make_one(tmp_path):
    with pytest.raises(ConfigError, match="--print-config"):
        load_config(tmp_path / "nope.toml")


def test_the_template_is_valid_toml_with_help_for_every_field_and_loads_to_the_defaults():
    text = render_template(RunConfig())
    data = tomllib.loads(text)
    assert data["trainer"]["steps_per_round"] == 10 and data["curriculum"]["strategy"] == "coevolve"
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if "=" in line and not line.startswith("#"):
            assert lines[index - 1].startswith("#"), f"no help above {line!r}"
    assert load_config(None, ["trainer.model=p"]) == RunConfig(trainer=RunConfig().trainer.__class__(model="p"))


def test_print_config_lists_the_trainer_and_strategy_settings_and_applies_overrides():
    result = CliRunner().invoke(cli, ["run", "--print-config", "--set", "trainer.steps_per_round=3", "--rounds", "5"])
    assert result.exit_code == 0, result.output
    data = tomllib.loads(result.output)
    assert data["rounds"] == 5 and data["trainer"]["steps_per_round"] == 3
    assert "# group_size = 8" in result.output  # trl-grpo's own settings, commented, with their help
    assert "trl-grpo: K: rollouts per group" in result.output
    assert "# staleness_horizon = 10" in result.output  # the coevolve strategy's settings


def test_run_without_a_model_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(cli, ["run", "--db", str(tmp_path / "s.duckdb")])
    assert result.exit_code != 0
    assert "trainer.model is required" in result.output and "Traceback" not in result.output


def test_differences_name_the_changed_dotted_keys():
    a = RunConfig(trainer=RunConfig().trainer.__class__(model="p")).to_dict()
    b = load_config(None, ["trainer.model=p", "trainer.options.beta=0.0", "seed=3"]).to_dict()
    assert list(differences(a, b)) == ["seed", "trainer.options.beta"]


def test_list_settings_come_from_the_file_and_from_set_and_print_back(tmp_path):
    path = write(tmp_path, "[trainer]\nmodel = 'p'\n[signals]\nuse = ['rare', 'forgetting']\n")
    assert load_config(path).signals.use == ["rare", "forgetting"]
    assert load_config(path).signals_used == ("forgetting", "rare")  # canonical order
    assert load_config(path, ["signals.use=['boundary']"]).signals.use == ["boundary"]
    assert load_config(None, ["trainer.model=p"]).signals_used is None  # all three: no filter
    text = render_template(load_config(path))
    assert tomllib.loads(text)["signals"]["use"] == ["rare", "forgetting"]
    assert 'use = ["rare", "forgetting"]' in text and "[bootstrap]" in text and "enabled = true" in text


def test_a_value_no_run_could_use_is_refused_naming_the_file(tmp_path):
    path = write(tmp_path, "[trainer]\nmodel = 'p'\n[bootstrap]\nn = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: models.explorer.model is required when bootstrap.n > 0")


def test_a_round_stored_before_a_setting_existed_compares_as_its_default():
    """A run resumed after an upgrade: its stored config lacks the newer settings, which then read as defaults."""
    from coevolve_engine.loop.config_files import config_from_dict

    current = load_config(None, ["trainer.model=p"]).to_dict()
    stored = {**current, "signals": {k: v for k, v in current["signals"].items() if k != "use"},
              "validation": {k: v for k, v in current["validation"].items() if k != "enabled"}}
    del stored["bootstrap"]
    assert list(differences(config_from_dict(stored).to_dict(), current)) == []


# -- [models]: one place for every model the run calls --------------------------------------------------------

OLD_MODEL_KEYS = """
[trainer]
model = "p"
[bootstrap]
n = 4
explorer_model = "hosted_vllm/explorer"
model = ""
api_base = "http://127.0.0.1:8000/v1"
options = {explorer_api_base = "http://127.0.0.1:8001/v1", max_worlds = 8}
[synthesis]
synthesizer = "llm"
summary_model = "openai/summary"
options = {model = "openai/writer", explorer_model = "hosted_vllm/explorer", api_base = "http://127.0.0.1:8000/v1", explorer_api_base = "http://127.0.0.1:8001/v1", tasks_per_pattern = 3}
[validation]
judge_model = "openai/judge"
api_base = "http://127.0.0.1:9000/v1"
"""
NEW_MODEL_KEYS = """
[trainer]
model = "p"
[models]
explorer = {model = "hosted_vllm/explorer", api_base = "http://127.0.0.1:8001/v1"}
abstraction = {model = "openai/writer", api_base = "http://127.0.0.1:8000/v1"}
summary = {model = "openai/summary", api_base = "http://127.0.0.1:8000/v1"}
judge = {model = "openai/judge", api_base = "http://127.0.0.1:9000/v1"}
agent = {api_base = "http://127.0.0.1:9000/v1"}
[bootstrap]
n = 4
options = {max_worlds = 8}
[synthesis]
synthesizer = "llm"
options = {tasks_per_pattern = 3}
"""


def test_the_old_model_keys_still_work_each_with_a_warning_naming_its_new_key(tmp_path):
    from coevolve_engine.loop.renamed_keys import DeprecatedSetting

    old = write(tmp_path, OLD_MODEL_KEYS)
    with pytest.warns(DeprecatedSetting) as caught:
        config = load_config(old)
    said = [str(w.message) for w in caught]
    assert f"{old}: bootstrap.explorer_model is now models.explorer.model" in said[0]
    assert any("synthesis.options.explorer_api_base is now models.explorer.api_base" in m for m in said)
    assert any("validation.judge_model is now models.judge.model" in m for m in said)
    assert len(said) == 11  # one for each old key in the file
    new = (tmp_path / "new.toml")
    new.write_text(NEW_MODEL_KEYS)
    assert not list(differences(config.to_dict(), load_config(new).to_dict()))
    assert config.models.exploration() == {
        "model": Endpoint("openai/writer", "http://127.0.0.1:8000/v1"),
        "explorer": Endpoint("hosted_vllm/explorer", "http://127.0.0.1:8001/v1")}


def test_an_old_model_key_given_with_set_is_read_with_a_warning(tmp_path):
    from coevolve_engine.loop.renamed_keys import DeprecatedSetting

    with pytest.warns(DeprecatedSetting, match=r"--set validation.judge_model=openai/j: validation.judge_model is "
                                               r"now models.judge.model \(every model the run calls is in "
                                               r"\[models\]\); the old key goes in the next release"):
        config = load_config(None, ["trainer.model=p", "validation.judge_model=openai/j"])
    assert config.models.judge.model == "openai/j"


def test_run_says_each_moved_key_on_standard_error_as_a_renamed_option_does(tmp_path):
    old = write(tmp_path, OLD_MODEL_KEYS)
    result = CliRunner().invoke(cli, ["run", "--config", str(old), "--print-config"])
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if line.startswith("deprecated: ")]
    assert len(said) == 11 and said[0] == (f"deprecated: {old}: bootstrap.explorer_model is now models.explorer.model "
                                           "(every model the run calls is in [models]); the old key goes in the next "
                                           "release")
    printed = tomllib.loads(result.stdout)
    assert printed["models"]["explorer"]["model"] == "hosted_vllm/explorer" and "explorer_model" not in printed["bootstrap"]


def test_two_old_keys_that_name_two_explorers_are_refused_a_run_has_one(tmp_path):
    path = write(tmp_path, "[trainer]\nmodel = 'p'\n[bootstrap]\nexplorer_model = 'openai/a'\n[synthesis]\n"
                           "synthesizer = 'llm'\noptions = {explorer_model = 'openai/b'}\n")
    with pytest.raises(ConfigError, match=r"bootstrap.explorer_model = 'openai/a' and synthesis.options."
                                          r"explorer_model = 'openai/b' differ, but a run has one explorer model: "
                                          r"set models.explorer.model"), pytest.warns(FutureWarning):
        load_config(path)


def test_a_key_in_the_configuration_is_refused_and_its_variable_is_read_when_named(tmp_path, monkeypatch):
    path = write(tmp_path, "[trainer]\nmodel = 'p'\n[bootstrap]\noptions = {api_key = 'sk-1'}\n")
    with pytest.raises(ConfigError, match=r"bootstrap.options.api_key: a key is not written in the configuration"):
        load_config(path)
    config = load_config(None, ["trainer.model=p", "models.judge.model=openai/j",
                                "models.judge.api_key_env=COEVOLVE_TEST_JUDGE_KEY"])
    monkeypatch.delenv("COEVOLVE_TEST_JUDGE_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"models.judge.api_key_env: the environment variable "
                                          r"COEVOLVE_TEST_JUDGE_KEY is not set"):
        config.models.connect("judge")
    monkeypatch.setenv("COEVOLVE_TEST_JUDGE_KEY", "sk-2")
    assert config.models.connect("judge") == Endpoint("openai/j", None, "sk-2")
    assert "sk-2" not in repr(config.models.connect("judge"))  # an endpoint never prints its key
    assert "sk-2" not in str(config.to_dict())  # the stored config names the variable, never the key


def test_an_empty_explorer_or_abstraction_model_is_the_other_one():
    config = load_config(None, ["trainer.model=p", "models.abstraction.model=openai/w",
                                "models.abstraction.api_base=http://h/v1"])
    assert config.models.exploration()["explorer"] == Endpoint("openai/w", "http://h/v1")
    config = load_config(None, ["trainer.model=p", "models.explorer.model=openai/e"])
    assert config.models.exploration()["model"] == Endpoint("openai/e")
    assert config.models.connect("summary") is None  # no summaries: the roles without a fallback stay empty


def test_a_plugin_synthesizers_own_model_option_is_its_own():
    config = load_config(None, ["trainer.model=p", "synthesis.synthesizer=offline:bfcl",
                                "synthesis.options={model = 'x'}"])
    assert config.synthesis.options == {"model": "x"} and config.models.abstraction.model == ""


def test_a_round_stored_with_the_old_model_keys_is_read_quietly_as_the_same_config(tmp_path):
    """A run started before [models] and resumed after: its stored config reads as the current one."""
    import json
    import warnings

    from coevolve_engine.loop.config_files import config_from_dict

    with pytest.warns(FutureWarning):
        config = load_config(write(tmp_path, OLD_MODEL_KEYS))
    stored = json.loads(json.dumps(config.to_dict()))
    stored.pop("models")
    stored["bootstrap"].update(explorer_model="hosted_vllm/explorer", model="",
                               api_base="http://127.0.0.1:8000/v1")
    stored["bootstrap"]["options"]["explorer_api_base"] = "http://127.0.0.1:8001/v1"
    stored["synthesis"]["summary_model"] = "openai/summary"
    stored["synthesis"]["options"].update(model="openai/writer", explorer_model="hosted_vllm/explorer",
                                          api_base="http://127.0.0.1:8000/v1",
                                          explorer_api_base="http://127.0.0.1:8001/v1")
    stored["validation"].update(agent_model="", judge_model="openai/judge", api_base="http://127.0.0.1:9000/v1")
    before = json.dumps(stored, sort_keys=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = config_from_dict(stored)
    assert json.dumps(stored, sort_keys=True) == before  # the caller's table is left as it was
    assert not list(differences(read.to_dict(), config.to_dict()))


def test_checkpoints_default_to_a_folder_named_after_the_store_beside_it(tmp_path):
    from coevolve_engine.loop.config import checkpoint_folder

    assert checkpoint_folder("", tmp_path / "runs" / "f_5.duckdb") == tmp_path / "runs" / "f_5" / "checkpoints"
    assert checkpoint_folder("elsewhere", tmp_path / "runs" / "f_5.duckdb") == Path("elsewhere")
    assert RunConfig().trainer.output_dir == ""


def test_the_exploring_synthesizer_is_built_with_the_models_explorer_and_abstraction_model(tmp_path):
    """What the synthesize phase and the check before a run build: explorer_swap's explorer on its own server,
    the abstraction model still the paper run's."""
    from coevolve_engine.loop.context import RunContext
    from coevolve_engine.loop.feedback import synthesizer_options
    from coevolve_engine.loop.preflight import check_plugins
    from coevolve_engine.core.registry import PluginContext
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS

    config = load_config(RECIPES / "explorer_swap.toml")
    synthesizer = SYNTHESIZERS.build("llm", synthesizer_options(config), PluginContext(store_path=tmp_path / "s"))
    assert synthesizer.explorer.endpoint.where() == "hosted_vllm/Qwen/Qwen3-32B at http://127.0.0.1:8001/v1"
    assert synthesizer.client.endpoint.where() == (
        "openai/qwen3-max at https://dashscope-intl.aliyuncs.com/compatible-mode/v1")
    assert synthesizer.max_explore_steps == 30  # synthesis.options still reach it
    bare = load_config(None, ["trainer.model=p", "synthesis.synthesizer=llm", "trainer.optimization=round"])
    with pytest.raises(ConfigError, match=r"synthesis.synthesizer = llm explores with \[models\]' explorer .* set "
                                          r"models.explorer.model"):
        check_plugins(RunContext(tmp_path / "s.duckdb", bare, 1.0))


def test_renamed_keys_are_read_under_their_new_names(tmp_path):
    import warnings

    from coevolve_engine.core.errors import CoevolveError
    from coevolve_engine.core.renamed import DeprecatedSetting
    from coevolve_engine.loop.config_files import config_from_dict
    from coevolve_engine.trainers.base import options_config
    from coevolve_engine.trainers.trl_grpo.trainer import TRLGRPOConfig

    old = tmp_path / "old.toml"
    old.write_text('[trainer]\nmodel = "m"\n[trainer.options]\nnum_generations = 4\n[validation]\nk = 2\n')
    with pytest.warns(FutureWarning) as said:
        config = load_config(old)
    shown = {str(w.message) for w in said}
    assert f"{old}: validation.k is now validation.attempts; the old key goes in the next release" in shown
    assert any("trainer.options.num_generations is now trainer.options.group_size" in text for text in shown)
    assert config.validation.attempts == 2 and config.trainer.options == {"group_size": 4}
    # a round an older version stored (its config under the old keys) compares as the same configuration
    stored = config.to_dict()
    stored["validation"]["k"] = stored["validation"].pop("attempts")
    stored["trainer"]["options"] = {"num_generations": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config_from_dict(stored) == config
    both = tmp_path / "both.toml"
    both.write_text('[trainer]\nmodel = "m"\n[validation]\nk = 2\nattempts = 3\n')
    with pytest.raises(ConfigError, match="validation.k is the old key of validation.attempts: give one of them"):
        load_config(both)
    # built from Python, the old option is read the same way: under its new name, with the same words
    fixed = {"model": "m", "output_dir": "o"}
    with pytest.warns(DeprecatedSetting, match="^trainer trl-grpo: num_generations is now group_size; the old option "
                                               "goes in the next release$"):
        assert options_config(TRLGRPOConfig, {"num_generations": 4}, fixed, "trainer trl-grpo").group_size == 4
    with pytest.raises(CoevolveError, match="num_generations is the old option of group_size: give one of them"):
        options_config(TRLGRPOConfig, {"num_generations": 4, "group_size": 4}, fixed, "trainer trl-grpo")


def test_the_synthesizer_defaults_to_the_environments_own(tmp_path):
    assert load_config(None, ["trainer.model=p"]).synthesis.synthesizer == "offline:bfcl"  # env's default: bfcl
    assert load_config(None, ["trainer.model=p", "env=calc"]).synthesis.synthesizer == "offline:calc"
    stated = write(tmp_path, "env = 'calc'\n[synthesis]\nsynthesizer = 'llm'\n")
    assert load_config(stated, check=False).synthesis.synthesizer == "llm"  # a stated one is kept
    path = write(tmp_path, "env = 'counter'\n[trainer]\nmodel = 'p'\n")
    result = CliRunner().invoke(cli, ["run", "--config", str(path), "--print-config"])
    assert result.exit_code == 0, result.output
    assert tomllib.loads(result.output)["synthesis"]["synthesizer"] == "offline:counter"
    assert "offline:bfcl" not in result.output.split("[synthesis]")[1].split("[validation]")[0]


def test_an_environment_without_its_own_synthesizer_is_told_what_to_set(tmp_path, monkeypatch):
    from coevolve_engine.adapters.environments import ENVIRONMENTS

    monkeypatch.setattr(ENVIRONMENTS, "_entries", dict(ENVIRONMENTS.entries))  # forgotten after the test
    ENVIRONMENTS.register("plain", "coevolve_engine.adapters.environments.calc:CalcEnvironment")
    path = write(tmp_path, "env = 'plain'\n[trainer]\nmodel = 'p'\n")
    result = CliRunner().invoke(cli, ["run", "--config", str(path), "--db", str(tmp_path / "s.duckdb")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "environment 'plain' registers no offline synthesizer (offline:plain" in result.output, result.output
    assert 'synthesis.synthesizer = "llm"' in result.output and "coevolve-engine[bfcl]" not in result.output
