"""The coevolve-engine command line: one module per command group, each command a few lines over the library."""

from __future__ import annotations

import re

import click
import duckdb

from coevolve_engine import __version__
from coevolve_engine.cli import (
    bootstrap,
    curriculum,
    demo,
    drift,
    eval as eval_cli,
    export,
    patterns,
    plugins,
    query,
    rollout,
    run,
    signals,
    store_commands,
    summarize,
    synthesis,
    tasks,
)
from coevolve_engine.cli.options import DB_META_KEY
from coevolve_engine.core.errors import CoevolveError, StoreDamagedError
from coevolve_engine.core.store import is_damage


class EngineGroup(click.Group):
    """Turns the errors a user can act on into one-line messages instead of tracebacks."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CoevolveError as exc:
            raise click.ClickException(str(exc)) from exc
        except duckdb.Error as exc:
            if is_damage(exc):
                raise click.ClickException(str(StoreDamagedError(_damaged_file(exc, ctx), "DuckDB could not read "
                                                                                          f"it ({exc})"))) from exc
            raise click.ClickException(f"SQL error: {exc}") from exc


def _damaged_file(exc: Exception, ctx: click.Context) -> str:
    """The file a DuckDB I/O error names, else the command's --db (a checksum error names no file)."""
    found = re.search(r'file "([^"]+)"', str(exc))
    return found.group(1) if found else str(ctx.meta.get(DB_META_KEY, "--db"))


@click.group(cls=EngineGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="coevolve-engine")
def cli() -> None:
    """Co-evolve an LLM agent and its training tasks around one DuckDB store.

    \b
    First steps:
      coevolve-engine init --sample          create ./coevolve.duckdb with a sample run in it
      coevolve-engine signals                forgetting, boundary and rare-pattern signals
      coevolve-engine query "select * from forgetting_tasks order by rank limit 5"

    The store is ./coevolve.duckdb unless --db or $COEVOLVE_DB says otherwise.
    """


def _add_commands() -> None:
    for module in (store_commands, tasks, rollout, eval_cli, query, signals, patterns, summarize, synthesis,
                   curriculum, export, run, drift, demo, bootstrap, plugins):
        module.register(cli)


_add_commands()


def main() -> None:
    cli(prog_name="coevolve-engine")
