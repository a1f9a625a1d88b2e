"""run: the co-evolution loop, resumable, from a TOML configuration."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import click

from coevolve_engine.cli.options import ROUNDS, db_option, wait_option
from coevolve_engine.cli.output import render_table
from coevolve_engine.core.outputs import check_output
from coevolve_engine.core.store import Store
from coevolve_engine.curriculum import STRATEGIES, config_help
from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.config_files import blame_override, load_config
from coevolve_engine.loop.renamed_keys import DeprecatedSetting
from coevolve_engine.loop.phases import help_text
from coevolve_engine.loop.run import RunLoop
from coevolve_engine.loop.summary import loop_cost, rounds_table
from coevolve_engine.loop.template import render_template
from coevolve_engine.loop.train_round import quiet_libraries
from coevolve_engine.display.progress import Display
from coevolve_engine.trainers import TRAINERS


def _plugin_help(config: RunConfig) -> dict[str, list[tuple[str, object, str]]]:
    """Settings of the configuration's trainer, warm-up trainer and strategy (a plugin's too), for the printed
    template."""
    rows: dict[str, list[tuple[str, object, str]]] = {}
    for key, name in (("trainer.options", config.trainer.name), ("warmup.options", config.warmup.trainer)):
        try:
            trainer = TRAINERS.load(name)
        except Exception:  # noqa: BLE001 - a trainer whose extra is not installed just gets no listing
            continue
        options = getattr(trainer, "options_class", None)
        if options is None:
            continue
        rows[key] = [(f.name, f.default, f"{name}: {f.metadata.get('help', '')}") for f in dataclasses.fields(options)
                     if f.name not in trainer.run_sets and f.default is not dataclasses.MISSING]
    strategy = config.curriculum.strategy
    try:
        rows["curriculum.settings"] = [(n, d, f"{strategy}: {h}") for n, d, h in config_help(STRATEGIES.load(strategy))]
    except Exception:  # noqa: BLE001 - a strategy that cannot be loaded just gets no listing
        pass
    return rows


RUN_HELP = """Co-evolve the policy and its tasks: rounds of weights, train, eval, signals, patterns, synthesize, validate.

\b
Each round R:
{phases}
(with synthesis.synthesizer = "none" a round is weights, train and eval only: no feedback)

Every phase records in the store (table run_phases) when it finished, with what it produced. Stop the
run at any moment, even with kill -9, and run the same command again: it resumes at the first unfinished
phase, and nothing is lost or written twice (an interrupted train phase is redone from the round's
starting checkpoint, after removing the rollouts it had written, and only those). Each round's checkpoint is recorded
in rounds.checkpoint; the next round trains from it.
"""


def _load(config_path: Path | None, overrides: tuple[str, ...], check: bool = True):
    """``load_config``, each moved key it read said on standard error as the renamed options say theirs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecatedSetting)
        try:
            return load_config(config_path, overrides, check=check)
        finally:
            for warning in caught:
                if issubclass(warning.category, DeprecatedSetting):
                    click.echo(f"deprecated: {warning.message}", err=True)
                else:
                    warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


@click.command(help=RUN_HELP.format(phases=help_text()), epilog="""\b
Examples:
  coevolve-engine run --print-config > run.toml       every setting, its help and its default
  coevolve-engine run --config run.toml               run (or resume) until `rounds` rounds are finished
  coevolve-engine run --config run.toml --rounds 4    two more rounds after a finished 2-round run
  coevolve-engine run --config run.toml --set trainer.steps_per_round=4 --set trainer.options.learning_rate=1e-3
  coevolve-engine run --config recipes/no_rare.toml --print-config   a recipe merged over the one it extends
\b
Watch it from another shell (the store is free between units of work):
  coevolve-engine query "select round, phase, status, attempts, seconds from run_phases order by all"
  coevolve-engine query "select round, policy, first_step, checkpoint, status from rounds"
  coevolve-engine query "select round, strategy, reason from weight_sets order by round\"""")
@click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The run's TOML file (see --print-config). Without it, the defaults plus --set.")
@click.option("--set", "-s", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a setting, KEY dotted as in the file (trainer.options.learning_rate=1e-3); "
                   "VALUE is a TOML value or a bare word. Repeat for several.")
@click.option("--rounds", type=ROUNDS, default=None,
              help="Shortcut for --set rounds=N: the run stops once N rounds are finished.")
@click.option("--print-config", is_flag=True,
              help="Print the configuration (every setting with its help) as TOML and exit.")
@click.option("--verbose", "-v", is_flag=True,
              help="Show every detail line (each GRPO group written, each verdict), not only a bar per phase and a "
                   "line per phase and round.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append every line, details included, to this file (with times).")
@db_option
@wait_option
def run(config_path: Path | None, overrides: tuple[str, ...], rounds: int | None, print_config: bool, verbose: bool,
        log_path: Path | None, db: Path, wait: float) -> None:
    if rounds is not None:
        overrides = (*overrides, f"rounds={rounds}")
    if print_config:
        config = _load(config_path, overrides, check=False)
        click.echo(render_template(config, _plugin_help(config)), nl=False)
        return
    config = _load(config_path, overrides)
    quiet_libraries()

    if log_path is not None:  # appended to, line by line: never the store, never a file of another kind
        check_output(log_path, "log", db=db)
    display = Display(verbose=verbose, log=log_path)
    try:
        report = RunLoop(db, config, wait=wait, echo=display).run()
    except ConfigError as exc:  # refused before a round: name the --set that gave the refused value
        raise blame_override(exc, overrides) from None
    finally:
        display.close()
    if report.done:
        with Store(db, read_only=True, wait=wait) as store:
            table, cost = rounds_table(store, config), loop_cost(store)
        click.echo(f"\n{report.rounds} of {config.rounds} rounds finished in {db} ({len(report.done)} phases run now, "
                   f"{report.skipped} already done):")
        click.echo(render_table(table))
        click.echo(cost)
        click.echo("Look at them:\n"
                   f"  coevolve-engine query --db {db} \"select round, phase, attempts, round(seconds, 1) AS s, "
                   "outputs from run_phases order by round, started_at\"\n"
                   f"  coevolve-engine query --db {db} \"select * from run_rounds\"   (the table above, default signal "
                   "constants; run_rounds_with(...) takes the run's)\n"
                   f"  coevolve-engine query --db {db} \"select round, strategy, reason from weight_sets\"\n"
                   f"  coevolve-engine candidates --db {db} --verdict accepted")


def register(group: click.Group) -> None:
    group.add_command(run)
