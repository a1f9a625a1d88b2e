"""signals: a readable summary of forgetting, boundary and rare-pattern signals."""

from __future__ import annotations

import json
from pathlib import Path

import click

from coevolve_engine.cli.options import Count, db_option, renamed, signal_options, wait_option
from coevolve_engine.cli.output import render_table
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.signals.summary import summarise
from coevolve_engine.core.store import Store


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


@click.command(
    epilog="""\b
Every figure can be recomputed with coevolve-engine query, e.g.
  coevolve-engine query "select signal, count(*) from flagged_trajectories group by signal"
  coevolve-engine query "select * from forgetting_with(w := 5, threshold := 0.5) order by task_id, step"
  coevolve-engine query "select * from boundary order by step desc limit 20"
  coevolve-engine query "select * from rare_patterns where rare order by share\""""
)
@signal_options
@click.option("--top", type=Count(min=1), default=5, show_default=True, help="Rows in each top list.")
@click.option("--format", "format_", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="Output format: the summary as text, or as JSON.")
@renamed("--json", "format_", value="json", help_name="--format")
@db_option
@wait_option
def signals(threshold: float, w: int, theta: float, min_n: int, forgetting_form: str, top: int, format_: str, db: Path,
            wait: float) -> None:
    """Summarise where the agent is forgetting, uncertain (boundary) or rarely exercised (rare)."""
    params = SignalParams(threshold=threshold, w=w, theta=theta, min_n=min_n, forgetting_form=forgetting_form)
    with Store(db, read_only=True, wait=wait) as store:
        summary = summarise(store, params, top=top)
    if format_ == "json":
        click.echo(json.dumps({
            "params": params.bind(), "totals": summary.totals, "detail": summary.detail,
            "flagged_trajectories": summary.flagged_trajectories,
            "by_signal": summary.by_signal.to_dicts(), "top_forgetting": summary.top_forgetting.to_dicts(),
            "top_boundary": summary.top_boundary.to_dicts(), "rare": summary.rare.to_dicts(),
        }, indent=2, default=str))
        return
    t, d = summary.totals, summary.detail
    flags = {row["signal"]: row for row in summary.by_signal.to_dicts()}
    echo = click.echo
    if not t["trajectories"]:
        echo(f"{db}: {t['tasks']} tasks and no trajectories yet; ingest some with "
             "`coevolve-engine ingest trajectories FILE`")
        return
    echo(f"{db}: {t['tasks']} tasks, {t['trajectories']} trajectories of {t['attempted_tasks']} tasks in "
         f"{t['groups']} groups, steps {t['first_step']}..{t['last_step']}")
    echo(f"signals with threshold {threshold:g}, window {w}, theta {theta:g}%, min_n {min_n}, "
         f"forgetting per {forgetting_form}:")
    fired = (f"fired at {d['forgetting_steps']} task-steps" if forgetting_form == "group"
             else f"fired on {d['forgetting_trajectories']} failed rollouts")
    echo(f"  forgetting  {flags['forgetting']['flags']:>6} trajectories  {fired}; "
         f"{d['forgetting_events']} forgetting events in {d['tasks_that_forgot']} tasks")
    echo(f"  boundary    {flags['boundary']['flags']:>6} trajectories  {d['boundary_groups']} of {t['groups']} "
         f"groups mixed ({_pct(d['boundary_groups'], t['groups'])})")
    echo(f"  rare        {flags['rare']['flags']:>6} trajectories  {d['rare_patterns']} of {d['patterns']} "
         f"action patterns rare overall")
    echo(f"  flagged     {summary.flagged_trajectories:>6} trajectories carry at least one signal "
         f"({_pct(summary.flagged_trajectories, t['trajectories'])}); at step {t['last_step']}: "
         + ", ".join(f"{name} {row['at_last_step']}" for name, row in flags.items()))
    for title, frame in (
        ("Tasks forgetting most, by what they lost (forgetting_tasks)", summary.top_forgetting),
        ("Tasks most often on the boundary", summary.top_boundary),
        ("Rare action patterns that flagged trajectories", summary.rare),
    ):
        echo(f"\n{title}:")
        echo(render_table(frame) if frame.height else "  (none)")
    echo('\nRecompute any figure: coevolve-engine query "select signal, count(*) from flagged_trajectories '
         'group by signal"  (see --help for more)')


def register(group: click.Group) -> None:
    group.add_command(signals)
