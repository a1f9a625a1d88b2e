"""The run's configuration: a TOML file with help for every field, overrides, and clear refusals."""

from __future__ import annotations

import tomllib

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.config_files import differences, load_config
from coevolve_engine.loop.template import render_template


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
    assert str(caught.value).startswith(f"{path}: bootstrap.explorer_model is required when bootstrap.n > 0")


def test_a_round_stored_before_a_setting_existed_compares_as_its_default():
    """A run resumed after an upgrade: its stored config lacks the newer settings, which then read as defaults."""
    from coevolve_engine.loop.config_files import config_from_dict

    current = load_config(None, ["trainer.model=p"]).to_dict()
    stored = {**current, "signals": {k: v for k, v in current["signals"].items() if k != "use"},
              "validation": {k: v for k, v in current["validation"].items() if k != "enabled"}}
    del stored["bootstrap"]
    assert list(differences(config_from_dict(stored).to_dict(), current)) == []


def test_renamed_keys_are_read_under_their_new_names(tmp_path):
    import warnings

    from coevolve_engine.errors import CoevolveError
    from coevolve_engine.loop.config_files import config_from_dict
    from coevolve_engine.trainers.base import options_config
    from coevolve_engine.trainers.trl_grpo.trainer import TRLGRPOConfig

    old = tmp_path / "old.toml"
    old.write_text('[trainer]\nmodel = "m"\n[trainer.options]\nnum_generations = 4\n[validation]\nk = 2\n')
    with pytest.warns(FutureWarning) as said:
        config = load_config(old)
    shown = {str(w.message) for w in said}
    assert f"deprecated: {old}: validation.k is now validation.attempts; the old key goes in the next release" in shown
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
    with pytest.raises(ConfigError, match="validation.k is the old name of validation.attempts: give one of them"):
        load_config(both)
    # built from Python, the old option is refused by name
    with pytest.raises(CoevolveError, match="option num_generations is now group_size"):
        options_config(TRLGRPOConfig, {"num_generations": 4}, {"model": "m", "output_dir": "o"}, "trainer trl-grpo")
