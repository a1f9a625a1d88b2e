"""patterns: cluster the trajectories flagged at one step into failure patterns and store them as a round."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.cli.options import Count, ROUND, SEED, STEP, db_option, long_job, signal_options, wait_option
from coevolve_engine.core.store import Store
from coevolve_engine.patterns import PatternSelection, find_patterns
from coevolve_engine.patterns.find import prepare_patterns
from coevolve_engine.core.signal_params import SignalParams


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{signal} {n}" for signal, n in counts.items() if n) or "-"


def _short(text: str | None, limit: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@click.command(
    epilog="""\b
Examples:
  coevolve-engine patterns                          latest step, next round, default signal constants
  coevolve-engine patterns --step 40 --window 5     the trajectories flagged at step 40 with W = 5
  coevolve-engine patterns --from-step 31 --step 40 what was flagged over steps 31..40
  coevolve-engine patterns --round 0 --replace      find round 0's patterns again
\b
Inspect them with SQL:
  coevolve-engine query "select pattern_id, size, dominant_signal, signal_counts from failure_patterns"
  coevolve-engine query "select * from pattern_members where pattern_id = '0-1' order by distance"
  coevolve-engine query "select params from failure_patterns where round = 0 limit 1\""""
)
@click.option("--round", "round_", type=ROUND, default=None,
              help="The round to store the patterns as. [default: 1 + the latest round in failure_patterns, "
                   "0 for the first]")
@click.option("--step", type=STEP, default=None,
              help="Cluster the trajectories flagged at this training step. [default: the latest scored step]")
@click.option("--from-step", "first_step", type=STEP, default=None,
              help="Cluster what was flagged at steps FROM_STEP .. --step (e.g. a whole round). [default: --step only]")
@signal_options
@click.option("--max-trajectories", type=Count(min=1), default=2000, show_default=True,
              help="Cluster at most this many flagged trajectories (a seeded sample when more are flagged).")
@click.option("--max-k", type=Count(min=1), default=8, show_default=True,
              help="Try at most this many patterns; the number is chosen by silhouette.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the sample and of KMeans.")
@click.option("--replace", is_flag=True, help="Delete the round's existing patterns and write them again.")
@long_job("patterns")
@db_option
@wait_option
def patterns(round_: int | None, step: int | None, first_step: int | None, threshold: float, w: int, theta: float,
             min_n: int, forgetting_form: str, max_trajectories: int, max_k: int, seed: int, replace: bool, db: Path,
             wait: float) -> None:
    """Group the trajectories flagged at one step into failure patterns.

    Each trajectory flagged at the step (forgetting, boundary or rare; one trajectory may carry several
    signals) is rendered as a short text (its task, the errors it met, its calls and the environment's
    answers), embedded with all-MiniLM-L6-v2 (cached in the store's embeddings table) and clustered with
    KMeans, the number of patterns chosen by the best cosine silhouette between 2 and --max-k. Each
    pattern is stored in failure_patterns with its dominant signal, how many members carry each signal and
    its representative (the member closest to the centre); its members go to pattern_members. A round's
    patterns are written in one transaction; an existing round is refused unless --replace.
    """
    params = SignalParams(threshold=threshold, w=w, theta=theta, min_n=min_n, forgetting_form=forgetting_form)
    # embed and cluster first, without holding the store: `query` from another process gets through meanwhile
    selection = PatternSelection(round=round_, replace=replace, step=step, first_step=first_step, params=params,
                                 max_trajectories=max_trajectories, max_k=max_k, seed=seed)
    embedder, prepared = prepare_patterns(db, selection, wait=wait, progress=lambda line: click.echo(line, err=True))
    ahead = prepared.embedded if prepared else 0
    with Store(db, create=False, wait=wait) as store:
        report = find_patterns(store, selection, embedder=embedder, prepared=prepared,
                               progress=lambda line: click.echo(line, err=True))
    sample = f" (a seeded sample of {report.clustered})" if report.clustered < report.flagged else ""
    replaced = f", replacing {report.replaced}" if report.replaced else ""
    quality = f", silhouette {report.silhouette:.3f}" if report.silhouette is not None else ""
    click.echo(f"round {report.round}, step {report.step}: {report.flagged} flagged trajectories{sample} -> "
               f"{report.k} failure pattern{'s' if report.k != 1 else ''}{quality}{replaced}")
    for p in report.patterns:
        click.echo(f"  {p.pattern_id:<6} {p.size:>5} trajectories  {p.dominant_signal:<10}  "
                   f"[{_counts(p.signal_counts)}]  e.g. {p.representative_task}: {_short(p.representative_prompt)}")
    times = ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in report.timings.items())
    click.echo(f"embedded {ahead + report.embedded} new texts with {report.model}; {times}")
    first = report.patterns[0].pattern_id
    click.echo("\nInspect them:\n"
               f"  coevolve-engine query \"select * from failure_patterns where round = {report.round}\"\n"
               f"  coevolve-engine query \"select * from pattern_members where pattern_id = '{first}' "
               "order by distance\"")


def register(group: click.Group) -> None:
    group.add_command(patterns)
