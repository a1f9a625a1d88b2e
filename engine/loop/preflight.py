"""Everything a run's configuration names, resolved and checked before a round writes anything.

A typo in a plugin's name or option used to surface only when its phase ran, after the round had trained; the
round was then locked to the bad configuration. ``check_plugins`` builds or resolves every plugin the rounds
will use, exactly as the phases will (same names, same options), and turns any refusal into a ConfigError that
names the dotted key. It writes nothing, so a refused configuration leaves no trace in the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from coevolve_engine.errors import CoevolveError
from coevolve_engine.loop.config import ConfigError

if TYPE_CHECKING:
    from coevolve_engine.loop.config import RunConfig


def synthesizer_options(config: "RunConfig", db: Path, synthesizer: Callable[..., Any]) -> dict[str, Any]:
    """The options the synthesize phase builds ``synthesizer`` (the class ``synthesis.synthesizer`` names) with:
    the configured ones, plus the store's path and the environment's name where it takes them."""
    import inspect

    accepted = inspect.signature(synthesizer).parameters
    options = dict(config.synthesis.options)
    if "store_path" in accepted:
        options.setdefault("store_path", db)
    if "env" in accepted:
        options.setdefault("env", config.env)
    return options


def _checked(key: str, check: Callable[[], Any]) -> Any:
    try:
        return check()
    except ConfigError:
        raise
    except (CoevolveError, TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {exc}") from None


def check_plugins(config: "RunConfig", db: Path, environment: Callable[[], Any]) -> None:
    """Resolve and check every plugin of ``config`` (``environment`` builds the run's environment)."""
    from coevolve_engine.curriculum import load_strategy
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS
    from coevolve_engine.trainers import TRAINERS

    _checked("env", environment)
    trainer = _checked("trainer.name", lambda: TRAINERS.load(config.trainer.name))
    _checked("trainer.options", lambda: trainer.check_options(config.trainer.options,
                                                              f"trainer {config.trainer.name}"))
    if config.warmup.steps > 0:
        warmup = _checked("warmup.trainer", lambda: TRAINERS.load(config.warmup.trainer))
        _checked("warmup.options", lambda: warmup.check_options(config.warmup.options,
                                                                f"warm-up trainer {config.warmup.trainer}"))
    _checked("curriculum.settings" if config.curriculum.settings else "curriculum.strategy",
             lambda: load_strategy(config.curriculum.strategy,
                                   {k: str(v) for k, v in config.curriculum.settings.items()}))
    if config.feedback:
        synthesizer = _checked("synthesis.synthesizer", lambda: SYNTHESIZERS.load(config.synthesis.synthesizer))
        _checked("synthesis.options", lambda: synthesizer(**synthesizer_options(config, db, synthesizer)))
