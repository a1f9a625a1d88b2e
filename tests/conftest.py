"""Shared fixtures: a fresh store per test, helpers to write literal records to files, and a store of failure
patterns over real BFCL tasks (built once per session) with a fresh copy of it per test."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

# The tests run in one environment whether started by the README's command or by .ci/run (which exports the
# first two and runs where CI is set): offline whatever the shell says, and CI unset, which changes what TRL
# (telemetry) and transformers (whether its log records reach the root logger) do. The processes the tests
# start inherit this.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.pop("CI", None)
# the embeddings of read-only stores are cached in a folder of the tests' own, never the user's (see the fixture below)
# (removed when the tests end, so that runs of the suite leave no folders behind)
os.environ["COEVOLVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="coevolve-test-cache-")
atexit.register(shutil.rmtree, os.environ["COEVOLVE_CACHE_DIR"], ignore_errors=True)

#: the files of the fault matrix: what a hostile but fair user can type, and what it must never do to a store
FAULT_MATRIX = "test_store_safety"


def pytest_terminal_summary(terminalreporter) -> None:
    """After the tests, one line counting the fault matrix's cases (every test of tests/test_store_safety*.py that
    ran, each parameter a case) and how they ended."""
    ended: dict[str, str] = {}
    for outcome in ("passed", "skipped", "failed", "error"):  # a worse outcome of the same case wins
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            in_matrix = Path(nodeid.split("::")[0]).name.startswith(FAULT_MATRIX)
            if in_matrix and (outcome != "passed" or report.when == "call"):
                ended[nodeid] = outcome
    if ended:
        counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(Counter(ended.values()).items()))
        terminalreporter.write_line(f"fault matrix (tests/{FAULT_MATRIX}*.py): {len(ended)} cases, of which {counts}")


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch) -> Path:
    """Each test its own cache folder, so what one test cached is not another's."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("COEVOLVE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture
def store(db_path: Path):
    from coevolve_engine.core.store import Store

    with Store(db_path) as opened:
        yield opened


@pytest.fixture(scope="session")
def pattern_db(tmp_path_factory) -> Path:
    """A store with 30 BFCL tasks, rollouts flagging them and one failure pattern per signal (bfcl_patterns.py).
    A module whose synthesizer needs other patterns defines its own ``pattern_db``."""
    pytest.importorskip("bfcl_eval")
    from bfcl_patterns import build_pattern_store

    path = tmp_path_factory.mktemp("bfcl-patterns") / "store.duckdb"
    build_pattern_store(path, tasks=30)
    return path


@pytest.fixture
def db(pattern_db: Path, tmp_path: Path) -> Path:
    """A fresh copy of ``pattern_db`` that one test may change."""
    copied = tmp_path / "store.duckdb"
    shutil.copy(pattern_db, copied)
    return copied


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
