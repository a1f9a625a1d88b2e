"""Turning what a model wrote into tool calls, without ever evaluating it.

Two shapes are read:

- OpenAI ``tool_calls``: a name plus an ``arguments`` JSON string (``parse_arguments``);
- Qwen / Hermes text: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks inside the reply
  (``parse_tool_call_text``), as a local model or a server without a tool parser produces them.

A call that cannot be read is not dropped: it comes back with ``error`` set, so the driver can tell the
model what was wrong and the trajectory keeps what the model actually wrote.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_UNCLOSED = re.compile(r"<tool_call>(?!.*</tool_call>)(.*)\Z", re.DOTALL)
_NAME_GUESS = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')


@dataclass(frozen=True)
class ParsedCall:
    """One tool call as the model wrote it.

    arguments is None exactly when ``error`` says why the call could not be read; raw_arguments is the
    arguments text as written (for text blocks, the whole block).
    """

    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    call_id: str | None = None
    error: str | None = None


def _preview(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments of an OpenAI tool call -> (dict, None), or (None, what is wrong).

    Empty or missing arguments mean no arguments. A dict is accepted as is (some providers decode it).
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object string, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at char {exc.pos}): {_preview(raw)!r}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}: {_preview(raw)!r}"
    return value, None


def _parse_block(block: str) -> ParsedCall:
    body = block.strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        guess = _NAME_GUESS.search(body)
        return ParsedCall(
            name=guess.group(1) if guess else "",
            arguments=None,
            raw_arguments=body,
            error=f"<tool_call> is not valid JSON ({exc.msg} at char {exc.pos}): {_preview(body)!r}",
        )
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return ParsedCall(
            name="",
            arguments=None,
            raw_arguments=body,
            error=f'<tool_call> must be a JSON object with a "name" string: {_preview(body)!r}',
        )
    raw_args = value.get("arguments", value.get("parameters"))
    arguments, error = parse_arguments(raw_args)
    raw_text = raw_args if isinstance(raw_args, str) else json.dumps(raw_args if raw_args is not None else {})
    return ParsedCall(name=value["name"], arguments=arguments, raw_arguments=raw_text, error=error)


def parse_tool_call_text(text: str | None) -> tuple[str | None, list[ParsedCall]]:
    """Split a reply into (text outside the tool-call blocks, calls in order).

    A final ``<tool_call>`` with no closing tag (generation cut off) is read if it parses, else it is a
    call with an error. The returned text is stripped and None when nothing else remains.
    """
    if not text or "<tool_call>" not in text:
        return text, []
    calls = [_parse_block(m.group(1)) for m in _BLOCK.finditer(text)]
    rest = _BLOCK.sub("", text)
    unclosed = _UNCLOSED.search(rest)
    if unclosed:
        call = _parse_block(unclosed.group(1))
        if call.error:
            call = ParsedCall(call.name, None, call.raw_arguments, None, "unterminated <tool_call>: " + call.error)
        calls.append(call)
        rest = rest[: unclosed.start()]
    rest = rest.strip()
    return (rest or None), calls
