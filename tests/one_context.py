"""The three token paths of one policy, driven by one scripted model: local ``eval`` (``ModelAgent``), trl-grpo
(``play_episodes``, the model in training) and verl's agent loop (``verl_tokens.play_tokens``, what
``EpisodeAgentLoop`` runs; ``verl_loop_ids.py`` runs ``EpisodeAgentLoop`` itself inside verl). Each records the ids
the model was given at every call.

The scripts keep every turn to its ground truth's length, so one queue of answers serves all three paths: each
call of a task takes the next answer. Variants: one call an answer; a turn's calls in one answer; the first call
beside a block that does not parse (dropped, the turn goes on).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from coevolve_engine.adapters.agents.answer_format import answer_decoder, family_of
from coevolve_engine.adapters.agents.base import EpisodeLimits
from coevolve_engine.adapters.agents.player import Play, play_all
from coevolve_engine.eval.checkpoint import ModelAgent
from coevolve_engine.trainers.trl_grpo.episodes import play_episodes
from coevolve_engine.trainers.verl_tokens import episode_chat, play_tokens

MALFORMED = '<tool_call>\n{"name": "ls", "arguments": {"a": \n</tool_call>'


def block(call: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": call.name, "arguments": call.arguments})}\n</tool_call>'


def answers_for(environment: Any, spec: dict[str, Any], variant: int, *, thinking: bool = False) -> list[str]:
    """The scripted answers of a task, in the order the episode asks for them."""
    answers: list[str] = []
    for turn, calls in enumerate(environment.reference_solution(spec)):
        if variant == 1 and calls:
            answers.append("\n".join(block(call) for call in calls))
        else:
            answers += [block(call) for call in calls]
        answers.append("Done.")
    if variant == 2:
        first = next((i for i, answer in enumerate(answers) if answer.startswith("<tool_call>")), None)
        if first is not None:
            answers[first] += "\n" + MALFORMED
    if thinking:  # every other answer opens with an empty think block, the others with reasoning
        answers = [("<think>\n\n</think>\n\n" if i % 2 else f"<think>\nstep {i}\n</think>\n\n") + answer
                   for i, answer in enumerate(answers)]
    return answers


class _Scores:
    """``generate(output_scores=True)``'s scores: a row of zeros over the vocabulary per generated token."""

    def __init__(self, rows: int, vocabulary: int) -> None:
        self.rows, self.vocabulary = rows, vocabulary

    def __getitem__(self, step: int):
        import torch

        return torch.zeros(self.rows, self.vocabulary)


class ScriptedModel:
    """A causal LM's ``generate`` answering each call with the next scripted text (ending in the end-of-turn
    token); keeps the ids it was given at every call."""

    training = False

    def __init__(self, tokenizer, answers: list[str]) -> None:
        self.tokenizer, self.answers, self.prompts = tokenizer, list(answers), []

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def next_ids(self) -> list[int]:
        text = self.answers.pop(0) if self.answers else "The script ran out."
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]

    def generate(self, input_ids, attention_mask, max_new_tokens, output_scores=False, **kwargs):
        import torch

        assert len(input_ids) == 1, "one episode at a time: the script is one queue"
        ids = input_ids[0].tolist()
        self.prompts.append(ids)
        new = self.next_ids()
        scores = _Scores(1, len(self.tokenizer)) if output_scores else None
        return SimpleNamespace(sequences=torch.tensor([ids + new]), scores=scores)


def eval_path(tokenizer, environment, task, answers, kwargs) -> tuple[list[list[int]], Any]:
    """Local ``eval``'s agent on the task: (the ids of every model call, the episode's token record)."""
    model = ScriptedModel(tokenizer, answers)
    agent = ModelAgent(model, tokenizer, policy="scripted", limits=EpisodeLimits(), max_new_tokens=4096,
                       chat_template_kwargs=kwargs)
    play = Play(environment.start(task["task_id"], task["spec"]), task_id=task["task_id"], policy="scripted")
    assert play_all([play], agent)[0].stop == "done"
    return model.prompts, play.state["tokens"]


def trl_path(tokenizer, environment, task, answers, kwargs) -> tuple[list[list[int]], dict[str, Any]]:
    """trl-grpo's ``rollout_func`` on one row of the task: (the ids of every model call, its output)."""
    model = ScriptedModel(tokenizer, answers)
    config = SimpleNamespace(max_steps=0, max_model_calls_per_turn=21, temperature=0.9, max_new_tokens=4096,
                             max_completion_length=1_000_000, chat_template_kwargs=kwargs, generation_batch_size=0)
    row = {"task_id": task["task_id"], "spec": json.dumps(task["spec"])}
    output, rollouts = play_episodes(environment, [row], model, tokenizer, config, policy="scripted")
    assert rollouts[0].stop == "done", rollouts[0].reason
    return model.prompts, output


def verl_path(tokenizer, environment, task, answers, kwargs) -> tuple[list[list[int]], Any]:
    """verl's agent loop's token path (``play_tokens``) on the task: (the ids of every model call, what it played)."""
    chat = episode_chat(tokenizer, kwargs)
    model = ScriptedModel(tokenizer, answers)
    decode = answer_decoder(family_of(tokenizer.chat_template))
    play = Play(environment.start(task["task_id"], task["spec"]), task_id=task["task_id"], policy="verl")

    async def answer(text: str) -> None:
        play.answer(decode(text))

    async def generate(prompt_ids: list[int], used: int) -> tuple[list[int], list[float]]:
        model.prompts.append(list(prompt_ids))
        ids = model.next_ids()
        return ids, [-0.5] * len(ids)

    played = asyncio.run(play_tokens(play, chat, answer, generate, response_length=1_000_000))
    assert play.finish().stop == "done"
    return model.prompts, played
