"""A chat as token ids, built one piece at a time: what a local policy reads and what the trainers train on.

An episode's ids are its prompt (the chat template's rendering of the system and first user message, the tools
and the generation prompt), then, in order, each answer exactly as the policy sampled it and the tokens the
template puts after an answer (tool results, the next user message, the next generation prompt). Nothing is
re-tokenized from joined text, so the ids trained are the ids sampled, and a ``mask`` tells the policy's own
tokens (1) from the environment's (0).

Tools released at a later turn (BFCL's miss_func) cannot go back into the prompt without rewriting ids already
sampled, so they come where BFCL's prompting loop puts them for a local model (``inference_multi_turn_prompting``,
the loop of its Qwen handlers): in front of that turn's user message, one JSON schema a line, as the template
renders the opening tools (``released_tools_message``). The prompt keeps the tools shown at the first turn; the
ids stay one record (one per segment, below), appended to and never rewritten.

Earlier turns' reasoning. Some chat templates drop the reasoning (``<think>...</think>``) of assistant messages
before the last user message (Qwen3's; BFCL's Qwen prompting handler formats its prompts the same way), so a
model served behind them reads, at turn 2, turn 1's answers without their reasoning. An append-only record
cannot show that: it would keep turn 1's think blocks. Where the template drops them (``drops_reasoning``,
detected from the template itself: a short chat with a reasoning-bearing answer before and after a user message,
rendered with the policy's ``chat_template_kwargs``; and the generation prompt leaves reasoning to the policy, so
not Qwen3 with ``enable_thinking=false``), the episode's ids are split into **segments**: before each model call
the context is rendered afresh from the chat, each earlier answer as the text the policy sampled (as BFCL's
handler keeps it), released tools where the record put them, so its earlier think blocks are gone; if that
rendering differs from the record, the record so far is closed as a segment and a new one starts, its prompt
that rendering, its completion what the policy samples and the environment appends until the next new segment.
Within a turn the template keeps each answer's reasoning but drops an empty one: an answer that begins with an
empty ``<think>\n\n</think>\n\n`` is shown to the next call of its turn without it (Qwen3's template and BFCL's
Qwen handler both write such an answer without the block unless it is the chat's last message), so it too closes
the segment and the next call reads the re-rendered context.
Each segment is a faithful token record of what was generated in the context it was generated in; the model
reads exactly the current segment's ids. Where the template keeps reasoning (or the answers held none), there
is one segment and the ids are the append-only record above, unchanged. The trainers train each segment as
its own sequence with the episode's reward (``EpisodeTokens.segments``).

SFT demonstrations are built by the same code (``answer_ids`` renders a written assistant message as the
tokens a policy would have sampled for it), so they are byte-identical to what the player shows in training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_USER = {"role": "user", "content": "\x00user\x00"}
_ANSWER = "\x00answer\x00"


@dataclass
class Segment:
    """One faithful token record: a prompt, then what followed it with a mask (1: sampled) and logprobs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    logprobs: list[float]


