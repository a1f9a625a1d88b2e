"""verl's lengths from the exported data: what ``data.max_prompt_length``, ``data.max_response_length``,
``actor_rollout_ref.rollout.multi_turn.max_tool_response_length`` and the per-answer cap must be for verl to cut
nothing of the exported episodes.

verl's defaults (512 prompt tokens, 512 response tokens, 256 characters of a tool result) cut every BFCL
multi-turn opening, and verl only warns when it left-truncates a prompt. The lengths are measured instead:

    prompt         the longest episode opening (system prompt, first user turn and the tools shown at it), as
                   the chat template renders it with ``add_generation_prompt`` (thinking on or off, the longer):
                   the ids verl's agent loop starts from. ``data.max_prompt_length`` is at least this.
    expected       each task's reference episode (``Environment.reference_solution``, one call per answer as the
                   reference agent plays it, each turn closed by a short reply), played through the episode
                   player: its tool results, later user turns and the functions released on the way.
    response       the longest expected episode after its opening, with every answer allowed the whole
                   per-answer cap: (tokens of the whole chat rendered with every function it shows) - (tokens of
                   the opening, without the generation prompt) + answers x ``max_new_tokens``. ``data.max_response_length`` is at least this.
    tool result    the longest tool result of an expected episode in characters, as verl counts
                   ``max_tool_response_length``.
    per answer     ``max_new_tokens`` (the run's ``[episode] max_new_tokens``, trl-grpo's cap per answer),
                   written into ``agent_loop.json`` for the agent loop to pass as each request's ``max_tokens``.

Token counts come from the policy's tokenizer and chat template when one is given. Without one they are UTF-8
bytes: the JSON text of the messages and tools plus an allowance for the template's own text, an upper bound on
the tokens of any byte-level BPE vocabulary (Qwen, Llama 3, GPT-2 families), which never emits a token of less
than one byte. Figures are rounded up to a multiple of ``ROUND_TO``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coevolve_engine.adapters.agents.base import MAX_NEW_TOKENS
from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
from coevolve_engine.trainers.export.weights import ExportError

if TYPE_CHECKING:
    from coevolve_engine.trainers.export.layouts import EpisodeOpening, ExportTask

ROUND_TO = 128  # lengths are rounded up to a multiple of this many tokens (characters for tool results)
TEMPLATE_BYTES = 1024  # byte bound: the chat template's text around the tools (Qwen3's is about 450 bytes)
MESSAGE_BYTES = 64  # byte bound: the template's text around each message (Qwen3's: about 30 bytes)
RESPONSE_WITHOUT_REFERENCE = 4096  # trl-grpo's max_completion_length default, for tasks with no reference episode


class TokenCounter:
    """Tokens of a chat as the policy sees it: its tokenizer and chat template, or the byte bound (module doc)."""

    def __init__(self, tokenizer: str | None = None) -> None:
        self.path = tokenizer
        self.tokenizer = None
        if tokenizer:
            try:
                from transformers import AutoTokenizer
            except ImportError as exc:  # pragma: no cover - the `local` extra installs it
                raise ExportError(f"--tokenizer needs transformers ({exc}); pip install 'coevolve-engine[local]'") \
                    from None
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
            except Exception as exc:  # noqa: BLE001 - a path that is not a tokenizer: named, no traceback
                raise ExportError(f"--tokenizer {tokenizer}: cannot load a tokenizer there: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
            if not getattr(self.tokenizer, "chat_template", None):
                raise ExportError(f"--tokenizer {tokenizer}: the tokenizer has no chat template, so the prompts verl "
                                  "renders cannot be measured with it")

    @property
    def basis(self) -> str:
        if self.tokenizer is not None:
            return f"tokens of {self.path} (its tokenizer and chat template)"
        return ("no --tokenizer: UTF-8 bytes of the messages and tools as JSON plus the template's text, at least "
                "the tokens of any byte-level BPE vocabulary; give --tokenizer for exact figures")

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
             add_generation_prompt: bool = False) -> int:
        if self.tokenizer is None:
            text = json.dumps(messages) + json.dumps(tools)  # ASCII escapes: never fewer bytes than UTF-8
            return len(text.encode("utf-8")) + TEMPLATE_BYTES + MESSAGE_BYTES * (len(messages) + 1)
        counts = []
        # with the generation prompt, thinking off can add an empty think block (Qwen3): the longer of the two
        for variables in ({}, {"enable_thinking": False}) if add_generation_prompt else ({},):
            ids = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=True,
                                                     add_generation_prompt=add_generation_prompt, **variables)
            if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
                ids = ids["input_ids"]
            counts.append(len(ids))
        return max(counts)

    def context(self) -> int | None:
        """The tokenizer's stated context length, when it states a real one."""
        limit = getattr(self.tokenizer, "model_max_length", None)
        return int(limit) if isinstance(limit, int) and 0 < limit < 10**8 else None


