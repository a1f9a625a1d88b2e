"""tasks: bring an environment's shipped tasks into the store."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.cli.options import Count, create_option, db_option, require_store, wait_option
from coevolve_engine.core.store import Store


@click.group()
def tasks() -> None:
    """Tasks in the store: import an environment's shipped tasks."""


@tasks.command(name="import", epilog="""\b
Examples:
  coevolve-engine tasks import bfcl --category multi_turn_base
  coevolve-engine tasks import bfcl --category multi_turn_base --category multi_turn_miss_param --limit 20
  coevolve-engine tasks import calc --category test --split eval      held out: evaluated, never trained on""")
@click.argument("env")
@click.option("--category", "categories", multiple=True,
              help="A category of the environment's shipped tasks (repeatable; default: all). "
                   "BFCL: multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context, "
                   "simple_python, multiple, parallel, parallel_multiple.")
@click.option("--limit", type=Count(min=1), default=None, help="At most this many tasks per category.")
@click.option("--split", type=click.Choice(["train", "eval"]), default="train", show_default=True,
              help="eval: hold the tasks out. The curriculum never weighs them, so no trainer draws them; "
                   "`run` evaluates each round's policy on them (its [eval] settings).")
@create_option
@db_option
@wait_option
def import_tasks(env: str, categories: tuple[str, ...], limit: int | None, split: str, create: bool, db: Path,
                 wait: float) -> None:
    """Import the tasks an environment ships (ENV is a registered environment, e.g. bfcl)."""
    require_store(db, create)

    environment = load_environment(env)
    for category in categories or (None,):
        try:
            records = [{**task, "split": split} for task in environment.load_tasks(category=category, limit=limit)]
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--category") from exc
        label = f"{env} tasks" + (f" ({category})" if category else "") + (" for eval" if split == "eval" else "")
        with Store(db, wait=wait) as store:
            report = store.add_records("tasks", records, label=label)
        click.echo(f"{label}: {report.records} tasks, {report.added} added, {report.skipped} already present")


def register(group: click.Group) -> None:
    group.add_command(tasks)
