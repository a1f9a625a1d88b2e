"""weights and sample: compute a round's task weights with a curriculum strategy, and draw weighted batches
of GRPO groups from them."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import polars as pl

from coevolve_engine.cli.options import Count, ROUND, db_option, renamed, signal_options, wait_option
from coevolve_engine.cli.output import force_option, format_option, output_option, render_table, write_frame
from coevolve_engine.core.sampler import MAX_BATCH_ROWS, WeightedGroupSampler
from coevolve_engine.core.store import Store
from coevolve_engine.curriculum import STRATEGIES, compute_weights, config_help, latest_round, load_weights
from coevolve_engine.core.signal_params import SignalParams


class _StrategyHelp(click.Command):
    """Appends every built-in strategy's settings to the epilog, read from their config dataclasses."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)

        formatter.write_paragraph()
        formatter.write_text("Strategies and their settings (--set NAME=VALUE):")
        for name in ("uniform", "coevolve", "plr", "dapo-filter"):
            registration = STRATEGIES.entries[name]
            with formatter.indentation():
                formatter.write_text(f"{name}: {registration.description}")
                with formatter.indentation():
                    rows = [(f"{field}={default}", text) for field, default, text in config_help(STRATEGIES.load(name))]
                    if rows:
                        formatter.write_dl(rows)


