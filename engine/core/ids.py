"""Ids and hashes computed over JSON: one text per value, so equal values give equal ids."""

from __future__ import annotations

import hashlib
import json
from typing import Any


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
