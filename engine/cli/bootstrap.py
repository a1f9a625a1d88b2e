"""bootstrap: the initial task set D_0 from an explorer acting freely in the environment."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from coevolve_engine.adapters.agents.base import MAX_EXPLORE_STEPS
from coevolve_engine.cli.options import Count, Number, SEED, connect, db_option, endpoint_options, long_job, wait_option
from coevolve_engine.cli.synthesis import kinds_option
from coevolve_engine.display.progress import Display, detail, progress as bar
from coevolve_engine.core.endpoint import CallSettings
from coevolve_engine.synthesis.bootstrap import D0_QUERY, UnguidedSynthesizer, bootstrap as build
from coevolve_engine.synthesis.validation import NOVELTY_THRESHOLD, ValidationOptions


@click.command(epilog="""\b
Examples:
  coevolve-engine bootstrap --env bfcl --explorer-model hosted_vllm/Qwen/Qwen3-8B \\
      --api-base http://127.0.0.1:8000/v1 --n 100
  coevolve-engine bootstrap --explorer-model openai/gpt-4o-mini --model openai/gpt-4o --n 20 --seed 3
\b
Each world is a starting state built from the environment itself (for BFCL: a combination of its API
classes with a generated initial state), never an eval task's. The explorer acts there with no guidance;
the same abstraction and validation as `synthesize --synthesizer llm` turn what it did into tasks.
Rerunning adds nothing once N are accepted; a killed run resumes where it stopped.""")
@click.option("--env", default="bfcl", show_default=True, help="The environment to explore (a registered name).")
@click.option("--explorer-model", required=True, help="The model that acts in the environment (litellm string).")
@click.option("--model", default=None,
              help="The model that abstracts tasks from each exploration (default: --explorer-model).")
@click.option("--n", "n", type=Count(min=1), default=100, show_default=True,
              help="Tasks to accept into D_0 (the paper's N).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Picks the worlds; the same seed, the same worlds.")
@click.option("--max-worlds", type=Count(min=1), default=None,
              help="Give up after exploring this many worlds (default: 3 x N).")
@click.option("--tasks-per-world", type=Count(min=1), default=1, show_default=True,
              help="Tasks to abstract from each exploration.")
@click.option("--max-explore-steps", type=Count(min=1), default=MAX_EXPLORE_STEPS, show_default=True,
              help="Tool calls the explorer may make in one exploration.")
@endpoint_options
@click.option("--explorer-api-base", default=None, help="Base URL for --explorer-model (default: --api-base).")
@click.option("--novelty-threshold", type=Number(0, 1, min_open=True), default=NOVELTY_THRESHOLD,
              show_default=True,
              help="Reject a task whose prompt has a cosine similarity at least this high to a stored training "
                   "task's or to one accepted before it. A task whose prompt is an eval task's is always rejected.")
@click.option("--no-cache", is_flag=True, help="Ask the models again even for requests answered before.")
@kinds_option()
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show a progress bar on a terminal, a line per explored world otherwise.")
@long_job("bootstrap", can_create=True)
@db_option
@wait_option
def bootstrap(env: str, explorer_model: str, model: str | None, n: int, seed: int, max_worlds: int | None,
              tasks_per_world: int, max_explore_steps: int, api_base: str | None, api_key: str | None,
              timeout: float, retries: int, explorer_api_base: str | None, novelty_threshold: float,
              no_cache: bool, kinds: dict[str, float] | None, progress: bool, db: Path, wait: float) -> None:
    """Build D_0, the initial training tasks, by unguided exploration of the environment.

    An explorer model acts in worlds of the environment that come from no eval task; each exploration is
    abstracted into task drafts and validated (schema, ground-truth replay, novelty), until N tasks are
    accepted or the budget of worlds is spent. Accepted tasks join the store as split 'train'.
    """
    # a bar on a terminal; elsewhere (a log, CI) the line per explored world, as before
    display = Display(stream=sys.stderr, verbose=not sys.stderr.isatty())
    with bar(display if progress else print, "bootstrap", total=n, unit="task"):
        synthesizer = UnguidedSynthesizer(
            store_path=db, env=env, model=connect(model or explorer_model, api_base, api_key),
            explorer=connect(explorer_model, explorer_api_base or api_base, api_key, "--explorer-model"),
            calls=CallSettings(timeout, retries), tasks_per_world=tasks_per_world,
            max_explore_steps=max_explore_steps, cache=not no_cache, kinds=kinds)
        report = build(db, synthesizer=synthesizer, n=n, seed=seed, max_worlds=max_worlds,
                       validation=ValidationOptions(novelty_threshold=novelty_threshold), wait=wait,
                       progress=(lambda line: detail(display, line)) if progress else None)
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(report.rejected.items()))
    skipped = f" ({report.skipped} explored by an earlier run, skipped)" if report.skipped else ""
    click.echo(f"explored {report.explored} worlds of {report.env}{skipped}; {report.proposed} candidates proposed; "
               f"{report.accepted} accepted, {sum(report.rejected.values())} rejected"
               + (f" ({reasons})" if reasons else ""))
    if report.done:
        click.echo(f"D_0: {report.accepted_total} of {report.n} tasks in the store (split 'train')")
    else:
        click.echo(f"D_0: only {report.accepted_total} of {report.n} tasks in the store after {report.max_worlds} "
                   f"worlds; rerun with a larger --max-worlds to go on")
    click.echo(f'see them: coevolve-engine query "{D0_QUERY}" --db {db}')


def register(group: click.Group) -> None:
    group.add_command(bootstrap)
