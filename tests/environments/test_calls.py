"""Parsing tool calls out of model output: JSON, Qwen blocks and Python syntax, literals only."""

from __future__ import annotations

import pytest

from coevolve_engine.adapters.calls import (
    CallParseError,
    format_python_call,
    parameter_order,
    parse_python_calls,
    parse_tool_calls,
)
from coevolve_engine.core.environment import ToolCall

SCHEMAS = [
    {"type": "function", "function": {"name": "cd", "parameters": {"type": "object", "properties": {"folder": {}}}}},
    {"name": "sort", "parameters": {"type": "dict", "properties": {"file_name": {}, "reverse": {}}}},
    {"name": "math.factorial", "parameters": {"type": "dict", "properties": {"number": {}}}},
]


def test_parameter_order_reads_openai_and_bfcl_schemas():
    assert parameter_order(SCHEMAS) == {"cd": ["folder"], "sort": ["file_name", "reverse"],
                                        "math.factorial": ["number"]}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"name": "cd", "arguments": {"folder": "docs"}}', [ToolCall("cd", {"folder": "docs"})]),
        ('{"name": "cd", "arguments": "{\\"folder\\": \\"docs\\"}"}', [ToolCall("cd", {"folder": "docs"})]),
        ('{"name": "ls", "arguments": ""}', [ToolCall("ls", {})]),
        ('[{"id": "c1", "type": "function", "function": {"name": "cd", "arguments": "{\\"folder\\": \\"a\\"}"}}]',
         [ToolCall("cd", {"folder": "a"}, "c1")]),
        ('Sure.\n<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n'
         '<tool_call>{"name": "ls", "arguments": {}}</tool_call>',
         [ToolCall("cd", {"folder": "a"}), ToolCall("ls", {})]),
        ("cd(folder='docs')", [ToolCall("cd", {"folder": "docs"})]),
        ("[cd(folder='docs'), sort('a.txt', reverse=True)]",
         [ToolCall("cd", {"folder": "docs"}), ToolCall("sort", {"file_name": "a.txt", "reverse": True})]),
        ("cd(folder='a')\ncd(folder='b')", [ToolCall("cd", {"folder": "a"}), ToolCall("cd", {"folder": "b"})]),
        ("math.factorial(number=5)", [ToolCall("math.factorial", {"number": 5})]),
        ("f(x=-1.5, y=[1, (2, 3)], z={'k': None})", [ToolCall("f", {"x": -1.5, "y": [1, (2, 3)], "z": {"k": None}})]),
    ],
)
def test_accepted_shapes(text, expected):
    assert parse_tool_calls(text, SCHEMAS) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("os.system('ls')", "attribute calls are refused"),
        ("__import__('os')", "'__import__' is not allowed"),
        ("cd(folder=__import__('os').getcwd())", "not a literal"),
        ("cd(folder=x)", "not a literal (Name 'x')"),
        ("cd(folder=lambda: 1)", "not a literal (Lambda"),
        ("cd(folder=[c for c in 'ab'])", "not a literal (ListComp"),
        ("cd(folder=f'{x}')", "not a literal (JoinedStr"),
        ("cd(folder=1 + 2)", "not a literal (BinOp"),
        ("cd(**opts)", "**kwargs are not allowed"),
        ("cd(*args)", "*args are not allowed"),
        ("cd('a', 'b')", "takes at most 1 positional"),
        ("unknown('a')", "cannot be named without the tool's schema"),
        ("cd(folder='a', folder='b')", "given twice"),
        ("(lambda: 1)()", "only calls to declared tools"),
        ("x = cd(folder='a')", "only calls are allowed"),
        ("[cd(folder='a'), 3]", "expected a function call"),
        ("cd(folder='a'", "not a Python call"),
        ("", "empty"),
        ('{"arguments": {}}', "no string 'name'"),
        ('{"name": "cd", "arguments": "not json"}', "not valid JSON"),
        ('{"name": "cd", "arguments": [1]}', "must be an object"),
        ("<tool_call>{not json}</tool_call>", "is not JSON"),
    ],
)
def test_refused_shapes(text, message):
    with pytest.raises(CallParseError, match=None) as caught:
        parse_tool_calls(text, SCHEMAS)
    assert message in str(caught.value)


def test_parsing_never_evaluates(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(CallParseError):
        parse_python_calls(f"cd(folder=open({str(marker)!r}, 'w').write('x'))")
    assert not marker.exists()


def test_format_python_call_round_trips():
    call = ToolCall("sort", {"file_name": "a 'quoted' name", "reverse": False})
    assert parse_python_calls(format_python_call(call)) == [call]
