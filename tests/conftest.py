"""Shared fixtures: a fresh store per test, and helpers to write literal records to files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture
def store(db_path: Path):
    from coevolve_engine.store import Store

    with Store(db_path) as opened:
        yield opened


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.fixture
def jsonl(tmp_path: Path):
    """jsonl(records, name='records.jsonl') writes records as JSON lines and returns the path."""
    counter = iter(range(1_000_000))

    def make(records: list[dict], name: str | None = None) -> Path:
        return write_jsonl(tmp_path / (name or f"records-{next(counter)}.jsonl"), records)

    return make


@pytest.fixture
def scripted_server():
    """A scripted OpenAI-compatible server on 127.0.0.1 (see tests/scripted_server.py), stopped afterwards."""
    from scripted_server import ScriptedServer

    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()