def _settings(pairs: tuple[str, ...]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE (e.g. --set boundary=2)", param_hint="--set")
        settings[name.strip()] = value.strip()
    return settings


@click.command(
    cls=_StrategyHelp,
    epilog="""\b
Examples:
  coevolve-engine weights --strategy coevolve                 next round, default settings
  coevolve-engine weights --round 2 --strategy plr --set beta=0.3 --set rho=0.2
  coevolve-engine weights --round 2 --strategy dapo-filter --replace
\b
Inspect them with SQL:
  coevolve-engine query "select round, strategy, tasks, nonzero, reason from weight_sets order by round"
  coevolve-engine query "select * from task_weights where round = 1 order by weight desc limit 10"
  coevolve-engine query "select * from task_curriculum order by boundary_recent desc limit 10\"""",
)
@click.option("--round", "round_", type=ROUND, default=None,
              help="The round to store the weights as. [default: 1 + the latest round with weights, 0 for the first]")
@click.option("--strategy", default="coevolve", show_default=True,
              help="uniform, coevolve, plr, dapo-filter, or a plugin's name (see below).")
@click.option("--set", "-s", "pairs", multiple=True, metavar="NAME=VALUE",
              help="A strategy setting; repeat for several. The settings of each strategy are listed below.")
@signal_options
@click.option("--replace", is_flag=True, help="Compute an existing round's weights again, replacing them.")
@click.option("--top", type=Count(min=0), default=5, show_default=True,
              help="Show this many of the heaviest tasks.")
@db_option
@wait_option
def weights(round_: int | None, strategy: str, pairs: tuple[str, ...], threshold: float, w: int, theta: float,
            min_n: int, forgetting_form: str, replace: bool, top: int, db: Path, wait: float) -> None:
    """Compute every task's sampling weight for a round and store it.

    The strategy reads each task's signals (forgetting, boundary and rare over its recent steps, its latest
    group, how long since it was attempted; the task_curriculum_with macro) and gives it a weight >= 0; a
    sampler draws a task with probability weight / total. The weights go to task_weights (with the terms that
    produced each one, as JSON components) and the round to weight_sets, with a reason that says how it
    differs from the previous round; both in one transaction. An existing round is refused unless --replace.
    """
    params = SignalParams(threshold=threshold, w=w, theta=theta, min_n=min_n, forgetting_form=forgetting_form)
    with Store(db, create=False, wait=wait) as store:
        if round_ is None:
            last = latest_round(store)
            round_ = 0 if last is None else last + 1
        result = compute_weights(store, round_, strategy, params, settings=_settings(pairs), replace=replace)
        heaviest = store.sql("SELECT task_id, weight, round(weight / sum(weight) OVER (), 6) AS probability, "
                             "components FROM task_weights WHERE round = $round "
                             "QUALIFY row_number() OVER (ORDER BY weight DESC, task_id) <= $top "
                             "ORDER BY weight DESC, task_id", {"round": round_, "top": top})
    drawable = int((result.weights > 0).sum())
    click.echo(f"round {result.round}: {result.strategy} weights for {len(result)} tasks ({drawable} can be drawn)"
               + (f", signals up to step {result.step}" if result.step is not None else ""))
    click.echo(f"reason: {result.reason}")
    if top and heaviest.height:
        click.echo(render_table(heaviest))
    click.echo(f"\nDraw a batch: coevolve-engine sample --round {result.round} --groups-per-step 32 --group-size 8")


@click.command(
    epilog="""\b
Examples:
  coevolve-engine sample -b 32 -k 8                            batch 0 of the latest round, as a table
  coevolve-engine sample --round 1 --groups-per-step 32 --group-size 8 --seed 7 --step 12 --format json
  coevolve-engine sample -b 512 -k 8 --format csv --output batch.csv
\b
The same --round, --seed and --step give the same batch on any machine, so every process of a distributed
trainer can call it (or build WeightedGroupSampler in Python) and agree. It is the sampler trl-grpo draws its
groups with: step S of a run is --step S.""",
)
@click.option("--round", "round_", type=ROUND, default=None,
              help="Draw from this round's weights. [default: the latest round with weights]")
@click.option("--groups-per-step", "-b", type=Count(min=1), default=32, show_default=True,
              help="Tasks (GRPO groups) per batch, each with probability weight / total; without replacement while "
                   "at least this many tasks have a positive weight (one group per task), with replacement otherwise.")
@renamed("--tasks", "groups_per_step", type=Count(min=1))
@click.option("--group-size", "-k", type=Count(min=1), default=8, show_default=True,
              help="Rows per task: each chosen task is repeated K times in a row (its GRPO group).")
@click.option("--seed", type=Count(min=0, max=2**32 - 1), default=0, show_default=True,
              help="Seed of the run's draws.")
@click.option("--epoch", type=Count(min=0), default=0, hidden=True)  # deprecated: draws are numbered by step
@click.option("--step", type=Count(min=0, max=2**32 - 1), default=0, show_default=True,
              help="Which batch: the run's step, counted from 0 across rounds; successive steps draw independently.")
@format_option
@output_option
@force_option
@db_option
@wait_option
def sample(round_: int | None, groups_per_step: int, group_size: int, seed: int, epoch: int, step: int, format_: str,
           output: Path | None, force: bool, db: Path, wait: float) -> None:
    """Draw a weighted batch of tasks, each repeated K times in a row (a GRPO group).

    One row per rollout to generate: group (0 .. GROUPS_PER_STEP-1), task_id, the task's weight and its probability
    weight / total. For trainers outside the engine (verl, OpenRLHF, your own loop). Draws with torch (the
    `local` extra), as trl-grpo does.
    """
    if epoch:
        raise click.UsageError("--epoch is gone: a run's draws are numbered by --step alone, counted from 0 across "
                               "rounds and epochs (step S of the run is --step S)")
    if groups_per_step * group_size > MAX_BATCH_ROWS:
        raise click.UsageError(f"--groups-per-step {groups_per_step} times --group-size {group_size} is more than "
                               f"{MAX_BATCH_ROWS:,} rows, the most one batch may hold; draw several smaller "
                               "batches (--step 0, 1, ...)")
    with Store(db, read_only=True, wait=wait) as store:
        weight_set = load_weights(store, round_)
    sampler = WeightedGroupSampler(weight_set.weights, group_size=group_size, groups_per_step=groups_per_step,
                                   seed=seed)
    chosen = sampler.batch(step)
    frame = pl.DataFrame({
        "group": np.arange(len(chosen)) // group_size,
        "task_id": weight_set.task_ids[chosen].tolist(),
        "weight": weight_set.weights[chosen],
        "probability": weight_set.probabilities[chosen],
    })
    write_frame(frame, format_, output, db=db, force=force)


def register(group: click.Group) -> None:
    group.add_command(weights)
    group.add_command(sample)
