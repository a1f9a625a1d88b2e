"""Held-out evaluation of a local policy checkpoint: greedy, batched, every user turn played through the environment.

    from coevolve_engine.evaluate import evaluate_policy, success_rate
    results = evaluate_policy("ckpt/round-2", env, tasks, max_new_tokens=64)   # [TaskResult] in task order
    print(success_rate(results))

Each task is rendered as the trl-grpo trainer shows it (the episode's system prompt and user message, and the
TRL tool schemas of the tools the episode offers, through the checkpoint's chat template), the model answers with
greedy decoding, and the ``<tool_call>`` blocks of its answer are parsed and executed in a real episode of the
task. Like a TRL rollout, a user turn goes on while the model calls tools: the tool results are appended and the
model answers again, up to ``max_turns`` model answers per user turn. An answer without tool calls (or the last
answer allowed) ends the user turn; the episode's next user message, if any, is appended and the model goes on,
so a multi-turn task is played whole, as the benchmark plays it (unlike training, where TRL plays the first user
turn only). An episode that asks for more than ``max_steps`` environment steps fails. The episode's own score is
the result. Tasks are batched (left padding) per model answer, so a few hundred short tasks take seconds on a
CPU for a tiny policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from coevolve_engine.adapters.calls import CallParseError, parse_tool_calls
from coevolve_engine.adapters.environments.base import Environment, Episode
from coevolve_engine.evaluations import TaskResult
from coevolve_engine.trainers.trl_grpo.tool_environment import tool_set_class, tool_set_name, trl_tool_schemas


class _ToolSchemas:
    """TRL's tool schemas per distinct tool set (the trainer's generated classes), built once per set."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self._schemas: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, task_id: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        name = tool_set_name(tools)
        if name not in self._schemas:
            self._schemas[name] = trl_tool_schemas(tool_set_class(self.environment, task_id, tools))
        return self._schemas[name]


class _Play:
    """One task's episode and conversation while it is evaluated."""

    def __init__(self, task: dict[str, Any], episode: Episode, schemas: _ToolSchemas) -> None:
        self.task_id = task["task_id"]
        self.episode = episode
        self.schemas = schemas
        self.conversation: list[dict[str, Any]] = []
        if system := episode.system_prompt():
            self.conversation.append({"role": "system", "content": system})
        self.actions: list[dict[str, Any]] = []
        self.answers_this_turn = 0
        self.failure: str | None = None
        self.done = False
        self._next_user_turn()

    def _next_user_turn(self) -> None:
        user = self.episode.next_turn()
        if user is None:
            self.done = True
            return
        self.conversation.append({"role": "user", "content": user})
        self.tools = self.schemas(self.task_id, self.episode.tools())
        self.answers_this_turn = 0

    def answer(self, text: str, *, max_turns: int, max_steps: int) -> None:
        """Play one model answer: run its tool calls, or end the user turn and move on to the next."""
        try:
            calls = parse_tool_calls(text)
        except CallParseError:
            calls = []
        self.answers_this_turn += 1
        if not calls:
            self.conversation.append({"role": "assistant", "content": text})
            self.episode.end_turn(text)
            self._next_user_turn()
            return
        self.conversation.append({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]})
        for call in calls:
            if len(self.actions) >= max_steps:
                self.failure, self.done = f"exceeded max_steps={max_steps} environment steps", True
                return
            observation = self.episode.execute(call)
            self.actions.append({"name": call.name, "arguments": call.arguments})
            self.conversation.append({"role": "tool", "name": call.name, "content": observation.content})
        if self.answers_this_turn >= max_turns:
            self.episode.end_turn(None)
            self._next_user_turn()

    def result(self) -> TaskResult:
        if self.failure is not None:
            return TaskResult(self.task_id, 0.0, False, self.failure, tuple(self.actions), self.conversation)
        score = self.episode.score()
        return TaskResult(self.task_id, float(score.reward), bool(score.success), score.reason,
                          tuple(self.actions), self.conversation)


def evaluate_policy(checkpoint: str | Path | None, environment: Environment, tasks: Iterable[dict[str, Any]], *,
                    max_new_tokens: int = 64, max_turns: int = 1, max_steps: int = 30, batch_size: int = 64,
                    model: Any = None, tokenizer: Any = None) -> list[TaskResult]:
    """A ``TaskResult`` per task, in order, for the greedy policy of ``checkpoint``, every user turn played.

    max_new_tokens: tokens per model answer. max_turns: model answers per user turn (like the trainer's
    max_tool_calling_iterations: 1 = the tool calls of the first answer only, then the next user turn).
    max_steps: environment steps (tool calls executed) per task; asking for more fails the task.
    ``model``/``tokenizer``: already loaded ones to use instead of loading ``checkpoint``. An answer that does
    not parse ends the user turn; the episode scores what was executed.
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
    schemas = _ToolSchemas(environment)
    plays: list[_Play] = []
    try:
        for task in tasks:
            plays.append(_Play(task, environment.start(task["task_id"], task["spec"]), schemas))
        while active := [play for play in plays if not play.done]:
            for start in range(0, len(active), batch_size):
                chunk = active[start:start + batch_size]
                texts = [tokenizer.apply_chat_template(play.conversation, tools=play.tools,
                                                       add_generation_prompt=True, tokenize=False) for play in chunk]
                encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                with torch.no_grad():
                    out = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False,
                                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                for play, ids in zip(chunk, out[:, encoded["input_ids"].shape[1]:]):
                    text = tokenizer.decode(ids, skip_special_tokens=False).split(tokenizer.eos_token)[0]
                    play.answer(text.replace(tokenizer.pad_token, ""), max_turns=max_turns, max_steps=max_steps)
        return [play.result() for play in plays]
    finally:
        for play in plays:
            play.episode.close()
        if was_training:
            model.train()


def success_rate(results: Iterable[TaskResult]) -> float:
    """The share of successes in ``evaluate_policy``'s results (0.0 for none)."""
    results = list(results)
    return sum(1 for result in results if result.success) / len(results) if results else 0.0
