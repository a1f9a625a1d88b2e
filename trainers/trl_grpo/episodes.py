"""Whole episodes for TRL's ``rollout_func``: the one episode player, with the model being trained as the policy.

``play_episodes`` starts one episode per row of a GRPO step (rows arrive with each group's K copies together),
plays all of them to their end with a ``TokenPolicy`` on the trained model (one ``generate`` per round of answers
across every open episode, at the rollout temperature), and returns what TRL needs:

- ``prompt_ids``: the episode's opening (system prompt, tools, first user message, generation prompt);
- ``completion_ids``: everything after it, in order: each answer as sampled, then the tokens the chat template
  puts after it (tool results, the next user message, the next generation prompt); the last answer ends it;
- ``env_mask``: 1 on the tokens the policy sampled, 0 elsewhere (TRL multiplies its loss mask by it);
- ``logprobs``: the sampling log-probability of each sampled token (0 where the mask is 0);
- ``episode_reward``: the environment's verdict on the whole task, for ``environment_reward``.
"""

from __future__ import annotations

import json
from typing import Any

from coevolve_engine.adapters.agents.base import Agent, EpisodeLimits
from coevolve_engine.core.rollout import Rollout
from coevolve_engine.core.environment import Environment


def task_prompt(environment: Environment, task: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages an episode of ``task`` opens with: the episode's system prompt, if any, and its first user
    message (what a dataset row shows; the player renders them with the episode's own tools)."""
    spec = task["spec"] if isinstance(task["spec"], dict) else json.loads(task["spec"])
    episode = environment.start(task["task_id"], spec)
    try:
        prompt = [{"role": "user", "content": episode.next_turn() or ""}]
        if system := episode.system_prompt():
            prompt.insert(0, {"role": "system", "content": system})
    finally:
        episode.close()
    return prompt


class TrainingPolicy(Agent):
    """The trained model as a batched agent of the player (sampling at the rollout temperature)."""

    batched = True

    def __init__(self, model: Any, tokenizer: Any, config: Any, policy: str) -> None:
        from coevolve_engine.adapters.agents.local_agent import TokenPolicy

        self.policy = policy
        self.limits = EpisodeLimits(max_steps=config.max_steps,
                                    max_model_calls_per_turn=config.max_model_calls_per_turn)
        self.core = TokenPolicy(model, tokenizer, temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                                max_episode_tokens=config.max_completion_length,
                                chat_template_kwargs=config.chat_template_kwargs, logprobs=True,
                                # each process plays its own number of turns: no generate waits for the others
                                generate_kwargs={"synced_gpus": False})

    def respond(self, plays: list[Any]) -> list[Any]:
        return self.core.respond(plays)

    def complete(self, messages, tools):  # pragma: no cover - the player always calls respond
        raise NotImplementedError("TrainingPolicy answers through respond()")


def play_episodes(environment: Environment, rows: list[dict[str, Any]], model: Any, tokenizer: Any, config: Any, *,
                  policy: str) -> tuple[dict[str, Any], list[Rollout]]:
    """Play one episode per row (``task_id``, ``spec`` as JSON) with ``model``; returns (the ``rollout_func``
    output, the rollouts as the store records them)."""
    from coevolve_engine.adapters.agents.player import play_all, start_play

    agent = TrainingPolicy(model, tokenizer, config, policy)
    plays = [start_play(environment, row["task_id"], json.loads(row["spec"]), agent) for row in rows]
    rollouts = play_all(plays, agent)
    output: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                              "episode_reward": []}
    eos = tokenizer.eos_token_id
    for play, rollout in zip(plays, rollouts):
        tokens = play.state.get("tokens")
        if tokens is None or not tokens.completion_ids:  # the episode ended before the policy answered
            prompt, completion, mask, logprobs = [eos], [eos], [0], [0.0]
        else:
            keep = len(tokens.mask) - tokens.mask[::-1].index(1) if 1 in tokens.mask else len(tokens.mask)
            prompt, completion = tokens.prompt_ids, tokens.completion_ids[:keep]  # end on the last answer
            mask, logprobs = tokens.mask[:keep], tokens.logprobs[:keep]
        output["prompt_ids"].append(list(prompt))
        output["completion_ids"].append(list(completion))
        output["env_mask"].append(list(mask))
        output["logprobs"].append(list(logprobs))
        output["episode_reward"].append(float(rollout.reward))
    return output, rollouts
