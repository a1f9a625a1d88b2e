"""How a token-level policy's answer text becomes tool calls: as BFCL's own handler for the model's family reads it.

BFCL plays a served model through its FC loop (OpenAI tool calls; ``litellm_agent`` reads those, and an answer
with a call that does not decode ends the turn). A model run from its weights is played through BFCL's prompting
loop with the handler of its family instead, and that handler decides which calls of an answer run. The token path
(a local policy in ``eval`` and the run's eval phase, the model in training under trl-grpo, verl's agent loop)
decodes every answer here, with the decoder of the policy's family, chosen in one place (``answer_format``).

**qwen** (Qwen2.5, Qwen3 and every chat template that writes Hermes-style ``<tool_call>`` blocks):
``bfcl_eval``'s ``QwenFCHandler`` (and ``QwenHandler``), ``_parse_query_response_prompting`` then
``decode_execute``:

- only the text after the answer's last ``</think>`` is read (calls inside reasoning do not count);
- each ``<tool_call>\\n...\\n</tool_call>`` block (newlines as written; ``_extract_tool_calls``) whose body
  ``json.loads`` accepts is kept, in order; a block that does not parse, or is not closed, is dropped silently
  (counted in ``ModelReply.dropped_calls``, and so in the rollout's ``tool_errors``);
- the kept calls run; an answer with none ends the turn;
- a kept block that is not an object with ``name`` and ``arguments`` (an object, or JSON text of one) makes the
  whole answer fail to decode, as ``decode_execute`` raising does: nothing of it runs and the turn ends (the
  player ends a turn on a call that carries an ``error``).
"""

from __future__ import annotations

from typing import Callable

from ..calls import parse_qwen_answer
from .rules import ModelReply

AnswerDecoder = Callable[[str | None], ModelReply]


def decode_qwen(text: str | None) -> ModelReply:
    """An answer as bfcl_eval's Qwen handlers decode it (see the module docstring; ``calls.parse_qwen_answer``):
    the calls kept, in order; the content is the answer's text outside them (reasoning and dropped blocks
    included), None when empty."""
    content, calls, dropped = parse_qwen_answer(text)
    return ModelReply(content=content, calls=calls, dropped_calls=dropped)


#: model family -> how its BFCL handler decodes an answer
FAMILIES: dict[str, AnswerDecoder] = {"qwen": decode_qwen}


def family_of(chat_template: str | None) -> str:
    """The model family a chat template belongs to, for decoding answers (see ``FAMILIES``)."""
    if chat_template and "<tool_call>" in chat_template:
        return "qwen"
    raise ValueError("the token path decodes answers as BFCL's handler for the model's family does, and knows "
                     f"{sorted(FAMILIES)}: 'qwen' for chat templates that write <tool_call> blocks (Qwen2.5, Qwen3); "
                     "this chat template writes none")


def answer_decoder(family: str) -> AnswerDecoder:
    """The decoder of a model family (``FAMILIES``); an unknown name lists the known ones."""
    try:
        return FAMILIES[family]
    except KeyError:
        raise ValueError(f"no answer decoder for model family {family!r}; known: {sorted(FAMILIES)}") from None
