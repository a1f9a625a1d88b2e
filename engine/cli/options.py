"""Options shared by every command that opens the store."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import click

from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.core.errors import StoreError
from coevolve_engine.core.lease import hold_lease
from coevolve_engine.core.renamed import given_twice, moved
from coevolve_engine.core.signal_params import FORGETTING_FORMS, SIGNAL_DEFAULTS, signal_help
from coevolve_engine.loop.config import MAX_ROUNDS
from coevolve_engine.core.records import MAX_ROUND, MAX_STEP
from coevolve_engine.core.store import DEFAULT_DB, DEFAULT_WAIT_SECONDS, missing_store

#: where the store a command was given is kept for the command line's error messages (click's ``Context.meta``)
DB_META_KEY = "coevolve_engine.db"


def _remember_db(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    ctx.meta[DB_META_KEY] = value
    return value


#: the largest integer a store's BIGINT column (and DuckDB's bound parameters) can hold
INT64_MAX = 2**63 - 1


class Number(click.FloatRange):
    """The type of every float option: a finite number (NaN and the infinities are refused, naming the option)
    within the range given."""

    def convert(self, value, param, ctx):
        number = value if isinstance(value, float) else click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


class Count(click.IntRange):
    """The type of every integer option: an integer within the range given, and never beyond what a BIGINT
    column holds (a larger value would reach SQL as a conversion error). Help shows the range given."""

    def __init__(self, min: int | None = None, max: int | None = None, **kwargs) -> None:
        self._given = (min, max)
        super().__init__(-INT64_MAX - 1 if min is None else min, INT64_MAX if max is None else max, **kwargs)
        if min is None and max is None:
            self.name = "integer"  # shown as INTEGER, with no range

    def convert(self, value, param, ctx):
        number = value if isinstance(value, int) else click.INT.convert(value, param, ctx)
        if not -INT64_MAX - 1 <= number <= INT64_MAX:
            self.fail(f"{value} is beyond the integers a store holds (at most {INT64_MAX} in size)", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        low, high = self._given
        if low is None:
            return f"x<={high}" if high is not None else ""
        return f"x>={low}" if high is None else f"{low}<=x<={high}"


#: the type of every --round option: a round the store can hold (its column is a 32-bit INTEGER)
ROUND = Count(0, MAX_ROUND)
#: the type of every option that names a training step: a step a trajectory may have
STEP = Count(0, MAX_STEP)
#: the type of run's and demo's --rounds: a run plans every round it has left when it starts
ROUNDS = Count(1, MAX_ROUNDS)
#: the type of every --seed option: the range numpy's legacy seeding, KMeans and set_seed accept
SEED = Count(0, 2**32 - 1)

db_option = click.option(
    "--db",
    callback=_remember_db,
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="COEVOLVE_DB",
    default=DEFAULT_DB,
    show_default=True,
    show_envvar=True,
    help="The store (a DuckDB file).",
)
wait_option = click.option(
    "--wait",
    type=Number(min=0),
    default=DEFAULT_WAIT_SECONDS,
    show_default=True,
    help="Seconds to wait while another process holds the store.",
)


def signal_options(command):
    """The signal constants as options: --threshold, --window/-w, --theta, --min-n, --forgetting-form (their
    defaults and help are ``SignalParams``'s)."""
    d = SIGNAL_DEFAULTS
    for option in reversed((
        click.option("--threshold", type=Number(0, 1), default=d.threshold, show_default=True,
                     help=signal_help("threshold")),
        click.option("--window", "-w", "w", type=Count(min=1), default=d.w, show_default=True,
                     help=signal_help("w")),
        click.option("--theta", type=Number(0, 100, min_open=True), default=d.theta, show_default=True,
                     help=signal_help("theta")),
        click.option("--min-n", type=Count(min=0), default=d.min_n, show_default=True,
                     help=signal_help("min_n")),
        click.option("--forgetting-form", type=click.Choice(FORGETTING_FORMS), default=d.forgetting_form,
                     show_default=True, help=signal_help("forgetting_form")),
    )):
        command = option(command)
    return command


def endpoint_options(command):
    """Where and how to reach a model: --api-base, --api-key, --timeout, --retries."""
    for option in reversed((
        click.option("--api-base", default=None, envvar="COEVOLVE_API_BASE", show_envvar=True,
                     help="Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1."),
        click.option("--api-key", default=None, envvar="COEVOLVE_API_KEY", show_envvar=True,
                     help="API key for the model (default: the provider's usual environment variable). "
                          "Never stored."),
        click.option("--timeout", type=Number(0, 86400, min_open=True), default=60.0, show_default=True,
                     help="Seconds per model call, at most 86400 (a day)."),
        click.option("--retries", type=Count(0, 100), default=2, show_default=True,
                     help="Retries of a call that failed in transport (5xx, timeout, a body that is not JSON); the "
                          "wait between tries doubles from 1 s up to a minute."),
    )):
        command = option(command)
    return command


def connect(model: str, api_base: str | None, api_key: str | None, option: str = "--model") -> Endpoint:
    """The endpoint a command's options name (the model, --api-base or its own, --api-key); a usage error naming
    ``option`` when the model is no model string."""
    try:
        return Endpoint(model, api_base, api_key)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


create_option = click.option(
    "--create", is_flag=True,
    help="Create the store if there is none at --db (without it a missing store is refused, so that a mistyped "
         "--db does not start a new, empty one).")


def require_store(db: Path, create: bool = False) -> None:
    """Refuse a store that does not exist, unless the command was asked to create it."""
    if not create and not db.exists():
        raise StoreError(missing_store(db, " (or pass --create)"))


def long_job(command: str, *, can_create: bool = False):
    """Decorates a command (just under ``@click.command``) that writes the store for a long time: the store
    must exist (or, where ``can_create``, --create is given), and the command holds the store's lease, so that a
    second long job refuses at once instead of undoing this one's work."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            create = kwargs.pop("create", False)
            require_store(kwargs["db"], create)
            with hold_lease(kwargs["db"], command, wait=kwargs["wait"], create=create,
                            echo=lambda line: click.echo(line, err=True)):
                return function(*args, **kwargs)

        return create_option(wrapper) if can_create else wrapper

    return decorate


def renamed(old: str, new: str, *, value=None, type=None, help_name: str | None = None):
    """Keeps the old spelling ``old`` of the option now called ``new`` (its parameter name) working for one
    release: hidden from --help, it fills ``new`` and says on standard error what to write instead.

    ``value``: the old spelling was a flag that meant this value of ``new`` (``--json`` for ``--format json``).
    ``help_name``: the new spelling as the message shows it (default: ``--`` + ``new``).
    """
    dest = "renamed_" + old.lstrip("-").replace("-", "_") + "_to_" + new
    shown = help_name or "--" + new.rstrip("_").replace("_", "-")

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            given = kwargs.pop(dest)
            if given is None or given is False:
                return function(*args, **kwargs)
            source = click.get_current_context().get_parameter_source(new)
            if source is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(given_twice(old, shown, "spelling"))
            replacement = f"{shown} {value}" if value is not None else shown
            click.echo(f"deprecated: {moved(old, replacement, 'spelling')}", err=True)
            kwargs[new] = value if value is not None else given
            return function(*args, **kwargs)

        option = (click.option(old, dest, is_flag=True, hidden=True, default=False) if value is not None
                  else click.option(old, dest, type=type, hidden=True, default=None))
        return option(wrapper)

    return decorate
