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

Where the chat template drops earlier turns' reasoning (Qwen3 thinking on), an episode's ids are several
segments (``chat_tokens``): each is a faithful record of what was generated in the context it was generated in,
and each is trained as its own sequence with the episode's advantage. TRL computes rewards and advantages per
episode, so the ``rollout_func`` output above holds each episode's first segment, and ``episode_segments`` all
of them; ``segment_batch`` then rebuilds TRL's batch with one row per segment. The loss weight: with TRL's
token-level losses (``dapo``, its default, ``bnpo``, ``cispo``, ``vespo``) every sampled token weighs the same,
so an episode weighs by its sampled tokens however many segments hold them; with the losses that average per
sequence (``grpo``, ``sapo``, ``luspo``; ``dr_grpo`` divides by the rows) each segment is a sequence, as TRL
weighs sequences.
"""

from __future__ import annotations

import json
from typing import Any

from coevolve_engine.adapters.agents.base import Agent, EpisodeLimits
from coevolve_engine.adapters.agents.local_agent import TokenPolicy
from coevolve_engine.adapters.agents.player import play_all, start_play
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
        self.policy = policy
        self.limits = EpisodeLimits(max_steps=config.max_steps,
                                    max_model_calls_per_turn=config.max_model_calls_per_turn)
        self.core = TokenPolicy(model, tokenizer, temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                                max_episode_tokens=config.max_completion_length,
                                chat_template_kwargs=config.chat_template_kwargs, logprobs=True,
                                generation_batch_size=config.generation_batch_size,
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
    agent = TrainingPolicy(model, tokenizer, config, policy)
    plays = [start_play(environment, row["task_id"], json.loads(row["spec"]), agent) for row in rows]
    rollouts = play_all(plays, agent)
    output: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                              "episode_reward": [], "episode_segments": []}
    for play, rollout in zip(plays, rollouts):
        segments = episode_segments(play.state.get("tokens"), tokenizer.eos_token_id)
        prompt, completion, mask, logprobs = segments[0]
        output["prompt_ids"].append(prompt)
        output["completion_ids"].append(completion)
        output["env_mask"].append(mask)
        output["logprobs"].append(logprobs)
        output["episode_reward"].append(float(rollout.reward))
        output["episode_segments"].append(segments)
    return output, rollouts


def episode_segments(tokens: Any, eos: int) -> list[tuple[list[int], list[int], list[int], list[float]]]:
    """The (prompt ids, completion ids, mask, logprobs) of each segment of an episode's tokens, each completion
    ending on the segment's last answer; one empty row when the policy never answered."""
    rows = []
    for segment in tokens.segments() if tokens is not None else []:
        if 1 not in segment.mask:  # nothing sampled in it (the episode ended as it began)
            continue
        keep = len(segment.mask) - segment.mask[::-1].index(1)
        rows.append((list(segment.prompt_ids), list(segment.completion_ids[:keep]), list(segment.mask[:keep]),
                     list(segment.logprobs[:keep])))
    return rows or [([eos], [eos], [0], [0.0])]


def segment_batch(grpo: Any, batch: dict[str, Any], inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """TRL's scored batch of a step (one row per episode: its first segment) with one row per segment of every
    episode instead, each with its episode's advantage; the reference and old log-probabilities TRL computed are
    computed again for the new rows. Unchanged where no episode, on any process, has more than one segment.

    ``inputs`` are the step's rows, holding ``episode_segments`` (TRL copies the ``rollout_func`` fields onto
    them). Every process takes the same path (its decision is gathered) and runs the same forwards per
    log-probability (micro-batches of ``per_device_train_batch_size`` rows over the same row count on every process),
    so no collective depends on how many segments a process holds. TRL splits the batch into
    ``steps_per_generation`` equal parts (one per micro-batch): empty rows (mask 0, advantage 0) pad it to the most
    rows any process holds, rounded up to a multiple. TRL's logged completion lengths stay those of the first segments."""
    import torch
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import pad

    episodes = [row["episode_segments"] for row in inputs]
    device = grpo.accelerator.device
    most = grpo.accelerator.gather(torch.tensor([max(map(len, episodes))], device=device)).max().item()
    if most <= 1:
        return batch
    rows = [(episode, segment) for episode, segments in enumerate(episodes) for segment in segments]
    # every process holds as many rows (so runs as many forwards), a multiple of steps_per_generation (TRL splits
    # the batch evenly): empty rows, no loss
    widest = grpo.accelerator.gather(torch.tensor([len(rows)], device=device)).max().item()
    rows += [(None, ([grpo._tokenizer.pad_token_id], [grpo._tokenizer.eos_token_id], [0], [0.0]))] * (
        widest - len(rows) + -widest % grpo.args.steps_per_generation)
    multiple, pad_id = grpo.pad_to_multiple_of, grpo._tokenizer.pad_token_id

    def padded(values, value, side, dtype=None):
        return pad([torch.tensor(v, dtype=dtype) for v in values], padding_value=value, padding_side=side,
                   pad_to_multiple_of=multiple).to(device)

    prompts, completions, masks, logprobs = zip(*(segment for _, segment in rows))
    out = dict(batch)
    out["prompt_ids"] = padded(prompts, pad_id, "left")
    out["prompt_mask"] = padded([[1] * len(p) for p in prompts], 0, "left")
    out["completion_ids"] = padded(completions, pad_id, "right")
    out["completion_mask"] = padded([[1] * len(c) for c in completions], 0, "right")
    out["tool_mask"] = padded(masks, 1, "right")
    if "sampling_per_token_logps" in batch:
        out["sampling_per_token_logps"] = padded(logprobs, 0.0, "right", torch.float32)
    if grpo.mask_truncated_completions:
        ends = [*grpo.eos_token_ids, pad_id]
        kept = torch.tensor([ids[-1] in ends for ids in completions], device=device).int().unsqueeze(1)
        out["completion_mask"], out["tool_mask"] = out["completion_mask"] * kept, out["tool_mask"] * kept
    advantages = batch["advantages"]
    out["advantages"] = torch.stack([advantages[e] if e is not None else advantages.new_zeros(())
                                     for e, _ in rows])
    out["num_items_in_batch"] = grpo.accelerator.gather((out["completion_mask"] * out["tool_mask"]).sum()).sum()
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    width = out["completion_ids"].size(1)

    def logps(model):
        # in micro-batches of TRL's per_device_train_batch_size rows, as TRL computes its own
        return grpo._get_per_token_logps_and_entropies(model, ids, attention, width,
                                                       batch_size=grpo.args.per_device_train_batch_size)[0]

    with torch.no_grad(), disable_gradient_checkpointing(grpo.model, grpo.args.gradient_checkpointing_kwargs):
        if "old_per_token_logps" in batch:
            out["old_per_token_logps"] = logps(grpo.model)
        if "ref_per_token_logps" in batch:
            if grpo.ref_model is not None:
                out["ref_per_token_logps"] = logps(grpo.ref_model)
            else:  # a PEFT adapter: the reference is the model without it, as TRL computes it
                from trl.trainer.utils import use_adapter

                model = grpo.accelerator.unwrap_model(grpo.model)
                with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                    out["ref_per_token_logps"] = logps(grpo.model)
    return out
