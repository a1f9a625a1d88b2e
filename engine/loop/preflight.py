"""Everything a run's configuration names, built and checked before a round writes anything.

A typo in a plugin's name or option used to surface only when its phase ran, after the round had trained; the
round was then locked to the bad configuration. ``check_plugins`` builds every plugin the rounds will use
through its registry, exactly as the phases will (``Registry.build``: the same names, options and context),
and turns any refusal into a ConfigError that names the dotted key. It writes nothing, so a refused
configuration leaves no trace in the store.
"""

from __future__ import annotations

import shlex
import shutil
from typing import Any, Callable

from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.curriculum import STRATEGIES
from coevolve_engine.loop.config import ConfigError
from coevolve_engine.loop.models import MODEL_ROLES
from coevolve_engine.loop.context import RunContext
from coevolve_engine.loop.feedback import synthesizer_options
from coevolve_engine.loop.training import episode_options
from coevolve_engine.synthesis.candidates import SYNTHESIZERS, offline_synthesizer
from coevolve_engine.synthesis.llm_synthesizer import check_kinds
from coevolve_engine.trainers import TRAINERS


def _checked(key: str, check: Callable[[], Any]) -> Any:
    try:
        return check()
    except ConfigError:
        raise
    except (CoevolveError, TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {exc}") from None


def check_plugins(run: RunContext) -> None:
    """Build or check every plugin of the run's configuration, and the launcher's executable."""
    config = run.config
    _checked("env", lambda: run.environment)
    if config.synthesis.kinds:  # the kinds the environment writes, before any model is asked for one
        _checked("synthesis.kinds", lambda: check_kinds(config.synthesis.kinds, run.environment.draft_kinds()))
    trainer = _checked("trainer.name", lambda: TRAINERS.load(config.trainer.name))
    # the options exactly as the train phase hands them over: the run's [episode] settings included
    options = _checked("trainer.options", lambda: episode_options(config.trainer.name, config.episode,
                                                                  config.trainer.options))
    _checked("trainer.options", lambda: trainer.check_options(options, f"trainer {config.trainer.name}"))
    if config.trainer.optimization == "run" and not getattr(trainer, "carries_optimization", False):
        raise ConfigError(f"trainer.optimization = \"run\": trainer {config.trainer.name} cannot carry its optimizer "
                          "and schedule from round to round; set trainer.optimization = \"round\" (a fresh "
                          "optimization each round, from the previous round's checkpoint)")
    check_launcher(config.trainer.launcher)
    if config.warmup.steps > 0:
        warmup = _checked("warmup.trainer", lambda: TRAINERS.load(config.warmup.trainer))
        options = _checked("warmup.options", lambda: episode_options(config.warmup.trainer, config.episode,
                                                                     config.warmup.options))
        _checked("warmup.options", lambda: warmup.check_options(options, f"warm-up trainer {config.warmup.trainer}"))
    _checked("curriculum.strategy", lambda: STRATEGIES.load(config.curriculum.strategy))  # a typo, named as one
    _checked("curriculum.settings" if config.curriculum.settings else "curriculum.strategy",
             lambda: STRATEGIES.build(config.curriculum.strategy, config.curriculum.settings, run.plugins()))
    if config.feedback:
        _check_own_synthesizer(config.env, config.synthesis.synthesizer)
        _checked("synthesis.synthesizer", lambda: SYNTHESIZERS.load(config.synthesis.synthesizer))
        _checked("synthesis.options" + (" and synthesis.kinds" if config.synthesis.kinds else ""),
                 lambda: SYNTHESIZERS.build(config.synthesis.synthesizer, synthesizer_options(config),
                                            run.plugins()))
    for role in MODEL_ROLES:  # a key's variable that is not set, named before anything runs
        getattr(config.models, role).api_key(f"models.{role}")


def _check_own_synthesizer(env: str, synthesizer: str) -> None:
    """The environment's own synthesizer (the default) is registered, or the error says what to set instead."""
    if synthesizer == offline_synthesizer(env) and synthesizer not in SYNTHESIZERS.entries:
        raise ConfigError(f"synthesis.synthesizer: environment {env!r} registers no offline synthesizer ({synthesizer} "
                          "in the entry-point group coevolve_engine.synthesizers; see docs/environments.md); set "
                          "synthesis.synthesizer = \"llm\" (with [models]) to write tasks with a model, or \"none\" "
                          "to train without feedback. Installed: " + ", ".join(SYNTHESIZERS.names()))


def check_launcher(launcher: str) -> None:
    """``trainer.launcher`` (when set) splits into words as a shell would, and its first word is an executable."""
    if not launcher:
        return
    try:
        words = shlex.split(launcher)
    except ValueError as exc:
        raise ConfigError(f"trainer.launcher: {launcher!r} cannot be split into words ({exc})") from None
    if not words:
        raise ConfigError("trainer.launcher is blank; leave it empty (\"\") to train in the run's process")
    if shutil.which(words[0]) is None:
        raise ConfigError(f"trainer.launcher: {words[0]!r} is not an executable file nor a command on PATH "
                          f"(from {launcher!r})")
