"""Tool calls parsed out of model output, without ever evaluating it.

A model asks for tools in one of three shapes, and ``parse_tool_calls`` reads all of them:

- JSON, OpenAI style: ``{"name": "cd", "arguments": {"folder": "docs"}}`` (``arguments`` may also be a JSON
  string), an OpenAI ``tool_calls`` entry ``{"type": "function", "function": {...}}``, or a list of these;
- Qwen / Hermes style: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks inside free text;
- Python call syntax: ``cd(folder='docs')``, ``[f(a=1), g('x')]`` or one call per line. The text is parsed
  with ``ast``; every argument must be a literal (``ast.literal_eval`` on the argument node). Positional
  arguments are named from the tool's parameter order, so they need the tool schemas.

Anything else - attribute calls such as ``os.system(...)`` (unless the dotted name is itself a declared
tool), ``__import__``, variables, nested calls, lambdas, comprehensions, f-strings, ``*args``/``**kwargs`` -
raises ``CallParseError`` saying what was refused and where. Nothing is ever passed to ``eval``/``exec``.

Model replies are read by ``parse_tool_call_text`` (text with ``<tool_call>`` blocks) and ``parse_arguments``
(an OpenAI ``tool_calls`` entry's arguments): the one parser every agent, the episode player and the trainers
use. Unlike ``parse_tool_calls`` they never raise: a call that cannot be read comes back as a ``ParsedCall``
with ``error`` set, so the player can tell the model what was wrong and the trajectory keeps what it wrote.
A token-level policy's answers are read as BFCL's handler for its family reads them (``agents.answer_format``
chooses): for Qwen, ``parse_qwen_answer``, which keeps the blocks that parse and drops the rest.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from coevolve_engine.core.environment import ToolCall
from coevolve_engine.core.json_input import read_json

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class CallParseError(ValueError):
    """Model output that is not a well-formed, literal-only tool call."""


def parameter_order(schemas: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Tool name -> its parameter names in declaration order.

    Accepts OpenAI tool schemas (``{"type": "function", "function": {...}}``), bare function schemas, and
    BFCL function docs (``{"name", "parameters": {"properties": ...}}``).
    """
    order: dict[str, list[str]] = {}
    for schema in schemas:
        function = schema.get("function", schema)
        name = function.get("name")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if isinstance(name, str):
            order[name] = list(properties)
    return order


def parse_tool_calls(
    text: str, schemas: Iterable[Mapping[str, Any]] | Mapping[str, Sequence[str]] | None = None
) -> list[ToolCall]:
    """Every tool call in ``text``: Qwen blocks, JSON, or Python call syntax, tried in that order.

    ``schemas`` (tool schemas, or a ready ``parameter_order`` mapping) names positional arguments and
    lets dotted tool names such as ``math.factorial`` through.
    """
    if not isinstance(text, str):
        raise CallParseError(f"model output must be text, got {type(text).__name__}")
    order = _as_order(schemas)
    blocks = _TOOL_CALL_BLOCK.findall(text)
    if blocks:
        calls: list[ToolCall] = []
        for index, block in enumerate(blocks):
            try:
                payload = read_json(block)
            except json.JSONDecodeError as exc:
                raise CallParseError(f"<tool_call> block {index} is not JSON: {exc}") from None
            calls.extend(parse_json_calls(payload))
        return calls
    stripped = text.strip()
    if not stripped:
        raise CallParseError("model output is empty: no tool call")
    if stripped[0] in "{[":
        try:
            payload = read_json(stripped)
        except json.JSONDecodeError:
            payload = None
        if payload is not None:
            return parse_json_calls(payload)
    return parse_python_calls(stripped, order)


def parse_json_calls(payload: Any) -> list[ToolCall]:
    """Tool calls from decoded JSON: one call object or a list of them."""
    items = payload if isinstance(payload, list) else [payload]
    return [_json_call(item, index) for index, item in enumerate(items)]


