"""drift and report: how the task distribution moved across rounds, in the terminal, as files, as one HTML page."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import click
import polars as pl

from coevolve_engine.cli.options import Count, db_option, renamed, signal_options, wait_option
from coevolve_engine.cli.output import _digits, _number, render_table
from coevolve_engine.core.outputs import check_output, write_output
from coevolve_engine.drift import JS_SQL, METRIC_QUERIES, DriftParams, compare, compute_drift, open_for_reading
from coevolve_engine.drift.plots import write_figures
from coevolve_engine.report import build_report

TABLES = ("summary", *METRIC_QUERIES, "weights")


def diversity_options(command):
    for option in reversed((
        click.option("--neighbours", "k", type=Count(min=1), default=5, show_default=True,
                     help="SR@k's k: the nearest neighbours of each task's prompt embedding."),
        renamed("--k", "k", type=Count(min=1), help_name="--neighbours"),
        click.option("--no-diversity", is_flag=True,
                     help="Leave out SR@k and ED_rel (no prompt is embedded)."),
        click.option("--step-window", "window", type=Count(min=0), default=None,
                     help="Read the store over windows of this many of the training steps that have rollouts "
                          "(none spans a gap in the steps; 0: over rounds). Default: rounds for a store `run` made; "
                          "for ingested rollouts (no rounds), windows cutting the steps into at most 12."),
    )):
        command = option(command)
    return command


def _params(threshold, w, theta, min_n, forgetting_form, k, no_diversity, window) -> DriftParams:
    return DriftParams(threshold=threshold, w=w, theta=theta, min_n=min_n, forgetting_form=forgetting_form, k=k,
                       diversity=not no_diversity, window=window)


def _analyse(db: Path, params: DriftParams, wait: float):
    with open_for_reading(db, wait=wait) as opened:
        report = compute_drift(opened.store, params, label=db.stem)
    if opened.note:
        report.notes.insert(0, opened.note)
    return report


def _transposed(frame: pl.DataFrame, report=None) -> pl.DataFrame:
    """Metrics as rows and rounds (or step windows) as columns: readable in a terminal however many metrics."""
    if not frame.height:
        return frame
    by_steps = report is not None and report.by_steps
    headers = [report.period(r) if by_steps else f"round {r}" for r in frame["round"].to_list()]
    body = frame.drop("round")
    columns = {header: [_fmt(v, metric) for metric, v in zip(body.columns, body.row(i))]
               for i, header in enumerate(headers)}
    return pl.DataFrame({"metric": body.columns, **columns})


def _fmt(value, metric: str) -> str:
    """A value of the summary as the other tables print it (``readable``): by its metric's kind."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return _number(value, _digits(metric)) or "-"
    return str(value)


@click.command(
    epilog="""\b
Examples:
  coevolve-engine drift                                  one table, a column per round
  coevolve-engine drift --table patterns --format csv    one metric's rows
  coevolve-engine drift --table eval_steps               eval success and flagged rollouts per step
  coevolve-engine drift --compare uniform.duckdb --plots figures/
  coevolve-engine drift --sql                            the SQL of every table (recompute with query)"""
)
@signal_options
@diversity_options
@click.option("--table", "table_", type=click.Choice(TABLES), default="summary", show_default=True,
              help="What to print: the per-round summary, or one metric's full table.")
@click.option("--format", "format_", type=click.Choice(("table", "json", "jsonl", "csv")), default="table",
              show_default=True, help="Output format.")
@click.option("--compare", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Another run's store: its rounds side by side with this one's.")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write PNG figures to this folder (needs the report extra: matplotlib).")
@click.option("--force", is_flag=True,
              help="--plots: replace files there that are not PNG images (a store is never replaced).")
