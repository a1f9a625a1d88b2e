"""Ids: what a task, group or trajectory id may be, and the ids and hashes computed over JSON (one text per
value, so equal values give equal ids).

The rule for ids (``ID_FIELDS`` of task and trajectory records), applied where every record enters the store
(``coevolve_engine.core.ingest``: files, ``Store.add_records``, imported rollouts, bootstrap and synthesized tasks):

- an id is compared in Unicode NFC form: it is normalized to NFC when it enters the store, so the composed and
  decomposed spellings of one name (``é`` and ``e`` + U+0301) are one task, not two;
- it is refused when empty, when it starts or ends with whitespace (a space alone included), when it holds a
  control character or a line break (NUL, tab, newline, U+2028 ...), or when it is longer than
  ``MAX_ID_LENGTH`` characters.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

#: the record fields that are ids (checked and normalized by one rule, see above)
ID_FIELDS = ("task_id", "group_id", "trajectory_id")

#: the longest id the store accepts, in characters (after NFC normalization)
MAX_ID_LENGTH = 256


def normalize_id(text: str) -> str:
    """The form an id is stored and compared in: Unicode NFC."""
    return unicodedata.normalize("NFC", text)


def canonical_json(value: Any) -> str:
    """One text per JSON value (sorted keys, no spaces): what ids, hashes and stored JSON columns are computed
    over. NaN and infinities are refused (ValueError): they are not JSON, and the store's JSON columns and the
    LLM request hashes must read back the value that was written."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def spec_json(spec: Any) -> str:
    """A spec as JSON with its keys in their own order: order can matter (BFCL's file system loads the first
    directory under ``root``), so specs are never key-sorted."""
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)


def spec_hash(spec: Any) -> str:
    """sha256 of a spec's JSON (keys in their own order)."""
    return hashlib.sha256(spec_json(spec).encode("utf-8")).hexdigest()


def synthesized_task_id(env: str, spec: Any) -> str:
    """The task id a synthesized spec gets when no synthesizer chose one: ``<env>-syn/<hash>``."""
    return f"{env}-syn/{spec_hash(spec)[:12]}"
