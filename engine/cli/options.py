"""Options shared by every command that opens the store."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.store import DEFAULT_DB, DEFAULT_WAIT_SECONDS

db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="COEVOLVE_DB",
    default=DEFAULT_DB,
    show_default=True,
    show_envvar=True,
    help="The store (a DuckDB file).",
)
wait_option = click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=DEFAULT_WAIT_SECONDS,
    show_default=True,
    help="Seconds to wait while another process holds the store.",
)
