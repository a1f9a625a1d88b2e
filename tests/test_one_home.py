"""Each default lives in one place: every command option, run setting and trainer option that carries one of the
signal constants or an episode limit has the default of its home (``SignalParams``, ``EpisodeLimits`` and the
constants beside it), so that changing the home changes them all.
"""

from __future__ import annotations

import dataclasses

import click
import pytest

from coevolve_engine.adapters.agents.base import MAX_EXPLORE_STEPS, MAX_NEW_TOKENS, AgentOptions, EpisodeLimits
from coevolve_engine.cli import cli
from coevolve_engine.core.signal_params import SIGNAL_DEFAULTS, SignalParams, signal_help
from coevolve_engine.drift import DriftParams
from coevolve_engine.loop.config import EpisodeConfig, SignalsConfig
from coevolve_engine.trainers.trl_grpo.trainer import TRLGRPOConfig


def commands(command: click.Command, path: tuple[str, ...] = ()):
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def option_defaults(name: str) -> dict[str, object]:
    """Command -> the default of its option whose parameter is ``name``."""
    return {path: p.default for path, command in commands(cli) for p in command.params
            if isinstance(p, click.Option) and p.name == name and not p.hidden}


def test_signal_constants_have_one_home():
    limits = {f.name: getattr(SIGNAL_DEFAULTS, f.name) for f in dataclasses.fields(SignalParams)}
    for name, default in limits.items():
        assert getattr(SignalsConfig(), name) == default, f"[signals] {name}"
        assert getattr(DriftParams(), name) == default, f"DriftParams.{name}"
        found = option_defaults(name)
        assert {"signals", "drift", "weights", "patterns"} <= set(found), name  # the scan sees the commands
        wrong = {path: value for path, value in found.items() if value != default}
        assert not wrong, f"--{name}: these commands restate another default: {wrong}"
        helps = {p.help for _, command in commands(cli) for p in command.params if p.name == name and not p.hidden}
        assert helps == {signal_help(name)}, f"--{name} is explained differently: {helps}"
    assert SignalParams.of(SignalsConfig(w=7)) == SignalParams(w=7)


def test_episode_limits_have_one_home():
    home = EpisodeLimits()
    for name in ("max_steps", "max_model_calls_per_turn"):
        default = getattr(home, name)
        assert getattr(EpisodeConfig(), name) == default, f"[episode] {name}"
        assert getattr(AgentOptions(model="m"), name) == default, f"AgentOptions.{name}"
        assert getattr(TRLGRPOConfig(model="m", output_dir="o"), name) == default, f"trl-grpo's {name}"
        found = option_defaults(name)
        assert "rollout" in found, name
        assert set(found.values()) == {default}, f"--{name.replace('_', '-')}: {found}"
    assert EpisodeConfig().max_new_tokens == TRLGRPOConfig(model="m", output_dir="o").max_new_tokens == MAX_NEW_TOKENS
    explore = option_defaults("max_explore_steps")
    assert {"bootstrap", "synthesize"} <= set(explore) and set(explore.values()) == {MAX_EXPLORE_STEPS}


def test_validation_defaults_have_one_home():
    from coevolve_engine.loop.config import ValidationConfig
    from coevolve_engine.synthesis.contamination import DEFAULT_THRESHOLD
    from coevolve_engine.synthesis.validation import ATTEMPTS, NOVELTY_THRESHOLD

    for name, home in (("novelty_threshold", NOVELTY_THRESHOLD), ("contamination_threshold", DEFAULT_THRESHOLD),
                       ("attempts", ATTEMPTS)):
        assert getattr(ValidationConfig(), name) == home, f"validation.{name}"
        found = option_defaults(name)
        assert "validate" in found and set(found.values()) == {home}, f"--{name.replace('_', '-')}: {found}"


@pytest.mark.parametrize("bad, said", [
    ({"a": -1.0, "b": 1.0}, "task 'a' has weight -1.0; a weight is a finite number >= 0"),
    ({"a": float("inf")}, "task 'a' has weight inf; a weight is a finite number >= 0"),
    ({"a": "1"}, "task 'a' has weight '1'; a weight is a finite number >= 0"),
    ({"a": 0.0}, "no task has a weight above 0, so there is nothing to draw"),
])
def test_one_weight_check(bad, said):
    # the sampler `sample` and trl-grpo draw with, the trainers' batch source and export: one check, one wording
    from coevolve_engine.core.sampler import WeightedGroupSampler
    from coevolve_engine.trainers import BatchSource
    from coevolve_engine.trainers.export.weights import weights_mapping

    for build in (WeightedGroupSampler, BatchSource, weights_mapping):
        with pytest.raises(Exception) as raised:
            build(bad)
        assert said in str(raised.value), f"{build.__name__}: {raised.value}"
