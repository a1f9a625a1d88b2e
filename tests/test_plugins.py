"""One way to build a plugin: ``Registry.build(name, options, context)`` for every kind, agents by model string
through ``load_agent``, the run's agents from its ``[agent]`` and ``[episode]`` sections, and one coercion path
for every value a user gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevolve_engine.core.settings import coerce
from coevolve_engine.core.registry import PluginContext, Registry


class Plain:
    def __init__(self, **options):
        self.options = options


class WithContext:
    def __init__(self, store_path, level=1):
        self.store_path, self.level = store_path, level

    @classmethod
    def from_options(cls, options, context):
        return cls(**{"store_path": context.store_path, **options})


@pytest.fixture
def registry():
    made = Registry("widget")
    made.register("plain", f"{__name__}:Plain")
    made.register("context", f"{__name__}:WithContext")
    return made


def test_build_hands_the_options_to_a_plain_class_and_the_context_to_from_options(registry):
    assert registry.build("plain", {"a": 1}).options == {"a": 1}
    built = registry.build("context", {"level": 3}, PluginContext(store_path=Path("s.duckdb")))
    assert (built.store_path, built.level) == (Path("s.duckdb"), 3)
    assert registry.build("context", {"store_path": "mine"}).store_path == "mine"  # the options win


def test_every_builtin_kind_builds_through_its_registry():
    from coevolve_engine.adapters.environments import ENVIRONMENTS
    from coevolve_engine.curriculum import STRATEGIES
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS

    assert type(ENVIRONMENTS.build("calc")).__name__ == "CalcEnvironment"
    assert STRATEGIES.build("coevolve", {"boundary": 3}).config.boundary == 3.0  # typed, an int made a float
    assert STRATEGIES.build("coevolve", {"boundary": "3"}).config.boundary == 3.0  # NAME=VALUE text, read
    assert SYNTHESIZERS.build("offline:calc", {"attempts": 2}).needs_patterns
    unguided = SYNTHESIZERS.build("llm-unguided", {"model": "openai/m"},
                                  PluginContext(store_path=Path("s.duckdb"), env="calc"))
    assert unguided.env == "calc"


def test_load_agent_picks_the_agent_by_model_string(tmp_path):
    from coevolve_engine.adapters.agents import agent_kind, load_agent
    from coevolve_engine.core.endpoint import CallSettings, Endpoint

    assert agent_kind("reference") == "reference"
    assert agent_kind(str(tmp_path)) == "local"
    assert agent_kind("openai/gpt-4o-mini") == "litellm"
    reference = load_agent("reference", {"max_steps": 7, "policy": "ref"})
    assert (type(reference).__name__, reference.limits.max_steps, reference.policy) == ("ReferenceAgent", 7, "ref")
    hosted = load_agent("openai/m", {"api_base": "http://127.0.0.1:9/v1", "temperature": 0.3, "max_tokens": 64,
                                     "timeout": 5.0, "retries": 1, "max_model_calls_per_turn": 4})
    assert (hosted.endpoint, hosted.temperature, hosted.max_tokens, hosted.calls) == \
        (Endpoint("openai/m", "http://127.0.0.1:9/v1"), 0.3, 64, CallSettings(timeout=5.0, retries=1))
    assert hosted.limits.max_model_calls_per_turn == 4
    served = Endpoint("openai/m", "http://127.0.0.1:9/v1", "sk-1")
    assert load_agent(served, {"temperature": 0.3}).endpoint == served  # the endpoint, key and all
    assert "sk-1" not in repr(load_agent(served))


def test_load_agent_refuses_an_unknown_option_naming_the_model():
    from coevolve_engine.adapters.agents import load_agent
    from coevolve_engine.core.errors import CoevolveError

    with pytest.raises(CoevolveError, match="cannot use model 'openai/m'.*top_k"):
        load_agent("openai/m", {"top_k": 3})


def test_the_runs_validation_agent_samples_as_its_agent_section_says(tmp_path):
    from coevolve_engine.loop.config_files import load_config
    from coevolve_engine.loop.context import RunContext
    from coevolve_engine.loop.feedback import validation_agent

    config = load_config(None, ["trainer.model=p", "env=calc", "models.agent.model=openai/m",
                                "models.agent.api_base=http://127.0.0.1:9/v1", "agent.temperature=0.2",
                                "agent.max_tokens=99", "agent.retries=0", "episode.max_steps=12"])
    agent = validation_agent(RunContext(tmp_path / "s.duckdb", config, 1.0))
    assert (agent.temperature, agent.max_tokens, agent.calls.retries, agent.limits.max_steps) == (0.2, 99, 0, 12)
    assert agent.endpoint.where() == "openai/m at http://127.0.0.1:9/v1"
    assert validation_agent(RunContext(tmp_path / "s.duckdb", load_config(None, ["trainer.model=p"]), 1.0)) is None


def test_the_agent_section_is_printed_and_checked():
    from coevolve_engine.loop.config import ConfigError
    from coevolve_engine.loop.config_files import load_config
    from coevolve_engine.loop.template import render_template

    text = render_template(load_config(None, check=False))
    assert "[agent]" in text and "temperature = 0.9" in text and "retries = 2" in text
    with pytest.raises(ConfigError, match="agent.max_tokens must be at least 1"):
        load_config(None, ["trainer.model=p", "agent.max_tokens=0"])
    with pytest.raises(ConfigError, match="agent.temperature must be a number"):
        load_config(None, ["trainer.model=p", "agent.temperature=hot"])


@pytest.mark.parametrize("value, hint, expected", [
    (1, float, 1.0), (True, bool, True), ("x", str, "x"), (None, float | None, None), ([1], list, [1]),
])
def test_coerce_keeps_or_widens_what_fits(value, hint, expected):
    assert coerce(value, hint) == expected and type(coerce(value, hint)) is type(expected)


@pytest.mark.parametrize("value, hint, kind", [
    ("1", float, "a number"), (1.5, int, "an integer"), (1, bool, "true or false"), (True, int, "an integer"),
    ("yes", int | None, "an integer or none"), ({}, list, "a list"),
])
def test_coerce_refuses_what_does_not_fit_naming_the_kind(value, hint, kind):
    with pytest.raises(ValueError, match=f"^{kind}$"):
        coerce(value, hint)


@pytest.mark.parametrize("text, hint, expected", [("3", int, 3), ("1e-3", float, 0.001), ("yes", bool, True),
                                                  ("0", bool, False), ("abc", str, "abc")])
def test_command_line_text_is_read_as_the_type_wanted(text, hint, expected):
    assert coerce(text, hint, from_text=True) == expected
