"""demo: the whole loop, offline, on the built-in calc environment with a tiny policy built on the spot."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.cli.options import ROUNDS, SEED
from coevolve_engine.cli.output import render_table
from coevolve_engine.core.store import Store
from coevolve_engine.loop.demo import held_out_by_turns, held_out_curve, run_demo, write_report
from coevolve_engine.loop.config import ConfigError
from coevolve_engine.loop.config_files import blame_override
from coevolve_engine.loop.summary import loop_cost, rounds_table
from coevolve_engine.display.progress import Display


@click.command(epilog="""\b
Examples:
  coevolve-engine demo                          ./coevolve-demo, 8 rounds (6 min 10 s measured on a quiet
                                                2-core CPU machine; docs/run.md, "The demo")
  coevolve-engine demo --dir /tmp/d --rounds 4  fewer rounds; a rerun with more adds the missing ones
  coevolve-engine demo --quick                  2 short rounds on a few tasks, what the tests run (40 s
                                                measured on the quiet 2-core machine)""")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("coevolve-demo"),
              show_default=True, help="Where the store, the policy, the checkpoints and run.toml go.")
@click.option("--rounds", type=ROUNDS, default=None, help="Rounds to finish. [default: 8; 2 --quick]")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the tasks, the policy and the run.")
@click.option("--quick", is_flag=True, help="A small, fast demo (few tasks, 2 short rounds).")
@click.option("--set", "-s", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a setting of the demo's run.toml (as `coevolve-engine run --set`).")
@click.option("--verbose", "-v", is_flag=True,
              help="Also show every detail line (each GRPO group written, each verdict); they always go to "
                   "DIR/run.log.")
def demo(folder: Path, rounds: int | None, seed: int, quick: bool, overrides: tuple[str, ...], verbose: bool) -> None:
    """Watch an agent and its tasks co-evolve: offline, no GPU, no API key.

    Builds a store of calc tasks (training tasks covering part of the skill space, held-out tasks covering all
    of it), a tiny Qwen3 policy, and runs `coevolve-engine run` on them: a supervised warm-up, then rounds of
    GRPO training, held-out evaluation, signals, failure patterns, new tasks synthesized around them,
    validation and new weights. Run it again to resume or extend it.

    On a terminal each long phase shows a progress bar and each round ends with one line; with the output
    redirected, plain lines every half minute. At the end: the table of rounds, the held-out curve and
    DIR/report.html.
    """
    folder.mkdir(parents=True, exist_ok=True)
    display = Display(verbose=verbose, log=folder / "run.log")
    try:
        db, config = run_demo(folder, quick=quick, rounds=rounds, seed=seed, overrides=overrides, echo=display)
    except ConfigError as exc:  # refused before a round: name the --set that gave the refused value
        raise blame_override(exc, overrides) from None
    finally:
        display.close()
    with Store(db, read_only=True) as store:
        table, cost = rounds_table(store, config), loop_cost(store)
        by_turns = held_out_by_turns(store)
        curve = held_out_curve(store)
    click.echo("\nRound by round (held-out success, flagged rollouts by signal, patterns, accepted candidates, "
               "seconds of training and of feedback work):")
    click.echo(render_table(table))
    click.echo(cost)
    click.echo("\nHeld-out success by user turns per task (every turn of an episode is played):")
    click.echo(render_table(by_turns))
    click.echo("\nHeld-out success against training step (greedy, after the warm-up and after each round; '|' marks "
               "the starting policy, the last column the change from it in points):")
    click.echo(curve)
    report = write_report(folder, db, config)
    click.echo(f"""
The report: {report}  (open it in a browser; the result first, the details folded below)
Every detail line of the run is in {folder / 'run.log'}.
The store is {db}. Every figure above is a row of run_rounds; try:
  coevolve-engine query --db {db} "select * from run_rounds"
  coevolve-engine query --db {db} "select label, success_rate, tasks from evaluations order by created_at"
  coevolve-engine query --db {db} "select round, reason from weight_sets order by round"
  coevolve-engine candidates --db {db} --verdict accepted
  coevolve-engine drift --db {db}""")


def register(group: click.Group) -> None:
    group.add_command(demo)
