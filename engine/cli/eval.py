"""eval: score a model on a benchmark category's held-out tasks, BFCL's way, stored per task."""

from __future__ import annotations

import json
from pathlib import Path

import click

from coevolve_engine.adapters.agents.base import MAX_STEPS
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.cli.options import Count, SEED, connect, create_option, db_option, endpoint_options, require_store, wait_option
from coevolve_engine.cli.rollout import episode_options, make_agent
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import Store
from coevolve_engine.eval.heldout import evaluate_agent, hold_out_category, select_eval_tasks


@click.command(name="eval", epilog="""\b
Examples:
  coevolve-engine eval --env bfcl --category multi_turn_base --model hosted_vllm/Qwen/Qwen3-4B \\
      --api-base http://127.0.0.1:8000/v1
  coevolve-engine eval --env bfcl --category multi_turn_base --model runs/r1/checkpoints/round-3 --tasks 50
  coevolve-engine eval --env bfcl --category multi_turn_base --model reference --format json
\b
Run it again on the same model, tasks and settings and the stored results are reused (an interrupted run
goes on with the tasks it had not finished). Per task:
  coevolve-engine query "select task_id, success, reason from eval_results where eval_id = 'eval-...'\"""")
@click.option("--env", "env_name", required=True, help="A registered environment, e.g. bfcl.")
@click.option("--category", default=None,
              help="The benchmark category to evaluate on, e.g. multi_turn_base. Its shipped tasks are imported "
                   "as eval tasks (split 'eval') when the store has none of them. Default: every eval task of "
                   "ENV in the store, scored per category.")
@click.option("--model", required=True,
              help="A litellm model string (openai/..., hosted_vllm/..., any provider), a local checkpoint "
                   "directory, or 'reference' (each task's ground truth: checks the scoring).")
@click.option("--tasks", "n_tasks", type=Count(min=1), default=None,
              help="Evaluate on at most this many eval tasks, a fixed subset drawn with --seed (default: all).")
@click.option("--task-id", "task_ids", multiple=True, help="Only these eval tasks (repeatable).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the --tasks subset.")
@click.option("--concurrency", type=Count(min=1), default=4, show_default=True,
              help="Tasks played at once.")
@click.option("--max-steps", type=Count(min=0), default=MAX_STEPS, show_default=True,
              help="Environment steps per episode; exceeding them fails the task; 0: no cap (BFCL).")
@episode_options
@click.option("--max-tokens", type=Count(min=1), default=1024, show_default=True,
              help="Tokens per model answer.")
