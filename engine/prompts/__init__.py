"""Prompts kept as versioned files: ``<name>.md`` in this package, one per prompt, loaded by name.

A prompt file opens with its version and splits into chat messages at role lines::

    <!-- version: 2 -->
    <!-- role: system -->
    You analyse failures of a tool-using agent...
    <!-- role: user -->
    Failure pattern $pattern_id ...

Placeholders are ``string.Template`` ones (``$name`` or ``${name}``; ``$$`` is a literal dollar sign): values
are pasted in as text, never evaluated. ``Prompt.render`` refuses missing and unexpected values. A file
without role lines is one user message. Change a prompt's wording -> raise its version, so that every LLM call
logged in ``llm_calls.prompt_version`` (``name@version``) says which wording it used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from string import Template

from coevolve_engine.core.errors import CoevolveError

_VERSION = re.compile(r"^<!--\s*version:\s*([A-Za-z0-9._-]+)\s*-->\s*$")
_ROLE = re.compile(r"^<!--\s*role:\s*(system|user|assistant)\s*-->\s*$", re.MULTILINE)
_NAME = re.compile(r"^[a-z0-9_]+$")


class PromptError(CoevolveError):
    """A prompt file is missing or malformed, or was rendered with the wrong values."""


def _placeholders(text: str, where: str) -> frozenset[str]:
    names = set()
    for match in Template.pattern.finditer(text):
        if match.group("invalid") is not None:
            line = text.count("\n", 0, match.start()) + 1
            raise PromptError(f"{where}, line {line}: '$' must start a placeholder ($name) or be written $$")
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
    return frozenset(names)


@dataclass(frozen=True)
class Prompt:
    """A prompt template: ``text`` is the file after its version line."""

    name: str
    version: str
    text: str

    @property
    def id(self) -> str:
        """'name@version', as recorded in llm_calls.prompt_version."""
        return f"{self.name}@{self.version}"

    @property
    def parts(self) -> tuple[tuple[str, str], ...]:
        """(role, template text) in order."""
        pieces = _ROLE.split(self.text)
        if len(pieces) == 1:
            return (("user", self.text.strip()),)
        if pieces[0].strip():
            raise PromptError(f"prompt {self.id}: text before the first '<!-- role: ... -->' line")
        return tuple((role, body.strip()) for role, body in zip(pieces[1::2], pieces[2::2]))

    @property
    def placeholders(self) -> frozenset[str]:
        return _placeholders(self.text, f"prompt {self.id}")

    def render(self, **values: object) -> list[dict[str, str]]:
        """The chat messages with every placeholder replaced by ``str(value)``."""
        wanted = self.placeholders
        missing = sorted(wanted - values.keys())
        unexpected = sorted(values.keys() - wanted)
        if missing:
            raise PromptError(f"prompt {self.id} needs values for: {', '.join(missing)}")
        if unexpected:
            raise PromptError(f"prompt {self.id} has no placeholder for: {', '.join(unexpected)}")
        strings = {key: str(value) for key, value in values.items()}
        return [{"role": role, "content": Template(body).substitute(strings)} for role, body in self.parts]


def available() -> list[str]:
    """The names of the prompts shipped with the engine."""
    return sorted(entry.name.removesuffix(".md") for entry in files(__name__).iterdir() if entry.name.endswith(".md"))


def parse_prompt(name: str, source: str) -> Prompt:
    """A Prompt from a file's text; the first line must be ``<!-- version: V -->``."""
    first, _, rest = source.partition("\n")
    match = _VERSION.match(first.strip())
    if not match:
        raise PromptError(f"prompt file {name}.md must start with a line '<!-- version: N -->', found {first!r}")
    prompt = Prompt(name, match.group(1), rest)
    prompt.parts  # noqa: B018 - checks the role lines
    _placeholders(rest, f"prompt file {name}.md")
    return prompt


@cache
def load_prompt(name: str) -> Prompt:
    """The shipped prompt ``<name>.md``."""
    if not _NAME.match(name) or name not in available():
        raise PromptError(f"no prompt named {name!r}; the prompts are: {', '.join(available())}")
    return parse_prompt(name, (files(__name__) / f"{name}.md").read_text(encoding="utf-8"))
