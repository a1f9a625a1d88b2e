"""Held-out evaluation of a local policy checkpoint: greedy, batched, played through the environment.

    from coevolve_engine.evaluate import evaluate_policy, success_rate
    results = evaluate_policy("ckpt/round-2", env, tasks, max_new_tokens=64)   # [(task_id, reward, success)]
    print(success_rate(results))

Each task is rendered exactly as the trl-grpo trainer shows it (``tool_environment.task_prompt`` and the TRL
tool schemas of the task's tool set, through the checkpoint's chat template), the model answers with greedy
decoding, and the ``<tool_call>`` blocks of its answer are parsed and executed in a real episode of the task.
Like a TRL rollout, a turn goes on while the model calls tools: the tool results are appended and the model
answers again, up to ``max_turns`` model turns. The episode's own score is the result. Tasks are batched
(left padding) per model turn, so a few hundred short tasks take seconds on a CPU for a tiny policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from coevolve_engine.adapters.calls import CallParseError, parse_tool_calls
from coevolve_engine.adapters.environments.base import Environment
from coevolve_engine.trainers.trl_grpo.tool_environment import (
    environment_classes,
    first_turn_spec,
    task_prompt,
    trl_tool_schemas,
)


def evaluate_policy(checkpoint: str | Path, environment: Environment, tasks: Iterable[dict[str, Any]], *,
                    max_new_tokens: int = 64, max_turns: int = 1, batch_size: int = 64,
                    model: Any = None, tokenizer: Any = None) -> list[tuple[str, float, bool]]:
    """(task_id, reward, success) per task, in order, for the greedy policy of ``checkpoint``.

    max_new_tokens: tokens per model turn. max_turns: model turns per task (like the trainer's
    max_tool_calling_iterations: 1 = the tool calls of the first answer only). ``model``/``tokenizer``:
    already loaded ones to use instead of loading ``checkpoint``. An answer that does not parse ends the
    turn; the episode scores what was executed.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tasks = list(tasks)
    if not tasks:
        return []
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint))
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    classes, tool_sets = environment_classes(environment, tasks)
    schemas = {name: trl_tool_schemas(cls) for name, cls in classes.items()}
    episodes, conversations = [], []
    for task in tasks:
        prompt, _ = task_prompt(environment, task)
        episode = environment.start(task["task_id"], first_turn_spec(task["spec"]))
        episode.next_turn()
        episodes.append(episode)
        conversations.append(prompt)
    active = list(range(len(tasks)))
    try:
        for _ in range(max_turns):
            if not active:
                break
            still = []
            for start in range(0, len(active), batch_size):
                chunk = active[start:start + batch_size]
                texts = [tokenizer.apply_chat_template(conversations[i], tools=schemas[tool_sets[tasks[i]["task_id"]]],
                                                       add_generation_prompt=True, tokenize=False) for i in chunk]
                encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                with torch.no_grad():
                    out = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False,
                                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                for i, ids in zip(chunk, out[:, encoded["input_ids"].shape[1]:]):
                    text = tokenizer.decode(ids, skip_special_tokens=False).split(tokenizer.eos_token)[0]
                    text = text.replace(tokenizer.pad_token, "")
                    try:
                        calls = parse_tool_calls(text)
                    except CallParseError:
                        calls = []
                    if not calls:
                        episodes[i].end_turn(text)
                        continue
                    conversations[i] = conversations[i] + [{"role": "assistant", "content": "", "tool_calls": [
                        {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in calls]}]
                    for call in calls:
                        observation = episodes[i].execute(call)
                        conversations[i].append({"role": "tool", "name": call.name, "content": observation.content})
                    still.append(i)
            active = still
        results = []
        for task, episode in zip(tasks, episodes):
            score = episode.score()
            results.append((task["task_id"], float(score.reward), bool(score.success)))
            episode.close()
        return results
    finally:
        if was_training:
            model.train()


def success_rate(results: list[tuple[str, float, bool]]) -> float:
    """The share of successes in ``evaluate_policy``'s results (0.0 for none)."""
    return sum(1 for _, _, success in results if success) / len(results) if results else 0.0
