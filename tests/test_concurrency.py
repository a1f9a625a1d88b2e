"""query works while another process writes: two real processes share one store file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

WRITER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from coevolve_engine.core.store import Store

    db, folder, files = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    for i in range(files):
        path = folder / f"batch-{i}.jsonl"
        path.write_text("".join(json.dumps({"task_id": f"t{j % 7}", "step": i, "reward": (i + j) % 2})
                                + "\\n" for j in range(200)))
        with Store(db, wait=60) as store:          # one unit of work per open: the lock is held briefly
            store.ingest_trajectories(path)
        print(i, flush=True)
        time.sleep(0.3)
""")

READER = textwrap.dedent("""
    import json, subprocess, sys
    db, rounds = sys.argv[1], int(sys.argv[2])
    counts = []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-m", "coevolve_engine.cli", "query", "select count(*) as n from trajectories",
             "--format", "json", "--db", db, "--wait", "60"],
            capture_output=True, text=True, check=True).stdout
        counts.append(json.loads(out)[0]["n"])
    print(json.dumps(counts))
""")


def test_query_while_another_process_ingests(tmp_path):
    from coevolve_engine.core.store import Store

    db = tmp_path / "shared.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [{"task_id": f"t{j}"} for j in range(7)], label="tasks")
    files = 12
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(tmp_path), str(files)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "0"  # the writer is under way before the reader starts
    reader = subprocess.run([sys.executable, "-c", READER, str(db), "6"], capture_output=True, text=True, timeout=300)
    writer_out, writer_err = writer.communicate(timeout=300)
    assert writer.returncode == 0, writer_err
    assert reader.returncode == 0, reader.stderr
    counts = json.loads(reader.stdout)
    assert len(counts) == 6
    assert counts == sorted(counts), "a reader never sees rows disappear"
    assert all(c % 200 == 0 and 200 <= c <= files * 200 for c in counts), "a reader sees whole files only"
    assert counts[0] < files * 200, f"the reader should have overlapped the writer: {counts}"
    with Store(db, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM trajectories") == files * 200
        assert store.scalar("SELECT count(*) FROM ingests WHERE kind = 'trajectories'") == files
