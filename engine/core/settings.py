"""Settings with help, and the one place a setting's value is checked against its type.

Every settings class (a run config section, a trainer's options, a curriculum strategy's ``Config``) is a
dataclass whose fields are made with ``setting(default, help)`` and read with ``help_of``. Every value a user
gives (a TOML value, a ``--set``, a ``NAME=VALUE`` string on the command line) passes through ``coerce``
before it reaches one: an integer where a number is wanted becomes a float, and a value of another kind is
refused with the kind that was wanted.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Mapping, Sequence


def setting(default: Any, help: str, **metadata: Any) -> Any:
    """A dataclass field with a one-line ``help``; a dict or list default is copied for each instance, and a
    dataclass type as the default makes a section (a nested settings class built with its defaults)."""
    metadata = {"help": help, **metadata}
    if isinstance(default, type) and dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def help_of(field: dataclasses.Field) -> str:
    """The one-line help of a settings field ('' when it has none)."""
    return field.metadata.get("help", "")


def is_section(field: dataclasses.Field) -> bool:
    """Whether a field holds a nested settings class (made by ``setting(SomeSection, help)``)."""
    return isinstance(field.default_factory, type) and dataclasses.is_dataclass(field.default_factory)


_KINDS = {type(None): "none", bool: "true or false", int: "an integer", float: "a number", str: "a string",
          dict: "a table", Mapping: "a table", list: "a list", tuple: "a list", Sequence: "a list"}
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def kind_name(hint: Any) -> str:
    """What a value of the annotated type ``hint`` is called in an error message ("an integer", ...)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(kind_name(arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    return _KINDS.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(value: Any, hint: Any, *, from_text: bool = False) -> Any:
    """``value`` as a field annotated ``hint`` takes it; ValueError naming the kind wanted when it does not fit.

    An int where a float is wanted becomes a float. With ``from_text`` (a NAME=VALUE string from the command
    line), a string where a bool, int or float is wanted is read as one first. Types this cannot judge pass."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return coerce(value, arg, from_text=from_text)
            except ValueError:
                continue
        raise ValueError(kind_name(hint))
    hint = origin or hint
    if from_text and isinstance(value, str) and hint in (bool, int, float):
        value = _read_text(value, hint)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is float and number and not _finite(value):
        raise ValueError("a finite number")  # NaN and the infinities mean nothing a setting could use
    if hint is int and isinstance(value, int) and number and not -2**63 <= value < 2**63:
        raise ValueError("an integer in [-2^63, 2^63 - 1]")  # what a store's BIGINT column holds
    if _fits(value, hint):
        return float(value) if hint is float else value
    raise ValueError(kind_name(hint))


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a number a float holds, neither NaN nor infinite (an int too large for one is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _read_text(text: str, hint: type) -> Any:
    if hint is bool:
        lowered = text.strip().lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else text
    try:
        return hint(text)
    except ValueError:
        return text


def _fits(value: Any, hint: Any) -> bool:
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (dict, Mapping):
        return isinstance(value, Mapping)
    if hint in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    return True


def field_types(settings_class: type) -> dict[str, Any]:
    """The annotated type of each field of a settings dataclass."""
    return typing.get_type_hints(settings_class)