@dataclass
class EpisodeTokens:
    """One episode's token ids: the prompt, then everything after it with a mask (1: sampled by the policy).

    ``prompt_ids`` ... ``logprobs`` are the current segment (what the policy reads next); ``closed`` holds the
    segments before it (none unless the template drops earlier turns' reasoning, see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rendered: int = 0  # messages of the chat already in the ids
    tool_names: list[str] = field(default_factory=list)  # the tools the ids have shown so far
    tools: list[dict[str, Any]] = field(default_factory=list)  # the tools of the opening prompt
    answers: list[list[int]] = field(default_factory=list)  # each sampled answer's ids, in order
    releases: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # user message index -> tools shown
    closed: list[Segment] = field(default_factory=list)

    def add(self, ids: list[int], *, sampled: bool, logprobs: list[float] | None = None) -> None:
        self.completion_ids += ids
        self.mask += [1 if sampled else 0] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        if sampled:
            self.answers.append(list(ids))

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def restart(self, prompt_ids: list[int]) -> None:
        """Close the current segment and start one whose prompt is ``prompt_ids``."""
        self.closed.append(Segment(self.prompt_ids, self.completion_ids, self.mask, self.logprobs))
        self.prompt_ids, self.completion_ids, self.mask, self.logprobs = list(prompt_ids), [], [], []

    def segments(self) -> list[Segment]:
        """Every segment of the episode in order, the current one last (one segment unless it was split)."""
        return [*self.closed, Segment(self.prompt_ids, self.completion_ids, self.mask, self.logprobs)]


def tool_name(tool: dict[str, Any]) -> Any:
    return (tool.get("function") or {}).get("name", tool.get("name"))


def released_tools_message(message: dict[str, Any], released: list[dict[str, Any]]) -> dict[str, Any]:
    """The user message of the turn that releases ``released``, as a token-level policy reads it: the new
    tools' schemas first (one JSON object a line, as the chat template writes the opening tools), then the
    message (BFCL's prompting loop: ``{functions}\n`` + its "I have updated some more functions..." prompt)."""
    schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in released)
    return {**message, "content": f"{schemas}\n{message.get('content') or ''}"}


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
        self.drops_reasoning = self._drops_reasoning()

    def _drops_reasoning(self) -> bool:
        """Whether the template, with these kwargs, drops the reasoning of answers before the last user message
        while the policy writes its own (its generation prompt does not close a reasoning block itself)."""
        from jinja2 import TemplateError  # transformers' template engine: here only when a tokenizer is

        early, late = "\x01early reasoning\x01", "\x01late reasoning\x01"
        chat = [{"role": "user", "content": "a"},
                {"role": "assistant", "content": f"<think>\n{early}\n</think>\n\nb"},
                {"role": "user", "content": "c"},
                {"role": "assistant", "content": f"<think>\n{late}\n</think>\n\nd"}]
        try:
            text = self.render(chat, None, generation_prompt=False)
            opening = self.render(chat[:1], None, generation_prompt=False)
            prompt = self.render(chat[:1], None, generation_prompt=True)[len(opening):]
        except TemplateError:  # a template that refuses this chat (e.g. strict role order): nothing seen dropped
            return False
        return late in text and early not in text and "</think>" not in prompt

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
        tokens.tool_names = [tool_name(tool) for tool in tools or []]
        tokens.tools = list(tools or [])
        return tokens

    def context(self, tokens: EpisodeTokens, messages: list[dict[str, Any]]) -> str:
        """The chat ``messages`` rendered afresh with the generation prompt, as the record shows it but for what
        the template changes in earlier turns: each assistant message is the text its answer's ids decode to
        (end-of-turn token aside), a user message that released tools carries them (``released_tools_message``),
        and the tools are the opening prompt's."""
        answers = iter(tokens.answers)
        chat = []
        for index, message in enumerate(messages):
            if message.get("role") == "assistant":
                ids = next(answers, None)
                if ids is None:
                    raise RuntimeError(f"the chat has more assistant messages than the {len(tokens.answers)} "
                                       "answers its token record holds")
                message = {"role": "assistant", "content": self.tokenizer.decode(
                    [t for t in ids if t != self.eos_id], skip_special_tokens=False)}
            elif index in tokens.releases:
                message = released_tools_message(message, tokens.releases[index])
            chat.append(message)
        return self.render(chat, tokens.tools, generation_prompt=True)

    def after_answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """The ids the template puts after an answer's end-of-turn token when ``messages`` (tool results, a user
        message) follow it, then the generation prompt."""
        full = self.render([_USER, {"role": "assistant", "content": _ANSWER}, *messages], tools,
                           generation_prompt=True)
        end = full.index(self.eos, full.index(_ANSWER)) + len(self.eos)
        return self.encode(full[end:])

    def answer_ids(self, message: dict[str, Any]) -> list[int]:
        """The ids of a written assistant message as a policy samples them after the generation prompt, end-of-turn
        token included (for demonstrations).

        The message is rendered followed by a user message, as it sits in a chat; where the template writes the
        generation prompt differently (Qwen3 with ``enable_thinking=false`` opens every answer with an empty
        think block, which it drops from answers before the last user message), it is rendered as the chat's
        last message instead, where the template writes an answer as it follows the generation prompt; so is an
        answer with reasoning where the template drops it before a user message (``drops_reasoning``): the policy
        sampled it with its reasoning."""
        before = self.render([_USER], None, generation_prompt=True)
        full = self.render([_USER, message, _USER], None, generation_prompt=False)
        reasoning = "</think>" in str(message.get("content") or "") or bool(message.get("reasoning_content"))
        if not full.startswith(before) or (reasoning and self.drops_reasoning):
            full = self.render([_USER, message], None, generation_prompt=False)
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
        released = [tool for tool in tools or [] if tool_name(tool) not in tokens.tool_names]
        users = [i for i, message in enumerate(new) if message.get("role") == "user"]
        if released and users:  # shown once, with the first user message after their release
            tokens.releases[tokens.rendered + 1 + users[0]] = released
            new = [*new[:users[0]], released_tools_message(new[users[0]], released), *new[users[0] + 1:]]
            tokens.tool_names += [tool_name(tool) for tool in released]
        after = self.after_answer(new, tools)
        tokens.rendered = len(messages)
        if self.drops_reasoning:  # the template re-renders what came before: earlier turns, empty think blocks
            context = self.context(tokens, messages)
            if context != self.tokenizer.decode(tokens.ids + after, skip_special_tokens=False):
                tokens.restart(self.encode(context))
                return
        tokens.add(after, sampled=False)

    def episode(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                turn_tools: list[list[dict[str, Any]]] | None = None) -> EpisodeTokens:
        """A whole written chat (system, first user message, then answers, tool results and later user messages) as
        the player would show it, answers rendered by ``answer_ids``: SFT on exactly what training shows.

        turn_tools: the tools the episode shows at each user turn, when some are released at a later turn (they
        are rendered at that turn, as in play); default ``tools`` at every turn."""
        first = next(i for i, message in enumerate(messages) if message.get("role") == "assistant")
        tokens = self.start(messages[:first], tools)
        for index in range(first, len(messages)):
            if messages[index].get("role") != "assistant":
                continue
            turn = sum(message.get("role") == "user" for message in messages[:index])
            shown = turn_tools[min(turn, len(turn_tools)) - 1] if turn_tools and turn else tools
            self.sync(tokens, messages[:index], shown)
            tokens.add(self.answer_ids(messages[index]), sampled=True)
            tokens.rendered = index
        return tokens
