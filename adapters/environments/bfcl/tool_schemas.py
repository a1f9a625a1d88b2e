"""BFCL function docs turned into the OpenAI tool schemas an agent is shown.

BFCL writes its docs in its own dialect ("dict", "float", "tuple", "any"...). We translate them the way
bfcl's own OpenAI handlers do: types through bfcl's ``GORILLA_TO_OPENAPI`` map (anything unknown becomes
"string"), float parameters marked as such, and dots in function names replaced by underscores because
OpenAI tool names must match ``^[a-zA-Z0-9_-]{1,64}$``. The single-turn checker is then run with a model
configuration that applies the same renaming, exactly as the leaderboard scores function-calling models.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from coevolve_engine.adapters.environments.bfcl.shipped import bfcl_module


def tool_name(function_name: str) -> str:
    """The name an agent sees for a BFCL function: dots become underscores."""
    return re.sub(r"\.", "_", function_name)


def to_tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function doc as an OpenAI tool schema ``{"type": "function", "function": {...}}``."""
    mapping = bfcl_module("constants.type_mappings").GORILLA_TO_OPENAPI
    parameters = copy.deepcopy(doc.get("parameters") or {})
    parameters["type"] = "object"
    parameters["properties"] = _convert_properties(parameters.get("properties") or {}, mapping)
    function: dict[str, Any] = {
        "name": tool_name(doc["name"]),
        "description": doc.get("description", ""),
        "parameters": parameters,
    }
    return {"type": "function", "function": function}


def _convert_properties(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    return {name: _convert_schema(schema, mapping) for name, schema in properties.items()}


def _convert_schema(schema: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    schema = dict(schema)
    bfcl_type = schema.get("type")
    if bfcl_type == "float":
        schema["format"] = "float"
        schema["description"] = schema.get("description", "") + " This is a float type value."
    schema["type"] = mapping.get(bfcl_type, "string") if isinstance(bfcl_type, str) else "string"
    if "properties" in schema:
        schema["properties"] = _convert_properties(schema["properties"], mapping)
    if isinstance(schema.get("items"), dict):
        schema["items"] = _convert_schema(schema["items"], mapping)
    return schema
