"""An ingest holds the store's lock only for its insert: it reads, checks and deduplicates first, and rechecks
under the lock what another writer ingested meanwhile. Writing opens record their holds when asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coevolve_engine.core.ingest import unit as ingest_module
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.store import Store, ingest_path
from conftest import write_jsonl

ENGINE = [sys.executable, "-m", "coevolve_engine.cli"]


def rollouts(first: int, last: int) -> list[dict]:
    """Rollouts of 10 tasks, 4 per group, numbered first..last-1 (rollout n is the same record in every file)."""
    return [{"task_id": f"t{n % 10}", "step": n // 40, "reward": (n % 4) / 4,
             "actions": [{"name": "add", "arguments": {"n": n}}]} for n in range(first, last)]


def stored(db: Path) -> tuple[int, int, int, int]:
    """(trajectories, distinct trajectory ids, tasks, sum of ingests.added)."""
    with Store(db, read_only=True) as store:
        return store.execute(
            "SELECT (SELECT count(*) FROM trajectories), (SELECT count(DISTINCT trajectory_id) FROM trajectories), "
            "(SELECT count(*) FROM tasks), (SELECT sum(added) FROM ingests)").fetchall()[0]


def cli_ingest(db: Path, path: Path, wait: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*ENGINE, "ingest", "trajectories", str(path), "--create-tasks", "--db", str(db),
                           "--wait", str(wait)], capture_output=True, text=True)


@pytest.fixture
def between_read_and_write(monkeypatch):
    """between_read_and_write(action): run ``action`` once, after an ingest's read of the store and before it
    opens the store for writing (while it checks the file against what it read)."""
    def install(action):
        checks = ingest_module.check_against_store
        done = []

        def check_then_act(*args, **kwargs):
            checks(*args, **kwargs)
            if not done:
                done.append(True)
                action()

        monkeypatch.setattr(ingest_module, "check_against_store", check_then_act)
    return install


def test_the_store_is_not_locked_while_an_ingest_checks(tmp_path, db_path, between_read_and_write):
    Store(db_path).close()
    answers = []
    between_read_and_write(lambda: answers.append(subprocess.run(
        [*ENGINE, "query", "--db", str(db_path), "--wait", "0", "select 42"], capture_output=True, text=True)))
    report = ingest_path(db_path, write_jsonl(tmp_path / "a.jsonl", rollouts(0, 100)), kind="trajectories",
                         create_tasks=True)
    assert report.added == 100
    assert answers[0].returncode == 0, answers[0].stderr
    assert "42" in answers[0].stdout


def test_a_writer_between_the_read_and_the_insert_is_caught_up_with(tmp_path, db_path, between_read_and_write):
    """Another process ingests an overlapping file after this ingest read the store: each record ends up
    once, and the placeholder tasks the other one stored are not stored again."""
    Store(db_path).close()
    other = write_jsonl(tmp_path / "other.jsonl", rollouts(50, 150))
    between_read_and_write(lambda: cli_ingest(db_path, other, wait=0).check_returncode())
    report = ingest_path(db_path, write_jsonl(tmp_path / "mine.jsonl", rollouts(0, 100)), kind="trajectories",
                         create_tasks=True)
    assert report.added == 50  # 50..99 came from the other file meanwhile
    assert stored(db_path) == (150, 150, 10, 150)


def test_a_conflict_that_arrives_meanwhile_is_refused_under_the_lock(tmp_path, db_path, between_read_and_write):
    Store(db_path).close()
    changed = [{**rollouts(7, 8)[0], "trajectory_id": "fixed", "reward": 1.0}]
    between_read_and_write(lambda: cli_ingest(db_path, write_jsonl(tmp_path / "other.jsonl", changed),
                                              wait=0).check_returncode())
    mine = [{**record, "trajectory_id": "fixed" if n == 7 else f"mine-{n}"}
            for n, record in enumerate(rollouts(0, 10))]
    with pytest.raises(IngestError, match=r"mine.jsonl, line 8, field 'trajectory_id': trajectory 'fixed' is already "
                                          r"in the store with different content \(from .*other.jsonl, line 1\)"):
        ingest_path(db_path, write_jsonl(tmp_path / "mine.jsonl", mine), kind="trajectories", create_tasks=True)
    assert stored(db_path) == (1, 1, 1, 1)  # the other file's record and placeholder task only


def test_a_held_out_task_that_arrives_meanwhile_is_refused_under_the_lock(tmp_path, db_path,
                                                                           between_read_and_write):
    Store(db_path).close()
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"task_id": "t3", "prompt": "three", "split": "eval"}])
    between_read_and_write(lambda: subprocess.run(
        [*ENGINE, "ingest", "tasks", str(tasks), "--db", str(db_path), "--wait", "0"], check=True,
        capture_output=True))
    with pytest.raises(IngestError, match=r"task 't3' is a held-out eval task"):
        ingest_path(db_path, write_jsonl(tmp_path / "mine.jsonl", rollouts(0, 10)), kind="trajectories",
                    create_tasks=True)
    assert stored(db_path) == (0, 0, 1, 1)


def test_two_processes_ingesting_overlapping_files_at_once_store_each_record_once(tmp_path, db_path):
    Store(db_path).close()
    first = write_jsonl(tmp_path / "first.jsonl", rollouts(0, 3000))
    second = write_jsonl(tmp_path / "second.jsonl", rollouts(1500, 4500))
    command = lambda path: [*ENGINE, "ingest", "trajectories", str(path), "--create-tasks", "--db",  # noqa: E731
                            str(db_path), "--wait", "60"]
    writers = [subprocess.Popen(command(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for path in (first, second)]
    results = [writer.communicate(timeout=120) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], results
    assert stored(db_path) == (4500, 4500, 10, 4500)
    # and the same ids as one process ingesting both files one after the other
    alone = tmp_path / "alone.duckdb"
    Store(alone).close()
    for path in (first, second):
        ingest_path(alone, path, kind="trajectories", create_tasks=True)
    ids = {}
    for path in (db_path, alone):
        with Store(path, read_only=True) as store:
            ids[path] = store.execute("SELECT trajectory_id, action_pattern, ingest_line FROM trajectories "
                                      "ORDER BY ALL").fetchall()
    assert [row[:2] for row in ids[db_path]] == [row[:2] for row in ids[alone]]


def test_writing_opens_record_their_holds_when_asked(db_path, monkeypatch):
    Store(db_path).close()
    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM lock_holds") == 0  # not asked: nothing recorded
    monkeypatch.setenv("COEVOLVE_LOCK_HOLDS", "1")
    with Store(db_path) as store:
        store.execute("CREATE TABLE busy AS SELECT 1 AS x")
    with Store(db_path, read_only=True) as store:  # a read-only open records nothing
        rows = store.execute("SELECT command, pid, waited, seconds FROM lock_holds").fetchall()
    assert len(rows) == 1
    command, pid, waited, seconds = rows[0]
    assert pid == __import__("os").getpid() and command
    assert 0 <= waited < 5 and 0 <= seconds < 5
