"""The hostile replay: every defect a hostile-user probe found, typed at the real command line in a fresh process
under a timeout, must be refused cleanly: a non-zero exit, a message, no traceback, nothing written (the store's
tables and every file in the folder as they were) and nothing hung.

Run it alone with `pytest tests/test_store_safety_replay.py`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_store_safety import table_hashes
from test_store_safety_numbers import sample_once  # noqa: F401 (a fixture)

TIMEOUT = 120  # seconds; a command that waits on a FIFO or a lock forever fails the case instead of the suite


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (the store left out): its kind and, for a regular file, a hash of its bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.name.startswith("store.duckdb"):
            continue
        if path.is_symlink():
            found[str(path)] = "link -> " + os.readlink(path)
        elif path.is_file():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[str(path)] = "fifo" if path.is_fifo() else "dir" if path.is_dir() else "other"
    return found


@pytest.fixture
def place(sample_once, tmp_path):
    """A folder with a copy of the sample store and what the cases name: a --read folder with a user's file, a
    folder with a schema.sql that writes when run, a FIFO, notes, a link to them, a CSV file, a trainer dump."""
    shutil.copyfile(sample_once, tmp_path / "store.duckdb")
    (tmp_path / "rd").mkdir()
    (tmp_path / "rd" / "mine.csv").write_text("n\n1\n")
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "schema.sql").write_text(f"COPY (SELECT 1) TO '{tmp_path}/imp/planted.csv';\n"
                                                 f"ATTACH '{tmp_path}/imp/second.duckdb' AS second;\n")
    (tmp_path / "imp" / "load.sql").write_text("")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "notes.txt").write_text("call the lab about the cluster\n")
    (tmp_path / "NOTES").write_text("buy milk\n")
    (tmp_path / "link.csv").symlink_to("notes.txt")
    (tmp_path / "same.csv").write_text("a,b\n1,2\n")
    (tmp_path / "big.jsonl").write_text('{"task_id": "files-001", "step": ' + "9" * 5000 + ', "reward": 1}\n')
    (tmp_path / "dump.jsonl").write_text('{"index": 0, "score": 1.0, "step": 0}\n')
    return tmp_path


CASES = {
    "prepare-execute-copy": ["query", "PREPARE p AS COPY (SELECT task_id FROM tasks) TO '{d}/rd/mine.csv'; "
                             "EXECUTE p", "--read", "{d}/rd"],
    "prepare-execute-copy-write": ["query", "--write", "PREPARE p AS COPY (SELECT 1) TO '{d}/rd/prep.csv'; "
                                   "EXECUTE p", "--read", "{d}/rd"],
    "explain-analyze-copy": ["query", "EXPLAIN ANALYZE COPY (SELECT 1) TO '{d}/rd/expl.csv'", "--read", "{d}/rd"],
    "explain-analyze-copy-write": ["query", "--write", "EXPLAIN ANALYZE COPY (SELECT 1) TO '{d}/rd/expl.csv'",
                                   "--read", "{d}/rd"],
    "pragma-import-database": ["query", "PRAGMA import_database('{d}/imp')", "--read", "{d}/imp"],
    "pragma-import-database-write": ["query", "--write", "PRAGMA import_database('{d}/imp')", "--read", "{d}/imp"],
    "guard-shadowed-by-a-temp-table": ["query", "--write", "create temp table trajectories as select * from "
                                       "main.trajectories where false; update store.main.tasks set split='eval' "
                                       "where task_id='files-001'"],
    "output-fifo": ["query", "select 1 as a", "-o", "{d}/fifo"],
    "output-fifo-force": ["query", "select 1 as a", "-o", "{d}/fifo", "--force"],
    "output-fifo-write": ["query", "--write", "select 1 as a", "-o", "{d}/fifo"],
    "output-dev-stdout": ["query", "select 1 as a", "-o", "/dev/stdout"],
    "output-proc-fd": ["query", "select 1 as a", "-o", "/proc/self/fd/1", "--force"],
    "update-extensions": ["query", "UPDATE EXTENSIONS"],
    "json-step-of-5000-digits": ["ingest", "trajectories", "{d}/big.jsonl"],
    "signals-threshold-nan": ["signals", "--threshold", "nan"],
    "signals-theta-nan": ["signals", "--theta", "nan"],
    "weights-threshold-nan": ["weights", "--threshold", "nan"],
    "drift-theta-nan": ["drift", "--theta", "nan"],
    "report-threshold-nan": ["report", "--threshold", "nan"],
    "weights-overflowing-total": ["weights", "--set", "forgetting=1e308", "--set", "boundary=1e308"],
    "reward-range-infinite": ["import-rollouts", "{d}/dump.jsonl", "--reward-range", "-inf", "inf"],
    "run-wait-nan": ["run", "--wait", "nan"],
    "query-wait-nan": ["query", "select 1", "--wait", "nan"],
    "signals-window-beyond-bigint": ["signals", "-w", "9223372036854775808"],
    "signals-min-n-1e20": ["signals", "--min-n", "1e20"],
    "signals-top-1e20": ["signals", "--top", "1e20"],
    "set-search-path": ["query", "SET search_path = 'main'"],
    "checkpoint-table-function": ["query", "select * from checkpoint()"],
    "output-over-notes": ["query", "select 1 as a", "-o", "{d}/notes.txt"],
    "output-over-extensionless-notes": ["query", "select 1 as a", "--format", "csv", "-o", "{d}/NOTES"],
    "output-through-a-link-to-notes": ["query", "select 1 as a, 2 as b", "--format", "csv", "-o", "{d}/link.csv"],
    "output-under-a-file": ["query", "select 1 as a", "-o", "{d}/same.csv/x.csv"],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_hostile_replay_refuses_each_defect_cleanly(place, name):
    args = [arg.replace("{d}", str(place)) for arg in CASES[name]]
    store = place / "store.duckdb"
    tables, files = table_hashes(store), _tree(place)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run([sys.executable, "-m", "coevolve_engine.cli", *args, "--db", str(store)],
                            capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=place)
    assert result.returncode != 0, (name, result.stdout, result.stderr)
    assert "Error" in result.stderr and "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "Warning" not in result.stderr, result.stderr  # numpy's overflow warnings included
    assert table_hashes(store) == tables and _tree(place) == files


def test_a_refused_set_of_demo_adds_no_ingests_rows_to_its_store(sample_once, tmp_path):
    folder = tmp_path / "demo"
    folder.mkdir()
    store = folder / "demo.duckdb"
    shutil.copyfile(sample_once, store)
    tables = table_hashes(store)
    result = subprocess.run([sys.executable, "-m", "coevolve_engine.cli", "demo", "--dir", str(folder), "--quick",
                             "--set", "trainer.options.learning_rate=abc"], capture_output=True, text=True,
                            timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stderr
    assert "--set trainer.options.learning_rate=abc" in result.stderr and "Traceback" not in result.stderr
    assert table_hashes(store) == tables
    assert sorted(p.name for p in folder.iterdir()) == ["demo.duckdb", "run.log"]


def test_a_placeholder_task_among_a_rounds_weights_is_refused_with_what_to_do(sample_once, tmp_path):
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.core.errors import CoevolveError
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers import TRAINERS
    from coevolve_engine.trainers.base import BatchSource
    from coevolve_engine.trainers.trl_grpo.trainer import TRLGRPOConfig

    calc = load_environment("calc")
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", list(calc.load_tasks(split="seed", n=2)), label="calc tasks")
        store.add_records("tasks", [{"task_id": "mine-001", "source": "placeholder"}], label="a user's placeholder")
        calc_ids = [task_id for (task_id,) in store.execute("SELECT task_id FROM tasks WHERE env = 'calc'").fetchall()]
    source = BatchSource({**{task_id: 1.0 for task_id in calc_ids}, "mine-001": 1.0})
    config = TRLGRPOConfig(model=str(tmp_path / "policy"), output_dir=str(tmp_path / "out"))
    with pytest.raises(CoevolveError) as refused:
        TRAINERS.load("trl-grpo").from_store(db, config, calc, source)
    message = str(refused.value)
    assert "1 weighted task(s) are not calc tasks" in message and "mine-001" in message
    assert "delete from tasks where task_id = 'ID'" in message and "ingest tasks" in message


def test_a_runs_weights_leave_out_a_placeholder_and_say_so(tmp_path):
    """A run trains on its environment's tasks: its weights phase weighs those alone (a user's placeholder in a
    demo store no longer stops every later demo at train), and the weight set's reason counts what it left out;
    `weights` without an environment still weighs every training task."""
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.core.store import Store
    from coevolve_engine.curriculum.weights import compute_weights

    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", list(load_environment("calc").load_tasks(split="seed", n=2)), label="calc tasks")
        store.add_records("tasks", [{"task_id": "mine-001", "source": "placeholder"}], label="a user's placeholder")
        run = compute_weights(store, 0, "uniform", env="calc")
        every = compute_weights(store, 1, "uniform")
        reasons = dict(store.execute("SELECT round, reason FROM weight_sets").fetchall())
    assert "mine-001" not in list(run.task_ids) and len(run.task_ids) == 2
    assert "1 task not of environment calc left out" in reasons[0]
    assert "mine-001" in list(every.task_ids) and "left out" not in reasons[1]
