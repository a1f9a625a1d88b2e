"""query: run SQL against the store, read-only unless --write."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from coevolve_engine.cli.options import db_option, wait_option
from coevolve_engine.cli.output import force_option, format_option, output_option, write_frame
from coevolve_engine.core.outputs import check_output
from coevolve_engine.core.sqlfiles import catalog
from coevolve_engine.query.run import run_query
from coevolve_engine.core.store import Store


class QueryCommand(click.Command):
    """query's help ends with what there is to query, read from the SQL files that define it."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        entries = catalog()
        names = {kind: [e for e in entries if e.kind == kind] for kind in ("table", "view", "table macro",
                                                                            "scalar macro")}
        with formatter.section(f"Tables ({len(names['table'])})"):
            formatter.write_text(", ".join(e.name for e in names["table"]))
        with formatter.section(f"Views ({len(names['view'])})"):
            formatter.write_dl([(e.name, _short(e.about)) for e in names["view"]])
        with formatter.section(f"Table macros ({len(names['table macro'])}; the view's constants as arguments, "
                               "e.g. forgetting_with(w := 5))"):
            formatter.write_text(", ".join(e.name for e in names["table macro"]))
        with formatter.section(f"Scalar macros ({len(names['scalar macro'])})"):
            formatter.write_dl([(e.name, _short(e.about)) for e in names["scalar macro"]])


def _short(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


@click.command(
    cls=QueryCommand,
    epilog="""\b
Examples:
  coevolve-engine query "select signal, count(*) from flagged_trajectories group by signal"
  coevolve-engine query "select * from forgetting_with(w := 5) where step = \\$s" -p s 12
  echo "select * from rare_patterns where rare" | coevolve-engine query - --format csv
  coevolve-engine query "describe run_rounds"             a view's columns
  coevolve-engine query "select count(*) from read_json('new.jsonl')" --read new.jsonl
\b
What query reads and writes: the store at --db, and the files and folders named with --read (read_csv,
read_json, read_parquet, glob); no other file. Without --write it runs only statements that read (SELECT, WITH,
DESCRIBE, SHOW, SUMMARIZE, PIVOT, EXPLAIN without ANALYZE, PRAGMAs that read) and writes nothing; with --write it
also changes the store (INSERT, UPDATE, DELETE, CREATE, ...) and nothing else. Results go to a regular file only
through -o, which never replaces a store or a file of another kind without --force. PREPARE/EXECUTE, SET/USE,
ATTACH, DETACH, COPY, EXPORT/IMPORT DATABASE, INSTALL, LOAD, UPDATE EXTENSIONS, BEGIN, COMMIT, ROLLBACK,
CHECKPOINT and table functions that do not only read are refused before any statement runs."""
)
@click.argument("sql")
@click.option("-p", "--param", "params", type=(str, str), multiple=True, metavar="NAME VALUE",
              help="Bind $NAME to VALUE (a string; cast in SQL if needed, e.g. $n::INT). Repeatable.")
@format_option
@output_option
@force_option
@click.option("--write", is_flag=True,
              help="Open the store for writing (default: read-only). The statements run in one transaction, "
                   "committed after the result is shown or written: if anything fails, none of them is kept. "
                   "A task with trajectories cannot be made a held-out eval task, nor can trajectories be given "
                   "to one.")
@click.option("--read", "readable", type=click.Path(exists=True, path_type=Path), multiple=True, metavar="PATH",
              help="A file, or a folder with everything in it, that the SQL may read (read_csv, read_json, "
                   "read_parquet, glob). Repeatable. No other file outside the store can be read.")
@db_option
@wait_option
def query(sql: str, params: tuple[tuple[str, str], ...], format_: str, output: Path | None, force: bool,
          write: bool, readable: tuple[Path, ...], db: Path, wait: float) -> None:
    """Run SQL against the store and print the result. SQL is the argument, or - to read standard input.

    The store is opened read-only unless --write is given, so a query never changes anything by accident
    and can run while another process is writing (it waits up to --wait seconds for the writer's lock).
    """
    if sql == "-":
        sql = sys.stdin.read()
    if output is not None:  # refused before the query runs: with --write, nothing is changed either
        check_output(output, format_, db=db, force=force)
    with Store(db, read_only=not write, create=False, wait=wait) as store:
        run_query(store, sql, dict(params), write=write, readable=readable,
                  deliver=lambda frame: write_frame(frame, format_, output, db=db, force=force))


def register(group: click.Group) -> None:
    group.add_command(query)