@dataclass(frozen=True)
class EpisodeSize:
    """One task's measures (tokens by the counter's basis; tool results in characters)."""

    task_id: str
    prompt: int
    response: int | None  # None: the environment gives no reference episode for the task
    answers: int
    tool_result: int


@dataclass(frozen=True)
class VerlLengths:
    """The lengths a verl command sets, and where each comes from."""

    max_prompt_length: int
    max_response_length: int
    max_tool_response_length: int  # characters
    max_new_tokens: int  # per answer
    basis: str
    longest_prompt: EpisodeSize
    longest_response: EpisodeSize | None
    tasks: int

    def overrides(self) -> list[str]:
        return [f"data.max_prompt_length={self.max_prompt_length}",
                f"data.max_response_length={self.max_response_length}",
                f"actor_rollout_ref.rollout.multi_turn.max_tool_response_length={self.max_tool_response_length}"]

    def describe(self) -> str:
        prompt = self.longest_prompt
        lines = [f"lengths measured on {self.tasks} episodes ({self.basis}):",
                 f"  longest opening {prompt.prompt} ({prompt.task_id}) -> data.max_prompt_length="
                 f"{self.max_prompt_length}"]
        if self.longest_response is not None:
            response = self.longest_response
            lines.append(f"  longest expected episode {response.response} after its opening ({response.task_id}, "
                         f"{response.answers} answers of at most {self.max_new_tokens}) -> data.max_response_length="
                         f"{self.max_response_length}")
        else:
            lines.append(f"  no task has a reference episode: data.max_response_length={self.max_response_length} "
                         "(trl-grpo's max_completion_length default)")
        lines.append(f"  per answer at most {self.max_new_tokens} tokens (agent_loop.json max_new_tokens); tool "
                     f"results up to {self.max_tool_response_length} characters")
        return "\n".join(lines)


def round_up(value: int) -> int:
    return max(ROUND_TO, math.ceil(value / ROUND_TO) * ROUND_TO)


def episode_size(environment: Any, task: "ExportTask", opening: "EpisodeOpening", counter: TokenCounter,
                 max_new_tokens: int) -> EpisodeSize:
    """The task's opening in tokens, and its reference episode after the opening with every answer at the cap."""
    prompt = counter.chat(opening.messages, opening.tools, add_generation_prompt=True)
    spec = json.loads(task.spec) if task.spec is not None else None
    rollout = ReferenceAgent(policy="export").run(environment, task.task_id, spec)
    if rollout.error:
        return EpisodeSize(task.task_id, prompt, None, 0, 0)
    messages = [dict(m) for m in rollout.messages]
    answers = sum(m.get("role") == "assistant" for m in messages)
    after = counter.chat(messages, opening.functions) - counter.chat(opening.messages, opening.tools)
    tool_result = max((len(str(m.get("content") or "")) for m in messages if m.get("role") == "tool"), default=0)
    return EpisodeSize(task.task_id, prompt, max(0, after) + answers * max_new_tokens, answers, tool_result)


def measure(environments: dict[str, Any], tasks: list["ExportTask"], openings: dict[str, "EpisodeOpening"], *,
            tokenizer: str | None = None, max_new_tokens: int = MAX_NEW_TOKENS) -> VerlLengths:
    """verl's lengths for the tasks with an episode opening (``openings``), their environments by name."""
    if max_new_tokens < 1:
        raise ExportError(f"--max-new-tokens must be >= 1 (got {max_new_tokens})")
    counter = TokenCounter(tokenizer)
    sizes = [episode_size(environments[task.env or ""], task, openings[task.task_id], counter, max_new_tokens)
             for task in tasks if task.task_id in openings]
    if not sizes:
        raise ExportError("no exported task opens an episode: there is nothing to measure verl's lengths on")
    longest_prompt = max(sizes, key=lambda s: s.prompt)
    played = [s for s in sizes if s.response is not None]
    longest_response = max(played, key=lambda s: s.response) if played else None
    response = longest_response.response if longest_response else RESPONSE_WITHOUT_REFERENCE
    lengths = VerlLengths(
        max_prompt_length=round_up(longest_prompt.prompt),
        max_response_length=round_up(max(response, max_new_tokens)),
        max_tool_response_length=round_up(max(s.tool_result for s in sizes)),
        max_new_tokens=max_new_tokens, basis=counter.basis, longest_prompt=longest_prompt,
        longest_response=longest_response, tasks=len(sizes))
    context = counter.context()
    if context is not None and lengths.max_prompt_length + lengths.max_response_length > context:
        raise ExportError(
            f"{tokenizer}: the model's context of {context} tokens cannot hold the longest opening "
            f"({longest_prompt.prompt} tokens, {longest_prompt.task_id}) and the longest expected episode "
            f"({response} tokens): verl would cut them; lower --max-new-tokens or leave such tasks out")
    return lengths
