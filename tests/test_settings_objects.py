"""Settings travel as objects: a served model is one ``Endpoint`` and how it is called one ``CallSettings``, from
the config or the command line to the call, and no function takes more than ten parameters unless its docstring
says why (docs/architecture.md, "Rules that hold everywhere").

Both are read from the sources with ``ast``: every function of ``engine/`` (the click commands of
``engine/cli/`` aside), ``adapters/`` and ``trainers/``, and every use of the name ``api_base`` in code (a
parameter, a keyword, an attribute, a variable or a dict key; docstrings and comments are text, not uses).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coevolve_engine.core.endpoint import CallSettings, Endpoint, call_options

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("engine", "adapters", "trainers")
MOST_PARAMETERS = 10
#: the words a docstring says why with
WHY = "parameters because"

#: where a server's address may be named: the endpoint type, the config and command-line options it is read
#: from, and the client that sends it (the LiteLLMAgent reads it from its AgentOptions)
READS_API_BASE = {
    "engine/core/endpoint.py",
    "engine/loop/models.py",
    "adapters/agents/base.py",
    "adapters/agents/litellm_agent.py",
}


def sources() -> list[Path]:
    return sorted(path for folder in SOURCES for path in (ROOT / folder).rglob("*.py"))


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    """How many parameters a caller can pass (``self`` and ``cls`` of a method not counted)."""
    a = function.args
    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    first = (a.posonlyargs + a.args)[:1]
    return count - (method and bool(first) and first[0].arg in ("self", "cls"))


def long_signatures(tree: ast.Module) -> list[tuple[str, int, str]]:
    """(name, parameters, the docstrings that may say why) of each function with more than ten parameters; an
    ``__init__``'s class docstring may say it too."""
    found = []

    def visit(node: ast.AST, owner: ast.ClassDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = parameters(child, owner is not None)
                if count > MOST_PARAMETERS:
                    said = (ast.get_docstring(child) or "") + (ast.get_docstring(owner) or "" if owner else "")
                    found.append((f"{owner.name}.{child.name}" if owner else child.name, count, said))
                visit(child, None)
            else:
                visit(child, owner)

    visit(tree, None)
    return found


def is_command(path: Path) -> bool:
    return path.relative_to(ROOT).parts[:2] == ("engine", "cli")


def test_the_count_sees_every_kind_of_parameter():
    tree = ast.parse("def f(a, /, b, *c, d, **e): pass\n"
                     "class K:\n"
                     "    def m(self, a, b, c, d, e, f, g, h, i, j, k): '''It takes 11 parameters because.'''\n"
                     "    def n(self, *, a, b, c, d, e, f, g, h, i, j, k): pass\n")
    assert parameters(tree.body[0], method=False) == 5
    assert [(name, count, WHY in said) for name, count, said in long_signatures(tree)] == [
        ("K.m", 11, True), ("K.n", 11, False)]


def test_no_function_takes_more_than_ten_parameters_unless_its_docstring_says_why():
    unexplained = [f"{path.relative_to(ROOT)}: {name} takes {count}"
                   for path in sources() if not is_command(path)
                   for name, count, said in long_signatures(ast.parse(path.read_text(encoding="utf-8")))
                   if WHY not in said]
    assert not unexplained, "say why in the docstring (\"It takes N parameters because ...\") or group them:\n" + \
        "\n".join(unexplained)


def api_base_uses(tree: ast.Module) -> list[int]:
    """The lines that name ``api_base`` in code."""
    lines = []
    for node in ast.walk(tree):
        named = (isinstance(node, ast.arg) and node.arg == "api_base"
                 or isinstance(node, ast.keyword) and node.arg == "api_base"
                 or isinstance(node, ast.Attribute) and node.attr == "api_base"
                 or isinstance(node, ast.Name) and node.id == "api_base"
                 or isinstance(node, ast.Constant) and node.value == "api_base")
        if named:
            lines.append(node.lineno)
    return sorted(lines)


def test_a_servers_address_is_named_only_by_the_endpoint_its_readers_and_its_client():
    assert api_base_uses(ast.parse("f(api_base=1)\nx.api_base\n{'api_base': 2}\n'''api_base'''\n")) == [1, 2, 3, 4]
    named = {str(path.relative_to(ROOT)): api_base_uses(ast.parse(path.read_text(encoding="utf-8")))
             for path in sources() if not is_command(path)}
    elsewhere = {path: lines for path, lines in named.items() if lines and path not in READS_API_BASE}
    assert not elsewhere, f"pass an Endpoint instead of naming its server: {elsewhere}"
    assert all(named[path] for path in READS_API_BASE)  # the list names no file that no longer needs it


def test_an_endpoint_never_shows_its_key_and_says_where_it_is():
    served = Endpoint("hosted_vllm/q", "http://127.0.0.1:8000/v1", "sk-secret")
    assert "sk-secret" not in repr(served) and "sk-secret" not in str(served)
    assert served.where() == "hosted_vllm/q at http://127.0.0.1:8000/v1" and Endpoint("openai/m").where() == "openai/m"
    assert served.request() == {"model": "hosted_vllm/q", "api_base": "http://127.0.0.1:8000/v1", "api_key": "sk-secret"}
    assert Endpoint("openai/m").request() == {"model": "openai/m"}
    assert Endpoint.of("openai/m") == Endpoint("openai/m") and Endpoint.of(served) is served
    with pytest.raises(ValueError, match="model must be a litellm model string"):
        Endpoint("")


def test_call_settings_are_checked_and_read_from_a_configs_keys():
    with pytest.raises(ValueError, match="timeout must be > 0"):
        CallSettings(timeout=0)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        CallSettings(timeout=float("nan"))
    with pytest.raises(ValueError, match="retries must be >= 0"):
        CallSettings(retries=-1)
    assert call_options({"timeout": 30.0, "retries": 0, "min_calls": 2}) == {
        "min_calls": 2, "calls": CallSettings(timeout=30.0, retries=0)}
    assert call_options({"retries": 5, "calls": CallSettings(timeout=9.0)}) == {
        "calls": CallSettings(timeout=9.0, retries=5)}
    assert call_options({"min_calls": 2}) == {"min_calls": 2}
