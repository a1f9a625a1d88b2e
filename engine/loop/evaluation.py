"""The eval phase: the round's checkpoint (and, in round 0, the policy it started from) on the store's eval
tasks, greedy, every user turn played with the run's ``[episode]`` limits. An evaluation already stored for the
same policy, tasks and settings is reused, not played again."""

from __future__ import annotations

from typing import Any

from coevolve_engine.eval.checkpoint import evaluate_policy
from coevolve_engine.eval.heldout import eval_id, eval_tasks, find_evaluation, record_evaluation
from coevolve_engine.loop.context import RunContext
from coevolve_engine.loop.ledger import round_row, round_steps
from coevolve_engine.loop.summary import pct
from coevolve_engine.display.progress import advance


def evaluate(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    c = run.config
    with run.store(read_only=True) as store:
        tasks = eval_tasks(store, c.env, limit=c.eval.max_tasks or None, seed=c.seed)
        row = round_row(store, round_)
    if not tasks:
        return {"skipped": f"no {c.env} eval tasks (import some with --split eval)"}
    first, last = round_steps(run, round_)
    outputs: dict[str, Any] = {"tasks": len(tasks)}
    if round_ == 0:
        start = _evaluate_policy(run, row["policy"], tasks, None, "start", first - 1, label)
        outputs.update(start_eval_id=start.eval_id, start_success_rate=round(start.success_rate, 4))
    done = _evaluate_policy(run, row["checkpoint"], tasks, round_, f"round {round_}", last, label)
    outputs.update(eval_id=done.eval_id, success_rate=round(done.success_rate, 4))
    return outputs


def describe_eval(o: dict[str, Any]) -> str:
    if o.get("skipped"):
        return o["skipped"]
    start = f"start {pct(o['start_success_rate'])} -> " if "start_success_rate" in o else ""
    return f"held-out success {start}{pct(o['success_rate'])} on {o['tasks']} eval tasks"


def _evaluate_policy(run: RunContext, policy: str, tasks: list[dict[str, Any]], round_: int | None, name: str,
                     step: int, label: str):
    c, e = run.config, run.config.episode
    settings = {"decoding": "greedy", "player": "episode", "user_turns": "all", "max_new_tokens": e.max_new_tokens,
                "max_model_calls_per_turn": e.max_model_calls_per_turn, "max_steps": e.max_steps,
                "chat_template_kwargs": e.chat_template_kwargs}
    identifier = eval_id(policy, c.env, [t["task_id"] for t in tasks], settings)
    with run.store(read_only=True) as store:
        stored = find_evaluation(store, identifier)
    if stored is not None:
        run.detail(label, f"{name}: {stored.successes}/{stored.tasks} (stored evaluation {identifier})")
        return stored
    run.detail(label, f"evaluating {name} on {len(tasks)} eval tasks")
    results = evaluate_policy(policy, run.environment, tasks, max_new_tokens=e.max_new_tokens,
                              max_model_calls_per_turn=e.max_model_calls_per_turn, max_steps=e.max_steps,
                              chat_template_kwargs=e.chat_template_kwargs or None)
    with run.store() as store:
        evaluation = record_evaluation(store, policy=policy, env=c.env, settings=settings, results=results,
                                       round=round_, label=name, step=step)
    run.detail(label, f"{name}: {evaluation.successes}/{evaluation.tasks} solved")
    advance(run.echo, advance=evaluation.tasks)
    return evaluation
