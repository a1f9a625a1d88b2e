"""Render one trajectory as a short text to embed: what was asked, how it ended, what was called, what came back.

The text is deterministic (the same trajectory always gives the same text, so its embedding is cached once)
and bounded (``max_chars``, 1,500 by default). Sections come in order of importance, each with a budget of
its own, because the embedding model reads only its first 256 word pieces (700 to 1,000 characters):

    Task: <tasks.prompt, or the first user message>
    Outcome: <the user turn it broke in, error observations, trajectories.error, meta.reason (the verdict)>
    Calls: <name(arg=value, ...) in call order>
    Feedback: <what the environment answered to the calls that did not fail>

Error observations are the tool messages that begin with "Error" (how the episode driver reports a call the
environment refused or that raised); their first line goes under Outcome with the tool that produced it. A
flagged trajectory may have succeeded (boundary flags every rollout of a mixed group), hence "Outcome".
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_CHARS = 1500

# Characters per section; the sum exceeds MAX_CHARS only by the labels, and the whole text is cut at the end.
TASK_CHARS = 250
OUTCOME_CHARS = 350
CALLS_CHARS = 400
FEEDBACK_CHARS = 450

VALUE_CHARS = 40  # one argument value in a call
OBSERVATION_CHARS = 120  # one tool message

_SPACE = re.compile(r"\s+")


def _squash(text: str) -> str:
    """One line: runs of whitespace become one space."""
    return _SPACE.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 0)].rstrip() + "..."


def _text(content: Any) -> str:
    """The text of a message's content: a string, OpenAI content parts, or anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def _join(items: list[str], limit: int, separator: str = "; ") -> str:
    """Items joined until ``limit``; what does not fit is counted ('(+3 more)'). A first item too long is cut."""
    out: list[str] = []
    used = 0
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        tail = len(separator) + len(f"(+{rest} more)") if rest else 0
        gap = len(separator) if out else 0
        room = limit - used - gap - tail
        if len(item) > room:
            if out:
                out.append(f"(+{len(items) - i} more)")
                break
            item = _cut(item, room)
        out.append(item)
        used += gap + len(item)
    return _cut(separator.join(out), limit)


def _counted(lines: list[str]) -> list[str]:
    """Repeated lines once each, in first-seen order, with ' (x3)' when a line came three times."""
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return [line if n == 1 else f"{line} (x{n})" for line, n in counts.items()]


def _value(value: Any) -> str:
    return _cut(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")), VALUE_CHARS)


def render_call(name: str, arguments: Any) -> str:
    """``name(key=value, ...)`` with keys sorted and each value as compact JSON, cut at VALUE_CHARS."""
    if isinstance(arguments, str):  # arguments as the model wrote them (a JSON string)
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name}({_cut(_squash(arguments), VALUE_CHARS)})"
    if isinstance(arguments, dict):
        inner = ", ".join(f"{key}={_value(arguments[key])}" for key in sorted(arguments))
    elif arguments is None:
        inner = ""
    else:
        inner = _value(arguments)
    return f"{name}({inner})"


def _calls(actions: list | None, messages: list) -> list[str]:
    """The calls made: the recorded actions, else the tool calls in the assistant messages."""
    if actions is not None:
        return [render_call(str(a.get("name", "?")), a.get("arguments")) for a in actions if isinstance(a, dict)]
    calls = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            calls.append(render_call(str(function.get("name", "?")), function.get("arguments")))
    return calls


def _first_user_message(messages: list) -> str:
    return next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")


def task_text(prompt: str | None, messages: list | None) -> str:
    """The task on one line: ``prompt`` (tasks.prompt) or else the first user message; '' when neither."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    return _squash(prompt or "") or _squash(_first_user_message(messages))


def _tool_messages(messages: list) -> tuple[list[str], list[str]]:
    """(error observations, other feedback), each '<tool>: <content>' on one line, cut at OBSERVATION_CHARS."""
    errors, feedback = [], []
    for message in messages:
        if message.get("role") != "tool":
            continue
        content = _text(message.get("content")).strip()
        failed = content.lower().startswith("error")
        if failed:  # "Error: <message>" then, on later lines, the raw result that usually repeats it
            content = content.splitlines()[0]
        line = _cut(f"{message.get('name') or 'tool'}: {_squash(content)}", OBSERVATION_CHARS)
        (errors if failed else feedback).append(line)
    return errors, feedback


def render_trajectory(
    *,
    prompt: str | None = None,
    actions: list | None = None,
    messages: list | None = None,
    meta: dict | None = None,
    error: str | None = None,
    max_chars: int = MAX_CHARS,
) -> str:
    """The text of one trajectory (see the module docstring). Every argument may be None or missing."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    task = task_text(prompt, messages)
    errors, feedback = _tool_messages(messages)
    outcome = list(errors)
    failed = meta.get("failed_turn") if isinstance(meta, dict) else None
    if isinstance(failed, int):  # the episode player's record: where a multi-turn episode broke
        outcome.insert(0, f"broke in user turn {failed} of {meta.get('turns') or failed} reached")
    if error:
        outcome.append(f"rollout error: {_squash(error)}")
    reason = (meta or {}).get("reason") if isinstance(meta, dict) else None
    if reason:
        outcome.append(f"verdict: {_squash(str(reason))}")
    calls = _calls(actions, messages)
    lines = [
        f"Task: {_cut(task, TASK_CHARS) or '(unknown)'}",
        f"Outcome: {_join(_counted(outcome), OUTCOME_CHARS) or '(none recorded)'}",
        f"Calls: {_join(calls, CALLS_CHARS) or '(no calls)'}",
    ]
    if feedback:
        lines.append(f"Feedback: {_join(_counted(feedback), FEEDBACK_CHARS)}")
    return _cut("\n".join(lines), max_chars)


def render_row(row: dict[str, Any], *, max_chars: int = MAX_CHARS) -> str:
    """Render a row of the store (``prompt``, ``actions``, ``messages``, ``meta``, ``error``; JSON as text)."""

    def parsed(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return None
        return value

    return render_trajectory(
        prompt=row.get("prompt"),
        actions=parsed(row.get("actions")),
        messages=parsed(row.get("messages")),
        meta=parsed(row.get("meta")),
        error=row.get("error"),
        max_chars=max_chars,
    )
