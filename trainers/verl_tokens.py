"""The ids verl's agent loop trains on, built as the token path builds them for trl-grpo and ``eval``.

verl's own token builder (its Continuous Token ``ct_*`` methods) only appends, renders a later turn's message after
the ids so far and writes tools released at a later turn where its loop puts them; trl-grpo and ``eval`` read
the ids ``chat_tokens`` builds (released tools in front of their turn's user message, as BFCL's prompting loop
writes them; earlier turns' reasoning dropped as the chat template drops it). So ``EpisodeAgentLoop``
(``verl_bfcl``) builds its ids with the same ``ChatTokens``, through ``play_tokens`` here: verl's server generates
from exactly the ids trl-grpo and ``eval`` would give the policy at that model call, and each answer is decoded as
BFCL's handler for the policy's family decodes it (``answer_format``).

One difference cannot be carried: where the template drops earlier turns' reasoning (Qwen3 with thinking on,
``ChatTokens.drops_reasoning``) the token path starts a new segment, a new sequence, when it re-renders the
context, and verl's agent loop returns one sequence per episode. ``episode_chat`` refuses that case with
``ThinkingOnRefused``, which says why and what to set, rather than training on other contexts than ``eval`` scores.

Nothing here imports verl: the tests drive ``play_tokens`` with a scripted server in the project's own venv.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from coevolve_engine.adapters.agents.answer_format import family_of
from coevolve_engine.adapters.agents.chat_tokens import ChatTokens, EpisodeTokens
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.rollout import STOP_MAX_TOKENS

#: a model call: (the ids to continue, the tokens the episode has generated so far) -> (new ids, their log-probs)
Generate = Callable[[list[int], int], Awaitable[tuple[list[int], list[float] | None]]]


class ThinkingOnRefused(CoevolveError):
    """verl cannot give the policy the contexts the token path gives it with this chat template (thinking on)."""


@dataclass
class TokenEpisode:
    """What ``play_tokens`` played: the episode's ids (one segment), the answers as text, the ids of each model call,
    and whether the server gave log-probabilities."""

    tokens: EpisodeTokens
    answers: list[str] = field(default_factory=list)
    prompts: list[list[int]] = field(default_factory=list)
    logprobs: bool = False


def episode_chat(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None) -> ChatTokens:
    """The ``ChatTokens`` of verl's agent loop; refuses a template that drops earlier turns' reasoning."""
    chat = ChatTokens(tokenizer, dict(chat_template_kwargs or {}))
    family_of(tokenizer.chat_template)  # a template whose answers no BFCL handler decodes is refused here too
    if chat.drops_reasoning:
        raise ThinkingOnRefused(
            "verl's agent loop cannot train this policy with thinking on: its chat template drops earlier turns' "
            "reasoning (and empty think blocks) when it re-renders the chat, so trl-grpo and eval show the policy "
            "a re-rendered context (a new sequence) at those model calls, while verl returns one sequence per "
            "episode and would train on contexts eval never shows; set "
            "+data.apply_chat_template_kwargs.enable_thinking=False (the export's command does), or train with "
            "trl-grpo")
    return chat


async def play_tokens(play: Any, chat: ChatTokens, answer: Callable[[str], Awaitable[Any]], generate: Generate, *,
                      response_length: int) -> TokenEpisode:
    """Play ``play`` (an episode player's ``Play``) to its end, or until ``response_length`` tokens follow the
    prompt (the episode then stops as a failure, stop "max_tokens"): each model call generates from the ids
    ``chat`` builds, ``answer(text)`` plays the decoded answer (verl's interaction, or the player directly)."""
    tokens = chat.start(play.messages, play.tools)
    run = TokenEpisode(tokens)
    drop = {chat.tokenizer.eos_token_id, chat.tokenizer.pad_token_id}
    while not play.done:
        run.prompts.append(tokens.ids)
        ids, logprobs = await generate(tokens.ids, len(tokens.completion_ids))
        run.logprobs = run.logprobs or bool(logprobs)
        tokens.add(list(ids), sampled=True, logprobs=list(logprobs) if logprobs else None)
        run.answers.append(chat.tokenizer.decode([t for t in ids if t not in drop], skip_special_tokens=False))
        await answer(run.answers[-1])
        if play.done:
            break
        if len(tokens.completion_ids) < response_length:
            chat.sync(tokens, play.messages, play.tools)
            if tokens.closed:  # pragma: no cover - episode_chat refuses the templates that re-render
                raise ThinkingOnRefused("the chat template re-rendered the context: verl keeps one sequence")
        if len(tokens.completion_ids) >= response_length:
            play.stop(STOP_MAX_TOKENS, f"response_length={response_length} reached")
    return run
