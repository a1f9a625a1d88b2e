"""A chat as token ids, built one piece at a time: what a local policy reads and what the trainers train on.

An episode's ids are its prompt (the chat template's rendering of the system and first user message, the tools
and the generation prompt), then, in order, each answer exactly as the policy sampled it and the tokens the
template puts after an answer (tool results, the next user message, the next generation prompt). Nothing is
re-tokenized from joined text, so the ids trained are the ids sampled, and a ``mask`` tells the policy's own
tokens (1) from the environment's (0).

SFT demonstrations are built by the same code (``answer_ids`` renders a written assistant message as the
tokens a policy would have sampled for it), so they are byte-identical to what the player shows in training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_USER = {"role": "user", "content": "\x00user\x00"}
_ANSWER = "\x00answer\x00"


@dataclass
class EpisodeTokens:
    """One episode's token ids: the prompt, then everything after it with a mask (1: sampled by the policy)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rendered: int = 0  # messages of the chat already in the ids

    def add(self, ids: list[int], *, sampled: bool, logprobs: list[float] | None = None) -> None:
        self.completion_ids += ids
        self.mask += [1 if sampled else 0] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


class ChatTokens:
    """Renders chats with a tokenizer's chat template, incrementally (see the module docstring).

    chat_template_kwargs: extra template variables, e.g. ``{"enable_thinking": False}`` for Qwen3.
    """

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(f"the tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template")
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        self.eos = tokenizer.eos_token
        self.eos_id = tokenizer.eos_token_id

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
               generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                  add_generation_prompt=generation_prompt, **self.kwargs)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def start(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> EpisodeTokens:
        """An episode's ids at its first answer: the chat so far with the generation prompt."""
        tokens = EpisodeTokens(self.encode(self.render(messages, tools, generation_prompt=True)))
        tokens.rendered = len(messages)
        return tokens

    def after_answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """The ids the template puts after an answer's end-of-turn token when ``messages`` (tool results, a user
        message) follow it, then the generation prompt."""
        full = self.render([_USER, {"role": "assistant", "content": _ANSWER}, *messages], tools,
                           generation_prompt=True)
        end = full.index(self.eos, full.index(_ANSWER)) + len(self.eos)
        return self.encode(full[end:])

    def answer_ids(self, message: dict[str, Any]) -> list[int]:
        """The ids of a written assistant message as a policy samples them after the generation prompt, end-of-turn
        token included (for demonstrations)."""
        before = self.render([_USER], None, generation_prompt=True)
        full = self.render([_USER, message, _USER], None, generation_prompt=False)
        if not full.startswith(before):
            raise ValueError("the chat template renders an assistant message differently from what follows its "
                             "generation prompt (e.g. a thinking block), so a demonstration cannot be shown as the "
                             "policy samples it; set chat_template_kwargs to match")
        end = full.index(self.eos, len(before)) + len(self.eos)
        return self.encode(full[len(before):end])

    def sync(self, tokens: EpisodeTokens, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        """Append the ids of the messages that followed the last answer (the answer itself is already in)."""
        new = messages[tokens.rendered + 1:]  # +1: the assistant message whose ids were sampled
        if not new:
            return
        if not tokens.completion_ids or tokens.completion_ids[-1] != self.eos_id:
            tokens.add([self.eos_id], sampled=False)  # the answer was cut off: close it as the template would
        tokens.add(self.after_answer(new, tools), sampled=False)
        tokens.rendered = len(messages)

    def episode(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> EpisodeTokens:
        """A whole written chat (system, first user message, then answers, tool results and later user messages) as
        the player would show it, answers rendered by ``answer_ids``: SFT on exactly what training shows."""
        first = next(i for i, message in enumerate(messages) if message.get("role") == "assistant")
        tokens = self.start(messages[:first], tools)
        for index in range(first, len(messages)):
            if messages[index].get("role") != "assistant":
                continue
            self.sync(tokens, messages[:index], tools)
            tokens.add(self.answer_ids(messages[index]), sampled=True)
            tokens.rendered = index
        return tokens