def _json_call(item: Any, index: int) -> ToolCall:
    if not isinstance(item, dict):
        raise CallParseError(f"tool call {index} must be a JSON object, got {type(item).__name__}")
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    function = item.get("function") if isinstance(item.get("function"), dict) else item
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise CallParseError(f"tool call {index} has no string 'name'")
    arguments = function.get("arguments", function.get("parameters", {}))
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = read_json(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise CallParseError(f"tool call {index} ({name}): arguments are not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise CallParseError(
            f"tool call {index} ({name}): arguments must be an object, got {type(arguments).__name__}"
        )
    return ToolCall(name, arguments, call_id)


def parse_python_calls(
    text: str, schemas: Iterable[Mapping[str, Any]] | Mapping[str, Sequence[str]] | None = None
) -> list[ToolCall]:
    """Tool calls written as Python: one call, a list or tuple of calls, or one call per line."""
    order = _as_order(schemas)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        nodes = _call_nodes(tree.body)
    except SyntaxError:
        try:
            module = ast.parse(text.strip(), mode="exec")
        except SyntaxError as exc:
            raise CallParseError(f"not a Python call: {exc.msg} (line {exc.lineno})") from None
        nodes = []
        for statement in module.body:
            if not isinstance(statement, ast.Expr):
                raise CallParseError(
                    f"line {statement.lineno}: only calls are allowed, found {type(statement).__name__}"
                )
            nodes.extend(_call_nodes(statement.value))
    return [_python_call(node, order) for node in nodes]


def _call_nodes(node: ast.expr) -> list[ast.Call]:
    if isinstance(node, (ast.List, ast.Tuple)):
        elements = node.elts
    else:
        elements = [node]
    for element in elements:
        if not isinstance(element, ast.Call):
            raise CallParseError(
                f"expected a function call, found {type(element).__name__} "
                f"{_snippet(element)!r}"
            )
    return list(elements)  # type: ignore[arg-type]


def _python_call(node: ast.Call, order: Mapping[str, Sequence[str]]) -> ToolCall:
    name = _function_name(node.func, order)
    arguments: dict[str, Any] = {}
    parameters = order.get(name)
    for position, argument in enumerate(node.args):
        if isinstance(argument, ast.Starred):
            raise CallParseError(f"{name}: *args are not allowed")
        if parameters is None:
            raise CallParseError(
                f"{name}: positional argument {position} cannot be named without the tool's schema"
            )
        if position >= len(parameters):
            raise CallParseError(
                f"{name}: takes at most {len(parameters)} positional arguments, got {len(node.args)}"
            )
        arguments[parameters[position]] = _literal(argument, name, f"positional argument {position}")
    for keyword in node.keywords:
        if keyword.arg is None:
            raise CallParseError(f"{name}: **kwargs are not allowed")
        if keyword.arg in arguments:
            raise CallParseError(f"{name}: argument {keyword.arg!r} given twice")
        arguments[keyword.arg] = _literal(keyword.value, name, f"argument {keyword.arg!r}")
    return ToolCall(name, arguments)


def _function_name(func: ast.expr, order: Mapping[str, Sequence[str]]) -> str:
    if isinstance(func, ast.Name):
        if func.id.startswith("__"):
            raise CallParseError(f"call to {func.id!r} is not allowed")
        return func.id
    dotted = _dotted_name(func)
    if dotted is not None and dotted in order:
        return dotted
    raise CallParseError(
        f"only calls to declared tools are allowed, not {_snippet(func)!r}"
        + (" (attribute calls are refused)" if isinstance(func, ast.Attribute) else "")
    )


def _dotted_name(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr, function: str, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallParseError(
            f"{function}: {what} is not a literal ({type(node).__name__} {_snippet(node)!r})"
        ) from None


def _snippet(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_order(
    schemas: Iterable[Mapping[str, Any]] | Mapping[str, Sequence[str]] | None,
) -> Mapping[str, Sequence[str]]:
    if schemas is None:
        return {}
    if isinstance(schemas, Mapping):
        return schemas
    return parameter_order(schemas)


def format_python_call(call: ToolCall) -> str:
    """``call`` as a Python call string with keyword arguments, e.g. ``cd(folder='docs')``."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


# -- model replies: never raise, a call that cannot be read carries its error ------------------------------

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
        value = read_json(raw)
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at char {exc.pos}): {_preview(raw)!r}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}: {_preview(raw)!r}"
    return value, None


def _parse_block(block: str) -> ParsedCall:
    body = block.strip()
    try:
        value = read_json(body)
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


# -- a Qwen answer as bfcl_eval's Qwen handlers read it (see agents/answer_format.py) -------------------------------

#: ``_extract_tool_calls`` of bfcl_eval's Qwen handlers, as written there: the newlines are part of a block
_QWEN_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


def _qwen_call(value: Any, body: str) -> ParsedCall:
    """One kept block as ``decode_execute`` reads it: a call, or (its error set) why the whole answer fails."""
    if not isinstance(value, dict) or "name" not in value or "arguments" not in value:
        return ParsedCall(str(value.get("name", "")) if isinstance(value, dict) else "", None, body,
                          error=f'<tool_call> must be a JSON object with "name" and "arguments": {_preview(body)!r}')
    name, arguments = value["name"], value["arguments"]
    if isinstance(name, (dict, list)):
        return ParsedCall("", None, body, error=f"<tool_call> name must be a string: {_preview(body)!r}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except Exception:  # noqa: BLE001 - as bfcl's convert_to_function_call fails on it
            return ParsedCall(str(name), None, body,
                              error=f"<tool_call> arguments are text that is not JSON: {_preview(body)!r}")
    if not isinstance(arguments, dict):
        return ParsedCall(str(name), None, body, error=f"<tool_call> arguments must be a JSON object, got "
                                                       f"{type(arguments).__name__}: {_preview(body)!r}")
    return ParsedCall(str(name), arguments, json.dumps(arguments, ensure_ascii=False))


def parse_qwen_answer(text: str | None) -> tuple[str | None, list[ParsedCall], int]:
    """(the text outside the kept calls, the kept calls in order, how many blocks were dropped) of a Qwen answer,
    as bfcl_eval's ``QwenFCHandler`` reads it: only the text after the last ``</think>``; each
    ``<tool_call>\\n...\\n</tool_call>`` whose body ``json.loads`` accepts is kept, the others are dropped; a kept
    block that is not an object with ``name`` and ``arguments`` (an object, or JSON text of one) comes back with
    ``error`` set: the whole answer fails to decode, as ``decode_execute`` raising does."""
    text = text or ""
    answer = text.split("</think>")[-1].lstrip("\n") if "</think>" in text else text
    calls: list[ParsedCall] = []
    kept: list[tuple[int, int]] = []
    for match in _QWEN_BLOCK.finditer(answer):
        try:
            value = json.loads(match.group(1))
        except Exception:  # noqa: BLE001 - bfcl drops whatever json.loads refuses
            continue
        calls.append(_qwen_call(value, match.group(1)))
        kept.append(match.span())
    offset, content = len(text) - len(answer), text
    for start, end in reversed(kept):
        content = content[:offset + start] + content[offset + end:]
    return content.strip() or None, calls, max(answer.count("<tool_call>") - len(calls), 0)
