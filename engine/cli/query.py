"""query: run SQL against the store, read-only unless --write."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from coevolve_engine.cli.options import db_option, wait_option
from coevolve_engine.cli.output import force_option, format_option, output_option, write_frame
from coevolve_engine.outputs import check_output
from coevolve_engine.store import Store


@click.command(
    epilog="""\b
Examples:
  coevolve-engine query "select signal, count(*) from flagged_trajectories group by signal"
  coevolve-engine query "select * from forgetting_with(w := 5) where step = \\$s" -p s 12
  echo "select * from rare_patterns where rare" | coevolve-engine query - --format csv
\b
Views: task_steps, group_outcomes, forgetting, forgetting_events, boundary, pattern_steps, rare_patterns,
flagged_trajectories, task_signals; each has a table macro NAME_with(...) taking threshold, w, theta, min_n.
Tables: tasks, trajectories, rounds, ingests, schema_migrations."""
)
@click.argument("sql")
@click.option("-p", "--param", "params", type=(str, str), multiple=True, metavar="NAME VALUE",
              help="Bind $NAME to VALUE (a string; cast in SQL if needed, e.g. $n::INT). Repeatable.")
@format_option
@output_option
@force_option
@click.option("--write", is_flag=True,
              help="Open the store for writing (default: read-only). The statements run in one transaction: "
                   "if one fails, none of them is kept.")
@db_option
@wait_option
def query(sql: str, params: tuple[tuple[str, str], ...], format_: str, output: Path | None, force: bool,
          write: bool, db: Path, wait: float) -> None:
    """Run SQL against the store and print the result. SQL is the argument, or - to read standard input.

    The store is opened read-only unless --write is given, so a query never changes anything by accident
    and can run while another process is writing (it waits up to --wait seconds for the writer's lock).
    """
    if sql == "-":
        sql = sys.stdin.read()
    if output is not None:  # refused before the query runs: with --write, nothing is changed either
        check_output(output, format_, db=db, force=force)
    with Store(db, read_only=not write, create=False, wait=wait) as store:
        if write:  # all statements or none
            with store.transaction():
                frame = store.sql(sql, dict(params))
        else:
            frame = store.sql(sql, dict(params))
    write_frame(frame, format_, output, db=db, force=force)


def register(group: click.Group) -> None:
    group.add_command(query)