@click.option("--sql", "show_sql", is_flag=True, help="Print the query behind every table and exit.")
@db_option
@wait_option
def drift(threshold, w, theta, min_n, forgetting_form, k, no_diversity, window, table_, format_, compare, plots,
          force, show_sql, db: Path, wait: float) -> None:
    """How the task distribution drifted, round by round, from the store alone (opened read-only).

    Per round: the Jensen-Shannon divergence of the weights from the previous and the first round, the task
    set's size, new and synthesized tasks, flagged rollouts per signal, success on the held-out eval split
    (eval_success, eval_step), failure patterns, task success rates, and the prompts' diversity (SR@k,
    ED_rel to the previous round). --table eval_steps puts eval success against step next to the flagged
    rollouts per step (the paper's Figure 3); --table eval_similarity bins each round's candidates by their
    similarity to the eval tasks. A store `run` never made (your own ingested rollouts) is read over windows of
    the steps that have rollouts instead (--step-window); --table ends compares the first window with the last
    over the tasks scored in both; --table forgetting_tasks (ranked by what each task lost), boundary_tasks and
    rare_patterns name what the signals found. docs/drift.md defines each one.
    """
    if show_sql:
        for name, sql in {**METRIC_QUERIES, "weights ($round against $prev)": JS_SQL}.items():
            click.echo(f"-- {name}\n{sql.strip()};\n")
        return
    params = _params(threshold, w, theta, min_n, forgetting_form, k, no_diversity, window)
    reports = [_analyse(db, params, wait)]
    if compare is not None:  # over what the first store went by: rounds, or the same step windows
        reports.append(_analyse(compare, params.like(reports[0]), wait))
    for report in reports:
        for note in report.notes:
            click.echo(f"note ({report.label}): {note}", err=True)
    if table_ == "summary":
        frame = compare_or_summary(reports)
    else:
        frames = [r.tables.get(table_, pl.DataFrame()).with_columns(pl.lit(r.label).alias("run"))
                  for r in reports]
        frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0].drop("run")
    if format_ == "json":
        click.echo(json.dumps(frame.to_dicts(), indent=2, default=str))
    elif format_ == "jsonl":
        click.echo("".join(json.dumps(row, default=str) + "\n" for row in frame.to_dicts()), nl=False)
    elif format_ == "csv":
        flat = frame.with_columns(pl.col(c).list.join(";") for c, t in frame.schema.items() if t == pl.List(pl.String))
        click.echo(flat.write_csv(), nl=False)
    else:
        shown = _transposed(frame, reports[0] if len(reports) == 1 else None) if table_ == "summary" else frame
        click.echo(render_table(shown) if frame.height else "(no rounds: the store has no weights, patterns, "
                                                            "candidates or trajectories yet)")
    if plots is not None:
        for path in write_figures(reports, plots, force=force):
            click.echo(f"wrote {path}", err=True)


def compare_or_summary(reports) -> pl.DataFrame:
    return compare(reports[0], reports[1]) if len(reports) > 1 else reports[0].summary


@click.command(epilog="""\b
Examples:
  coevolve-engine report -o report.html --db runs/coevolve.duckdb
  coevolve-engine report --db runs/coevolve.duckdb --compare runs/uniform.duckdb -o compare.html
\b
The page leads with the result: a headline (held-out success from start to end, steps, tasks added, the
loop's cost) and four figures (held-out success against step, flagged rollouts per signal per round, the
task set's growth and synthesized share, acceptance per signal); then the failure patterns in words, with
their lineage across rounds; then every table, folded. A store of your own rollouts (no rounds) leads
with a headline over steps and what the signals found (forgetting tasks, boundary tasks, rare patterns).""")
@signal_options
@diversity_options
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"),
              show_default=True, help="The HTML file to write (never the store or another DuckDB file).")
@renamed("--out", "output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace --output even when it is not an HTML page (a store never is).")
@click.option("--compare", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Another run's store: the two runs side by side in the same layout.")
@click.option("--title", default=None, help="The page title (default: the store's file name).")
@click.option("--top-patterns", type=Count(min=0), default=5, show_default=True,
              help="Failure patterns shown in words, and with their summaries and example trajectories.")
@db_option
@wait_option
def report(threshold, w, theta, min_n, forgetting_form, k, no_diversity, window, output: Path, force: bool,
           compare, title, top_patterns, db: Path, wait: float) -> None:
    """Write one self-contained HTML page about the run, the result first (figures embedded, nothing loaded
    from the network)."""
    check_output(output, "html", db=db, force=force)  # before the analysis, not after it
    if compare is not None:
        check_output(output, "html", db=compare, force=force)
    params = _params(threshold, w, theta, min_n, forgetting_form, k, no_diversity, window)
    labels = _labels(db, compare) if compare is not None else (db.stem,)
    with ExitStack() as stack:
        opened = stack.enter_context(open_for_reading(db, wait=wait))
        notes = [opened.note] if opened.note else []
        other = None
        if compare is not None:
            opened_other = stack.enter_context(open_for_reading(compare, wait=wait))
            notes += [f"{labels[1]}: {opened_other.note}"] if opened_other.note else []
            other = (opened_other.store, labels[1])
        default_title = (f"coevolve-engine report: {db.name}" if compare is None
                         else f"coevolve-engine report: {labels[0]} and {labels[1]}")
        page = build_report(opened.store, params, title=title or default_title, label=labels[0], notes=notes,
                            top_patterns=top_patterns, compare_with=other)
    write_output(output, page, "html", db=db, force=force)
    click.echo(f"wrote {output} ({len(page.encode()) // 1024} KiB)")


def _labels(first: Path, second: Path) -> tuple[str, str]:
    """Names for two runs: their file names, or their folders' when the file names are the same."""
    if first.stem != second.stem:
        return first.stem, second.stem
    a, b = first.resolve().parent.name, second.resolve().parent.name
    return (a, b) if a != b else (str(first), str(second))


def register(group: click.Group) -> None:
    group.add_command(drift)
    group.add_command(report)
