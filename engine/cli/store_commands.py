"""init, ingest, migrations: create the store, load records into it, show its schema version."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

import click

from coevolve_engine.cli.options import create_option, db_option, renamed, require_store, wait_option
from coevolve_engine.core.ingest import FORMATS
from coevolve_engine.core.records import FIELDS
from coevolve_engine.core import sqlfiles
from coevolve_engine.core.store import Store, applied_migrations, check_intact, connect, ingest_path


def _sample_files() -> list[tuple[str, str]]:
    return [("tasks", "sample_tasks.jsonl"), ("trajectories", "sample_trajectories.jsonl")]


@click.command()
@db_option
@wait_option
@click.option("--sample", is_flag=True, help="Also load the bundled sample (12 tasks, their rollouts over 8 steps).")
def init(db: Path, wait: float, sample: bool) -> None:
    """Create the store (or migrate an existing one) and build its views.

    An existing store is read whole first: a damaged one (truncated, failing checksums) is refused as it is.
    Then what of its schema went missing is rebuilt without touching its data: every view and macro, the
    bookkeeping tables (schema_migrations, ingests, run_phases, store_lease, lock_holds, embeddings, llm_calls);
    a lost table of data is named instead, and nothing is changed.
    """
    existed = db.exists()
    if existed and not db.is_dir():
        check_intact(db, wait=wait)
    with Store(db, wait=wait) as store:
        rebuilt = store.repair() if existed else []
        applied = [name for name, done in store.migration_status() if done]
        if sample:
            for kind, name in _sample_files():
                with as_file(files("coevolve_engine.data") / name) as path:
                    report = store.ingest_tasks(path) if kind == "tasks" else store.ingest_trajectories(path)
                click.echo(f"sample {kind}: {report.added} added, {report.skipped} already present")
    verb = "opened" if existed else "created"
    click.echo(f"{verb} store {db} (migrations: {', '.join(applied)})")
    if rebuilt:
        click.echo(f"rebuilt what was missing: {', '.join(rebuilt)}")


def _field_help(kind: str) -> str:
    lines = [f"  {f.name:<14}{'required' if f.required else 'optional':<10}{f.help}" for f in FIELDS[kind]]
    return "\n".join(lines)


@click.command(
    epilog="\b\nTrajectory fields:\n" + _field_help("trajectories") + "\n\b\nTask fields:\n" + _field_help("tasks")
)
@click.argument("kind", type=click.Choice(["trajectories", "tasks"]))
@click.argument("files_", metavar="FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--layout", type=click.Choice(FORMATS), default=None,
              help="How the files hold the records; by default from the extension (.jsonl JSON lines, .json "
                   "one array of records, .parquet) or a dataset directory.")
@renamed("--format", "layout", type=click.Choice(FORMATS))
@click.option("--create-tasks", is_flag=True,
              help="trajectories: store a placeholder task (task_id only, source 'placeholder') for each task id "
                   "the store does not have; without it, trajectories of unknown tasks are refused.")
@create_option
@db_option
@wait_option
def ingest(kind: str, files_: tuple[Path, ...], layout: str | None, create_tasks: bool, create: bool, db: Path,
           wait: float) -> None:
    """Load trajectory or task records from JSON lines, Parquet or a saved `datasets` dataset.

    Each FILE is one unit: it is checked whole and either ingested whole or not at all, and the error names
    the file, line (or row) and field. Records already in the store are skipped, so ingesting the same file
    twice adds nothing. Ingesting stops at the first file that fails; the files before it stay ingested.
    Trajectories must name tasks already in the store (ingest the tasks first, or pass --create-tasks).
    A file is read and checked before the store is locked: `query` gets through meanwhile.
    """
    if create_tasks and kind != "trajectories":
        raise click.BadParameter("only trajectories name tasks that may be missing", param_hint="--create-tasks")
    require_store(db, create)
    Store(db, wait=wait).close()  # create or migrate it; each file then holds it only for its insert
    for path in files_:
        report = ingest_path(db, path, kind=kind, format=layout, create_tasks=create_tasks, wait=wait)
        click.echo(f"{path}: {report.records} records, {report.added} added, {report.skipped} already present")


@click.command()
@db_option
@wait_option
def migrations(db: Path, wait: float) -> None:
    """List the store's migrations and whether each is applied (changes nothing)."""
    applied: set[str] = set()
    if db.exists():
        con = connect(db, read_only=True, wait=wait)
        try:
            applied = set(applied_migrations(con))
        finally:
            con.close()
    for migration in sqlfiles.migrations():
        click.echo(f"{'applied' if migration.name in applied else 'pending':<9}{migration.name}")


def register(group: click.Group) -> None:
    for command in (init, ingest, migrations):
        group.add_command(command)
