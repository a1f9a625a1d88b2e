"""Held-out evaluation of a local policy checkpoint: greedy, batched, every user turn played by the episode player.

    from coevolve_engine.eval.checkpoint import evaluate_policy, success_rate
    results = evaluate_policy("ckpt/round-2", env, tasks, max_new_tokens=64)   # [TaskResult] in task order
    print(success_rate(results))

Each task is played by the one episode player (``adapters.agents.player``) with the checkpoint as a batched
``TokenPolicy`` at temperature 0: the same rules, tool schemas, parser and limits as ``coevolve-engine eval``,
``rollout`` and training, so the same checkpoint gets the same verdicts wherever it is evaluated. The open
episodes of all tasks are answered together, one ``generate`` per round of answers, ``batch_size`` at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from coevolve_engine.adapters.agents.base import MAX_MODEL_CALLS_PER_TURN, MAX_STEPS, Agent, EpisodeLimits
from coevolve_engine.adapters.agents.local_agent import TokenPolicy
from coevolve_engine.adapters.agents.player import play_all, start_play
from coevolve_engine.core.device import load_policy
from coevolve_engine.core.environment import Environment
from coevolve_engine.eval.heldout import TaskResult


class ModelAgent(Agent):
    """An already loaded transformers model and tokenizer as a batched, greedy agent."""

    batched = True

    def __init__(self, model: Any, tokenizer: Any, *, policy: str, limits: EpisodeLimits, max_new_tokens: int,
                 chat_template_kwargs: dict[str, Any] | None = None, temperature: float = 0.0) -> None:
        self.policy, self.limits = policy, limits
        self.core = TokenPolicy(model, tokenizer, temperature=temperature, max_new_tokens=max_new_tokens,
                                chat_template_kwargs=chat_template_kwargs)

    def respond(self, plays: list[Any]) -> list[Any]:
        return self.core.respond(plays)

    def complete(self, messages, tools):  # pragma: no cover - the player always calls respond
        raise NotImplementedError("ModelAgent answers through respond()")


def evaluate_policy(checkpoint: str | Path | None, environment: Environment, tasks: Iterable[dict[str, Any]], *,
                    max_new_tokens: int = 64, max_model_calls_per_turn: int = MAX_MODEL_CALLS_PER_TURN,
                    max_steps: int = MAX_STEPS,
                    batch_size: int = 64, chat_template_kwargs: dict[str, Any] | None = None,
                    model: Any = None, tokenizer: Any = None) -> list[TaskResult]:
    """A ``TaskResult`` per task, in order, for the greedy policy of ``checkpoint``, every user turn played.

    max_new_tokens: tokens per model answer. max_model_calls_per_turn, max_steps: the episode limits
    (``EpisodeLimits``; exceeding either fails the task). ``model``/``tokenizer``: already loaded ones to use
    instead of loading ``checkpoint``.
    """
    from transformers import AutoTokenizer

    tasks = list(tasks)
    if not tasks:
        return []
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if model is None:  # on the accelerator when there is one, in the trainer's precision (core.device)
        model = load_policy(str(checkpoint))
    agent = ModelAgent(model, tokenizer, policy=str(checkpoint), max_new_tokens=max_new_tokens,
                       limits=EpisodeLimits(max_steps=max_steps, max_model_calls_per_turn=max_model_calls_per_turn),
                       chat_template_kwargs=chat_template_kwargs)
    results: list[TaskResult] = []
    for first in range(0, len(tasks), batch_size):
        chunk = tasks[first:first + batch_size]
        plays = [start_play(environment, task["task_id"], task["spec"], agent) for task in chunk]
        for rollout in play_all(plays, agent):
            results.append(TaskResult(rollout.task_id, float(rollout.reward), bool(rollout.success), rollout.reason,
                                      tuple(rollout.actions), rollout.messages))
    return results


def success_rate(results: Iterable[TaskResult]) -> float:
    """The share of successes in ``evaluate_policy``'s results (0.0 for none)."""
    results = list(results)
    return sum(1 for result in results if result.success) / len(results) if results else 0.0
