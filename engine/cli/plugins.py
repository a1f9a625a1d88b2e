"""plugins: every registered environment, synthesizer, trainer, strategy, agent and importer, and whether it is
ready to use."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import polars as pl

from coevolve_engine.cli.output import force_option, format_option, output_option, write_frame
from coevolve_engine.plugins.installed import REGISTRIES, installed_plugins



@click.command(epilog="""\b
Examples:
  coevolve-engine plugins
  coevolve-engine plugins --kind environment --kind synthesizer
  coevolve-engine plugins --format json
\b
A package adds its own through the entry-point groups coevolve_engine.environments, coevolve_engine.synthesizers,
coevolve_engine.trainers, coevolve_engine.strategies, coevolve_engine.agents and coevolve_engine.importers
(docs/environments.md).""")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(tuple(REGISTRIES)),
              help="Only plugins of this kind (repeat for several); default: every kind.")
@format_option
@output_option
@force_option
def plugins(kinds: tuple[str, ...], format_: str, output: Path | None, force: bool) -> None:
    """List every registered plugin with the package it comes from and whether it is ready to use here.

    A plugin is ready when its module imports and the packages it needs when used are installed; for one that
    is not, the lines under the table say what is missing and what to install.
    """
    rows = installed_plugins(kinds or None)
    frame = pl.DataFrame([dataclasses.asdict(row) for row in rows],
                         schema={f.name: (pl.Boolean if f.name == "ready" else pl.String)
                                 for f in dataclasses.fields(rows[0].__class__)} if rows else None)
    if format_ != "table":
        write_frame(frame, format_, output, force=force)
        return
    # the table: a line a plugin, READY yes or no (json and the other formats carry every field)
    table = frame.select("kind", "name", "package", pl.when(pl.col("ready")).then(pl.lit("yes"))
                         .otherwise(pl.lit("no")).alias("ready"))
    lines = [row.problem for row in rows if not row.ready]
    write_frame(table, format_, output, force=force)
    if lines and output is None:
        click.echo("\nNot ready:\n  " + "\n  ".join(lines))


def register(group: click.Group) -> None:
    group.add_command(plugins)
