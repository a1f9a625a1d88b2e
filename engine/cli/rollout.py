"""rollout: run an agent K times on tasks from the store and write the trajectories back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from coevolve_engine.adapters.agents import load_agent
from coevolve_engine.adapters.agents.base import MAX_MODEL_CALLS_PER_TURN, MAX_STEPS
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.cli.options import Count, Number, SEED, STEP, connect, db_option, endpoint_options, long_job, wait_option
from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.core.json_input import DuplicateKeyError, read_json
from coevolve_engine.rollouts.jobs import MAX_GROUP_SIZE, run_rollout_job


def make_agent(model: Endpoint | str, **options: Any):
    """The agent for MODEL (a model string, or an ``Endpoint``: with its server and key) from the command's agent
    options (``load_agent``: the ReferenceAgent for "reference", a LocalAgent for a local directory, otherwise a
    LiteLLMAgent)."""
    return load_agent(model, options)


def _template_kwargs(ctx, param, value: str | None) -> dict | None:
    if value is None:
        return None
    shown = value if len(value) <= 60 else value[:57] + "..."
    try:
        parsed = read_json(value, unique_keys=True)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg}): {shown!r}") from None
    except DuplicateKeyError as exc:
        raise click.BadParameter(f"{exc}: {shown!r}") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter(f"must be a JSON object, e.g. '{{\"enable_thinking\": false}}', got {shown!r}")
    return parsed


def episode_options(command):
    """The episode player's limits and template settings beyond --max-steps, shared by rollout and eval."""
    command = click.option(
        "--chat-template-kwargs", callback=_template_kwargs, default=None, metavar="JSON",
        help='Extra chat template variables for a local model, or extra_body for a server, e.g. '
             '\'{"enable_thinking": false}\'.')(command)
    return click.option(
        "--max-model-calls-per-turn", type=Count(min=1), default=MAX_MODEL_CALLS_PER_TURN, show_default=True,
        help="Model answers per user turn; a turn not ended by then fails the task (BFCL's inference: 21, its "
             "'count > 20').")(command)


@click.command(epilog="""\b
Examples:
  coevolve-engine rollout --env bfcl --category multi_turn_base --model hosted_vllm/Qwen/Qwen3-4B \\
      --api-base http://127.0.0.1:8000/v1 -k 8 --step 0 --tasks 32
  coevolve-engine rollout --env bfcl --model openai/gpt-4o-mini -k 4 --step 3 --task-id bfcl:multi_turn_base_0
  coevolve-engine rollout --env bfcl --category multi_turn_base --model reference -k 1 --step 0
\b
Then: coevolve-engine signals, or coevolve-engine query "select * from task_steps where step = 0".""")
@click.option("--env", "env_name", required=True, help="A registered environment, e.g. bfcl.")
@click.option("--category", default=None, help="Only tasks of this category (spec.category).")
@click.option("--model", required=True,
              help="A litellm model string (openai/..., hosted_vllm/..., any provider), a local model directory, "
                   "or 'reference' to play each task's reference solution (demonstrations for SFT warm-up).")
@click.option("--group-size", "-k", "group_size", type=Count(1, MAX_GROUP_SIZE), default=8, show_default=True,
              help="Rollouts per task (a group).")
@click.option("--step", type=STEP, required=True, help="The training step these rollouts belong to.")
@click.option("--tasks", "n_tasks", type=Count(min=1), default=None,
              help="Roll out on at most this many tasks, drawn in a seeded order (default: all).")
@click.option("--task-id", "task_ids", multiple=True, help="Only these tasks (repeatable).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the task order.")
@click.option("--concurrency", type=Count(min=1), default=4, show_default=True,
              help="Rollouts running at once.")
@click.option("--temperature", type=Number(min=0), default=0.9, show_default=True,
              help="Sampling temperature (the paper rolls out at 0.9 and evaluates at 0).")
@click.option("--max-tokens", type=Count(min=1), default=1024, show_default=True,
              help="Tokens per model answer.")
@click.option("--max-steps", type=Count(min=0), default=MAX_STEPS, show_default=True,
              help="Environment steps per episode; exceeding them fails the rollout; 0: no cap (BFCL).")
@episode_options
@click.option("--policy", default=None, help="Checkpoint id recorded on each trajectory (default: the model).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@endpoint_options
@long_job("rollout", can_create=True)
@db_option
@wait_option
def rollout(env_name: str, category: str | None, model: str, group_size: int, step: int, n_tasks: int | None,
            task_ids: tuple[str, ...], seed: int, concurrency: int, temperature: float, max_tokens: int,
            max_steps: int, max_model_calls_per_turn: int, chat_template_kwargs: dict | None, timeout: float,
            retries: int, api_base: str | None, api_key: str | None, policy: str | None, progress: bool, db: Path,
            wait: float) -> None:
    """Roll an agent out K times on tasks from the store and write every trajectory back.

    Each task's K rollouts form one group, written in one transaction as soon as its last rollout finishes,
    so an interrupted run keeps every finished group and a rerun at the same --step skips them. A rollout cut
    short by a fault outside the agent (server error, timeout) is kept with its error and flags no signal.
    """
    agent = make_agent(connect(model, api_base, api_key), temperature=temperature, max_tokens=max_tokens,
                       timeout=timeout, retries=retries, max_steps=max_steps, policy=policy,
                       max_model_calls_per_turn=max_model_calls_per_turn, chat_template_kwargs=chat_template_kwargs)
    summary = run_rollout_job(
        db, load_environment(env_name), env_name, agent, group_size=group_size, step=step, category=category,
        task_ids=list(task_ids), n_tasks=n_tasks, seed=seed, concurrency=concurrency, progress=progress, wait=wait,
    )
    if summary.skipped_tasks:
        click.echo(f"skipped {summary.skipped_tasks} tasks already rolled out at step {step}")
    mean = f"{summary.mean_reward:.3f}" if summary.mean_reward is not None else "-"
    click.echo(f"step {step}: {summary.rollouts} rollouts of {summary.tasks} tasks written; "
               f"{summary.successes} succeeded, mean reward {mean}, {summary.faults} cut short by faults")
    click.echo(f'see them: coevolve-engine query "select * from task_steps where step = {step}" --db {db}')


def register(group: click.Group) -> None:
    group.add_command(rollout)
