"""The commented TOML template of a run's configuration (`coevolve-engine run --print-config`).

    print(render_template(RunConfig()))   # every field with its help and its default
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from typing import Any, Mapping

from coevolve_engine.core.settings import help_of
from coevolve_engine.loop.config import RunConfig


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, 100 - len(indent))]


def render_template(config: RunConfig | None = None,
                    plugin_help: Mapping[str, list[tuple[str, Any, str]]] | None = None) -> str:
    """A commented TOML file with every field, its help and its value; ``plugin_help`` maps a dotted table
    (e.g. 'trainer.options') to (name, default, help) rows shown commented out inside that table."""
    config = config or RunConfig()
    plugin_help = plugin_help or {}
    lines = ["# coevolve-engine run configuration. Every field is optional except trainer.model;",
             "# the values shown are the defaults. Override any field with --set KEY=VALUE.", ""]

    def emit(obj: Any, prefix: str) -> None:
        sections = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            dotted = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value) or (isinstance(value, dict) and dotted in plugin_help):
                sections.append((f, value))
                continue
            lines.extend(_comment(help_of(f)))
            lines.append(f"{f.name} = {_toml_value(value)}")
            lines.append("")
        for f, value in sections:
            dotted = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                lines.extend([f"[{dotted}]"] + _comment(help_of(f)) + [""])
                emit(value, f"{dotted}.")
            else:
                lines.extend([f"[{dotted}]"] + _comment(help_of(f)))
                for name, default, text in plugin_help[dotted]:
                    lines.extend(_comment(text))
                    shown = "(not set)" if default is None else _toml_value(default)
                    lines.append(f"# {name} = {shown}")
                for name, item in value.items():
                    lines.append(f"{name} = {_toml_value(item)}")
                lines.append("")

    emit(config, "")
    return "\n".join(lines).rstrip() + "\n"
