"""Reading JSON that comes from outside the engine (record files, trainer dumps, manifests, model answers) with
limits, so that no input can make a reader fail with a ``RecursionError`` or pick one of two values silently.

- Nesting: arrays and objects nest at most ``MAX_JSON_DEPTH`` levels. Python's reader recurses once per level
  and stops near 1,000; the store keeps values any reader of the engine must read back. The depth is measured
  on the text, without parsing it, so text nested 100,000 deep is refused as cheaply as it is read.
- Integers: at most ``MAX_INT_DIGITS`` digits, so a number of 5,000 digits is refused as JSON is, not met with
  Python's own conversion limit.
- Duplicate keys (with ``unique_keys``): one object that names a key twice is refused. Python keeps the last
  value and DuckDB's JSON functions the first, so a record with both would mean two things.

Both are reported as ``ValueError`` subclasses: ``json.JSONDecodeError`` for nesting (so a caller that names a
malformed text names this one too) and ``DuplicateKeyError`` for keys.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: how deep arrays and objects may nest in a JSON value the engine reads or stores
MAX_JSON_DEPTH = 100

#: the most digits an integer in JSON may have: far beyond any value a store's column holds (those are refused
#: by the field's own range, naming it), and far below Python's limit on converting text to int (4,300 digits)
MAX_INT_DIGITS = 100

# a string (skipped whole, so brackets inside it do not count) or one bracket
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class DuplicateKeyError(ValueError):
    """One JSON object names ``key`` twice."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"key {key!r} appears twice in one object (JSON readers disagree on which value wins)")


def json_depth(text: str, limit: int | None = None) -> tuple[int, int | None]:
    """(how deep arrays and objects nest in a JSON text, 0 for a scalar; the offset of the first bracket that goes
    deeper than ``limit``, or None). Counted on the text, without recursion, whatever the depth; brackets inside
    strings do not count; for text that is not JSON it is a guess."""
    depth = deepest = 0
    beyond = None
    for token in _TOKEN.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if beyond is None and limit is not None and depth > limit:
                    beyond = token.start()
        elif bracket in "]}":
            depth -= 1
    return deepest, beyond


def _beyond_limit(text: str | bytes) -> int | None:
    """The offset of the first bracket nested deeper than ``MAX_JSON_DEPTH`` (in the decoded text), or None."""
    wide = isinstance(text, (bytes, bytearray))
    # too few opening brackets to go deeper: counted at C speed, on bytes before decoding (a bracket is one
    # byte in UTF-8, and holds one in UTF-16/32, so the count is never too low)
    if text.count(b"[" if wide else "[") + text.count(b"{" if wide else "{") <= MAX_JSON_DEPTH:
        return None
    if wide:
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    return json_depth(text, MAX_JSON_DEPTH)[1]


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return value


def read_json(text: str | bytes, *, unique_keys: bool = False, parse_constant: Any = None) -> Any:
    """``json.loads`` with the limits above: ``json.JSONDecodeError`` for text that is not JSON or nests deeper
    than ``MAX_JSON_DEPTH``; ``DuplicateKeyError`` (with ``unique_keys``) for an object that names a key twice;
    ``UnicodeDecodeError`` for bytes that are not UTF-8 (or UTF-16/32, which ``json.loads`` also reads)."""
    beyond = _beyond_limit(text)
    if beyond is not None:
        raise json.JSONDecodeError(f"nested more than {MAX_JSON_DEPTH} levels deep", _decoded(text), beyond)
    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            decoded = _decoded(text)
            raise json.JSONDecodeError(f"a number of {len(digits.lstrip('-')):,} digits (at most "
                                       f"{MAX_INT_DIGITS} are read)", decoded, max(decoded.find(digits), 0))
        return int(digits)

    try:
        return json.loads(text, object_pairs_hook=_unique if unique_keys else None, parse_int=integer,
                          parse_constant=parse_constant)
    except RecursionError:  # not reached for text the depth count measured; kept so no reader can see one
        raise json.JSONDecodeError(f"nested more than {MAX_JSON_DEPTH} levels deep", _decoded(text), 0) from None


def _decoded(text: str | bytes) -> str:
    return text.decode(json.detect_encoding(text), "surrogatepass") if isinstance(text, (bytes, bytearray)) else text
