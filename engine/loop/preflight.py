"""Everything a run's configuration names, built and checked before a round writes anything.

A typo in a plugin's name or option used to surface only when its phase ran, after the round had trained; the
round was then locked to the bad configuration. ``check_plugins`` builds every plugin the rounds will use
through its registry, exactly as the phases will (``Registry.build``: the same names, options and context),
and turns any refusal into a ConfigError that names the dotted key. It writes nothing, so a refused
configuration leaves no trace in the store.
"""

from __future__ import annotations

from typing import Any, Callable

from coevolve_engine.errors import CoevolveError
from coevolve_engine.loop.config import ConfigError
from coevolve_engine.loop.context import RunContext


def _checked(key: str, check: Callable[[], Any]) -> Any:
    try:
        return check()
    except ConfigError:
        raise
    except (CoevolveError, TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {exc}") from None


def check_plugins(run: RunContext) -> None:
    """Build or check every plugin of the run's configuration."""
    from coevolve_engine.curriculum import STRATEGIES
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS
    from coevolve_engine.trainers import TRAINERS

    config = run.config
    _checked("env", lambda: run.environment)
    trainer = _checked("trainer.name", lambda: TRAINERS.load(config.trainer.name))
    _checked("trainer.options", lambda: trainer.check_options(config.trainer.options,
                                                              f"trainer {config.trainer.name}"))
    if config.warmup.steps > 0:
        warmup = _checked("warmup.trainer", lambda: TRAINERS.load(config.warmup.trainer))
        _checked("warmup.options", lambda: warmup.check_options(config.warmup.options,
                                                                f"warm-up trainer {config.warmup.trainer}"))
    _checked("curriculum.settings" if config.curriculum.settings else "curriculum.strategy",
             lambda: STRATEGIES.build(config.curriculum.strategy, config.curriculum.settings, run.plugins()))
    if config.feedback:
        _checked("synthesis.synthesizer", lambda: SYNTHESIZERS.load(config.synthesis.synthesizer))
        _checked("synthesis.options", lambda: SYNTHESIZERS.build(config.synthesis.synthesizer,
                                                                 config.synthesis.options, run.plugins()))