@click.option("--label", default=None, help="A name stored with the evaluation, e.g. 'baseline'.")
@click.option("--format", "format_", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="How to print the scores.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@endpoint_options
@create_option
@db_option
@wait_option
def eval_command(env_name: str, category: str | None, model: str, n_tasks: int | None, task_ids: tuple[str, ...],
                 seed: int, concurrency: int, max_steps: int, max_model_calls_per_turn: int,
                 chat_template_kwargs: dict | None, max_tokens: int, label: str | None, format_: str,
                 progress: bool, timeout: float, retries: int, api_base: str | None, api_key: str | None,
                 create: bool, db: Path, wait: float) -> None:
    """Evaluate a model on the store's held-out tasks, each a full episode, and print the accuracy per category.

    Decoding is greedy (temperature 0) and every user turn of a task is played as BFCL's own inference loop
    plays it (a turn ends at an answer without tool calls or with one that does not decode; --max-steps, when
    above 0, caps an episode's environment steps). The environment scores each task
    with the benchmark's own rules (BFCL: its multi-turn checker), and each result is stored in eval_results
    as soon as its task ends. A task cut short by a fault (server error, timeout) is not stored: the command
    then exits non-zero, and running it again plays only the tasks without a result.
    """
    def note(message: str) -> None:
        click.echo(message, err=format_ == "json")

    require_store(db, create)
    environment = load_environment(env_name)
    where = f"{env_name} eval tasks" + (f" of category {category}" if category else "")
    with Store(db, read_only=category is None, wait=wait) as store:  # importing a category needs to write
        among = None
        if category is not None:
            among, imported = hold_out_category(store, environment, env_name, category)
            if imported:
                note(f"imported {imported} {env_name} {category} tasks as eval tasks (split 'eval')")
        tasks = select_eval_tasks(store, env_name, among=among, category=category, task_ids=task_ids,
                                  limit=n_tasks, seed=seed)
    if among is not None and not task_ids and not n_tasks and len(tasks) < len(among):
        note(f"{len(tasks)} of the {len(among)} {env_name} {category} tasks are in the store as eval tasks; "
             "evaluating those (not the whole category)")
    if not tasks:
        raise CoevolveError(f"no {where} in {db}; pass --category, or import some with "
                            f"`coevolve-engine tasks import {env_name} --category C --split eval`")
    policy = str(Path(model).resolve()) if Path(model).is_dir() else model
    agent = make_agent(connect(model, api_base, api_key), temperature=0.0, max_tokens=max_tokens,
                       timeout=timeout, retries=retries, max_steps=max_steps, policy=policy,
                       max_model_calls_per_turn=max_model_calls_per_turn, chat_template_kwargs=chat_template_kwargs)
    settings = {"protocol": "episode", "temperature": 0.0, "max_steps": max_steps, "max_tokens": max_tokens,
                "max_model_calls_per_turn": agent.limits.max_model_calls_per_turn}
    if chat_template_kwargs:
        settings["chat_template_kwargs"] = chat_template_kwargs
    run = evaluate_agent(db, environment, env_name, tasks, agent, settings=settings, label=label, category=category,
                         concurrency=concurrency, progress=progress, wait=wait)
    sql = f"select task_id, success, reward, reason from eval_results where eval_id = '{run.eval_id}'"
    if run.faults:
        for task_id, error in run.faults[:5]:
            note(f"  {task_id}: {error}")
        raise click.ClickException(
            f"{len(run.faults)} tasks cut short by faults; rerun to retry ({run.ran} of {run.tasks} tasks stored "
            f"now, {run.resumed} before, under {run.eval_id})")
    if run.reused:
        note(f"reused the stored evaluation {run.eval_id}: nothing was run")
    elif run.resumed:
        note(f"resumed {run.eval_id}: {run.resumed} tasks were stored by an earlier run, {run.ran} played now")
    _print_scores(run, sql, db, format_)


def _print_scores(run, sql: str, db: Path, format_: str) -> None:
    if format_ == "json":
        click.echo(json.dumps({
            "eval_id": run.eval_id, "policy": run.policy, "env": run.env, "reused": run.reused,
            "categories": [{"category": s.category, "accuracy": s.accuracy, "correct_count": s.correct_count,
                            "total_count": s.total_count} for s in run.categories],
            "per_task_sql": sql,
        }, indent=2))
        return
    click.echo(_score_table(run.categories))
    click.echo(f"eval_id {run.eval_id}   policy {run.policy}")
    click.echo(f'per task: coevolve-engine query "{sql}" --db {db}')


def _score_table(scores) -> str:
    """BFCL's score-file header per category, accuracy as the leaderboard shows it (percent, 2 decimals)."""
    rows = [(s.category, f"{s.accuracy * 100:.2f}%", str(s.correct_count), str(s.total_count)) for s in scores]
    if len(scores) > 1:
        correct, total = sum(s.correct_count for s in scores), sum(s.total_count for s in scores)
        rows.append(("overall", f"{correct / total * 100:.2f}%", str(correct), str(total)))
    header = ("category", "accuracy", "correct_count", "total_count")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                               for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
                     for row in [header, *rows])


def register(group: click.Group) -> None:
    group.add_command(eval_command)
