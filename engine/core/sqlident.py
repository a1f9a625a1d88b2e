"""Quoting of SQL identifiers. Values are always bound as parameters; only identifiers are quoted, and
only names the engine knows (field names, view names) ever reach this function."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
