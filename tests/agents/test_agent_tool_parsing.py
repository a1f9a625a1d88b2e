"""The tool-call parser, on literal model outputs."""

from __future__ import annotations

import pytest

from coevolve_engine.adapters.agents import parse_arguments, parse_tool_call_text


def test_text_without_calls_is_returned_unchanged():
    assert parse_tool_call_text("The counter is 5.") == ("The counter is 5.", [])
    assert parse_tool_call_text(None) == (None, [])
    assert parse_tool_call_text("") == ("", [])


def test_one_qwen_style_call():
    content, calls = parse_tool_call_text('<tool_call>\n{"name": "add", "arguments": {"amount": 2}}\n</tool_call>')
    assert content is None
    assert [(c.name, c.arguments, c.error) for c in calls] == [("add", {"amount": 2}, None)]
    assert calls[0].raw_arguments == '{"amount": 2}'


def test_several_calls_with_text_around_them_keep_order_and_text():
    text = (
        "<think>\nadd then read\n</think>\n\nSure.\n"
        '<tool_call>\n{"name": "add", "arguments": {"amount": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read", "arguments": {}}\n</tool_call>'
    )
    content, calls = parse_tool_call_text(text)
    assert content == "<think>\nadd then read\n</think>\n\nSure."
    assert [c.name for c in calls] == ["add", "read"]
    assert calls[1].arguments == {}


def test_arguments_given_as_a_json_string_or_as_parameters_or_missing():
    _, calls = parse_tool_call_text(
        '<tool_call>{"name": "add", "arguments": "{\\"amount\\": 3}"}</tool_call>'
        '<tool_call>{"name": "add", "parameters": {"amount": 4}}</tool_call>'
        '<tool_call>{"name": "read"}</tool_call>'
    )
    assert [(c.name, c.arguments) for c in calls] == [("add", {"amount": 3}), ("add", {"amount": 4}), ("read", {})]


@pytest.mark.parametrize(
    "block, name, message",
    [
        ('{"name": "add", "arguments": {"amount": 2}', "add", "not valid JSON"),  # missing brace
        ("add(amount=2)", "", "not valid JSON"),  # Python-style: never evaluated
        ('["add", {"amount": 2}]', "", 'with a "name" string'),
        ('{"arguments": {"amount": 2}}', "", 'with a "name" string'),
        ('{"name": "add", "arguments": [2]}', "add", "must be a JSON object"),
        ('{"name": "add", "arguments": "{amount: 2}"}', "add", "not valid JSON"),
    ],
)
def test_garbled_blocks_become_calls_with_an_error(block, name, message):
    content, calls = parse_tool_call_text(f"before <tool_call>{block}</tool_call>")
    assert content == "before"
    assert len(calls) == 1
    assert calls[0].name == name and calls[0].arguments is None
    assert message in calls[0].error


def test_an_unterminated_final_block_is_read_when_it_parses():
    content, calls = parse_tool_call_text('ok <tool_call>\n{"name": "read", "arguments": {}}')
    assert content == "ok"
    assert [(c.name, c.arguments, c.error) for c in calls] == [("read", {}, None)]


def test_an_unterminated_garbled_block_is_an_error():
    _, calls = parse_tool_call_text('<tool_call>\n{"name": "add", "argu')
    assert calls[0].name == "add" and calls[0].arguments is None
    assert calls[0].error.startswith("unterminated <tool_call>")


@pytest.mark.parametrize(
    "raw, expected",
    [("", {}), (None, {}), ("  ", {}), ('{"a": 1}', {"a": 1}), ({"a": 1}, {"a": 1})],
)
def test_parse_arguments_accepts(raw, expected):
    assert parse_arguments(raw) == (expected, None)


@pytest.mark.parametrize(
    "raw, message",
    [
        ('{"a": 1', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("null", "must be a JSON object"),
        (3, "got int"),
    ],
)
def test_parse_arguments_refuses(raw, message):
    value, error = parse_arguments(raw)
    assert value is None and message in error


QWEN_ANSWERS = [
    '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>',
    '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n<tool_call>\n{"name": "ls", "a\n</tool_call>',
    'text first\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>',
    '<tool_call>{"name": "cd", "arguments": {"folder": "a"}}</tool_call>',
    '<think>\n<tool_call>\n{"name": "rm", "arguments": {}}\n</tool_call>\n</think>\n\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>\n<tool_call>\n[1, 2]\n</tool_call>',
    '<tool_call>\n{"name": "ls"}\n</tool_call>',
    '<tool_call>\n{"name": "cd", "arguments": "{\\"folder\\": \\"a\\"}"}\n</tool_call>',
    '<tool_call>\n{"name": "cd", "arguments": "not json"}\n</tool_call>',
    '<tool_call>\n{"name": "cd", "arguments": [1]}\n</tool_call>',
    '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}',
    "Done.",
    "<think>\n\n</think>\n\nDone.",
]


@pytest.mark.parametrize("text", QWEN_ANSWERS)
def test_a_qwen_answer_is_decoded_as_bfcls_qwen_handler_decodes_it(text):
    """The calls kept (in bfcl's call-string form), or the answer failing to decode, as QwenFCHandler has it."""
    pytest.importorskip("bfcl_eval")
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    from coevolve_engine.adapters.agents.answer_format import decode_qwen

    cleaned = text.split("</think>")[-1].lstrip("\n") if "</think>" in text else text
    try:
        theirs = QwenFCHandler.__new__(QwenFCHandler).decode_execute(cleaned, has_tool_call_tag=False)
    except Exception:  # noqa: BLE001 - the answer does not decode: its turn ends
        theirs = None
    reply = decode_qwen(text)
    if any(call.error for call in reply.calls):
        ours = None
    else:
        ours = [f"{c.name}({','.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in reply.calls]
    assert ours == theirs
    assert reply.dropped_calls == text.split("</think>")[-1].count("<tool_call>") - len(reply.calls)
