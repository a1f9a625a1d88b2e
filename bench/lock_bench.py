"""Benchmark: does `query` answer while something writes the store? How long does each writer hold the lock?

    python bench/lock_bench.py            # 1M-row ingests (JSON lines, Parquet), the quick demo, then
                                          # patterns, synthesize, validate, weights, report on its store
    python bench/lock_bench.py --smoke    # the same writers at a tiny size (mostly start-up time)
    python bench/lock_bench.py --rows 200000 --only ingest-jsonl,ingest-parquet

While each writer runs, another process runs ``coevolve-engine query "select count(*) from trajectories"``
every 0.5 s (the command itself, called in that process: see ``reader``). A query's *wait* is how long after it
was due it answered, minus the median time of the same query on the idle store (measured first): what it spent
waiting for the store. Every writer runs with ``COEVOLVE_LOCK_HOLDS=1``, so each of its writing opens records
in ``lock_holds`` how long it held the lock (``sql/migrations/010_lock_holds.sql``); the holds of a run's phases
are those that overlap the phase's ``run_phases.started_at .. finished_at``.

Printed, one line per writer (the result lines; --smoke prints the same):

    <writer>  queries <answered>/<started> answered, longest wait <s> s; longest hold <s> s (<command>); ...

then the demo's phases, each with its longest hold, and the load average the measurements ran under.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from coevolve_engine.loop.demo import STORE_NAME
from coevolve_engine.core.store import Store

_SCRIPT = Path(sys.executable).parent / "coevolve-engine"
ENGINE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "coevolve_engine.cli"]
QUERY = "select count(*) from trajectories"
WRITERS = ("ingest-jsonl", "ingest-parquet", "demo", "patterns", "synthesize", "validate", "weights", "report")


@dataclass
class Watch:
    """The queries scheduled while one writer ran."""

    started: int = 0
    answered: int = 0
    waits: list[float] = field(default_factory=list)  # seconds beyond the idle query's, from its scheduled start
    failures: list[str] = field(default_factory=list)
    idle: float = 0.0  # the median seconds of a query on the idle store


def engine(*args: str) -> list[str]:
    return [*ENGINE, *map(str, args)]


def environment() -> dict[str, str]:
    return {**os.environ, "COEVOLVE_LOCK_HOLDS": "1", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def reader(db: Path, out: Path, stop: Path, every: float) -> None:
    """The querying process: `query` (the command itself, in this process: a new interpreter per query would
    cost more than the query) on the idle store three times, then every ``every`` seconds until ``stop``
    exists. A query that cannot start on time (the one before still waits) starts late, and its wait is
    counted from when it was due. Writes one JSON line per query: due, ended (seconds), error."""
    import contextlib
    import io
    import json

    from coevolve_engine.cli import cli

    def one() -> str | None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                cli.main(["query", "--db", str(db), "--wait", "120", QUERY], standalone_mode=False)
        except Exception as exc:  # noqa: BLE001 - a failed query is a result here
            return str(exc)[-200:]
        return None

    with out.open("w") as lines:
        for _ in range(3):
            began = time.perf_counter()
            error = one()
            lines.write(json.dumps({"idle": time.perf_counter() - began, "error": error}) + "\n")
        lines.write(json.dumps({"ready": True}) + "\n")
        lines.flush()
        origin = time.perf_counter()
        due = origin
        while not stop.exists():
            time.sleep(max(0.0, due - time.perf_counter()))
            error = one()
            lines.write(json.dumps({"due": due - origin, "ended": time.perf_counter() - origin, "error": error}) + "\n")
            lines.flush()
            due += every
            while due < time.perf_counter() - every:  # several ticks passed while it waited: one query stands for them
                due += every


def watched(db: Path, command: list[str], log: Path, every: float = 0.5) -> tuple[Watch, float, int]:
    """Run ``command`` while another process queries the store every ``every`` seconds; the queries, the
    command's seconds and its exit code."""
    import json

    out, stop = log.with_suffix(".queries.jsonl"), log.with_suffix(".stop")
    stop.unlink(missing_ok=True)
    querying = subprocess.Popen([sys.executable, __file__, "--reader", str(db), str(out), str(stop), str(every)],
                                env=environment())
    while not (out.exists() and '"ready"' in out.read_text()):
        if querying.poll() is not None:
            raise SystemExit(f"the querying process ended early ({querying.returncode})")
        time.sleep(0.05)
    started = time.perf_counter()
    with log.open("w") as output:
        code = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=environment()).returncode
    seconds = time.perf_counter() - started
    stop.touch()
    querying.wait()
    watch = Watch()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    idles = [row["idle"] for row in rows if "idle" in row and not row["error"]]
    watch.idle = statistics.median(idles) if idles else 0.0
    for row in rows:
        if "due" not in row:
            continue
        watch.started += 1
        if row["error"]:
            watch.failures.append(row["error"])
        else:
            watch.answered += 1
            watch.waits.append(max(0.0, row["ended"] - row["due"] - watch.idle))
    return watch, seconds, code


def holds(db: Path, since: float) -> list[tuple[str, float, float, object, object]]:
    """(command, seconds, waited, taken, released) of every hold recorded after ``since`` (a time.time())."""
    with Store(db, read_only=True, wait=120) as store:
        return store.execute(
            "SELECT command, seconds, waited, released_at - to_microseconds(CAST(seconds * 1e6 AS BIGINT)), "
            "released_at FROM lock_holds WHERE released_at >= make_timestamp(CAST($since * 1e6 AS BIGINT)) "
            "ORDER BY seconds DESC", {"since": since}).fetchall()


def phase_holds(db: Path, since: float) -> list[tuple[int, str, float, int]]:
    """(round, phase, longest hold, holds) of every phase of the run, a hold counted in each phase it overlaps."""
    with Store(db, read_only=True, wait=120) as store:
        return store.execute("""
            WITH held AS (
                SELECT seconds, released_at - to_microseconds(CAST(seconds * 1e6 AS BIGINT)) AS taken, released_at
                FROM lock_holds WHERE released_at >= make_timestamp(CAST($since * 1e6 AS BIGINT))
            )
            SELECT p.round, p.phase, max(h.seconds), count(h.seconds)
            FROM run_phases AS p LEFT JOIN held AS h
              ON h.taken <= coalesce(p.finished_at, current_timestamp) AND h.released_at >= p.started_at
            GROUP BY ALL ORDER BY min(p.started_at)
        """, {"since": since}).fetchall()


def result_line(name: str, watch: Watch, held: list, seconds: float, code: int) -> str:
    waits = watch.waits
    longest_wait = max(waits, default=0.0)
    top = held[0] if held else None
    hold = f"longest hold {top[1]:.2f} s ({top[0]})" if top else "longest hold - (no writing open)"
    status = "" if code == 0 else f"; writer exited {code}"
    failed = f"; {len(watch.failures)} failed: {watch.failures[0]}" if watch.failures else ""
    median = statistics.median(waits) if waits else 0.0
    return (f"{name:<15} queries {watch.answered}/{watch.started} answered, longest wait {longest_wait:.2f} s "
            f"(median {median:.2f} s, beyond its {watch.idle:.2f} s on the idle store); {hold}; {len(held)} holds, "
            f"{sum(h[1] for h in held):.2f} s in all; writer {seconds:.1f} s{status}{failed}")


def generate_trajectories(folder: Path, rows: int) -> tuple[Path, Path]:
    """The same rows as Parquet and as JSON lines (signals_bench's generator: tasks, steps, groups, actions)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from signals_bench import generate

    parquet = folder / "trajectories.parquet"
    generate(parquet, rows, max(1, rows // 100), 30, 8, 0)
    jsonl = folder / "trajectories.jsonl"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * REPLACE (CAST(actions AS JSON) AS actions) FROM read_parquet('{parquet}')) "
                f"TO '{jsonl}' (FORMAT json)")  # actions as a JSON list, not a string
    con.close()
    return jsonl, parquet


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny size of everything (2,000 rows, a demo of one step without feedback); what is "
                             "left is the start-up of the demo and of each command")
    parser.add_argument("--rows", type=int, default=1_000_000, help="trajectories each ingest reads")
    parser.add_argument("--only", default=",".join(WRITERS), help=f"comma-separated writers of {WRITERS}")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between two queries")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    parser.add_argument("--reader", nargs=4, metavar=("DB", "OUT", "STOP", "EVERY"), help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.reader:
        db, out, stop, every = args.reader
        reader(Path(db), Path(out), Path(stop), float(every))
        return 0
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in only if name not in WRITERS]
    if unknown:
        parser.error(f"unknown writers {unknown}; known: {', '.join(WRITERS)}")
    rows = 2_000 if args.smoke else args.rows
    folder = args.keep or Path(tempfile.mkdtemp(prefix="lock-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    loads = []

    def measure(name: str, db: Path, command: list[str]) -> None:
        since = time.time()
        loads.append(os.getloadavg()[0])
        watch, seconds, code = watched(db, command, folder / f"{name.split()[0]}.log", args.every)
        print(result_line(name, watch, holds(db, since), seconds, code), flush=True)

    try:
        ingests = [name for name in only if name.startswith("ingest-")]
        if ingests:
            jsonl, parquet = generate_trajectories(folder, rows)
            print(f"{rows:,} trajectories of {max(1, rows // 100):,} tasks (--create-tasks), a query every "
                  f"{args.every} s", flush=True)
        for name in ingests:
            db = folder / f"{name}.duckdb"
            subprocess.run(engine("init", "--db", db), check=True, capture_output=True, env=environment())
            measure(name, db, engine("ingest", "trajectories", jsonl if name == "ingest-jsonl" else parquet,
                                     "--create-tasks", "--db", db))
        demo_folder = folder / "demo"
        db = demo_folder / STORE_NAME
        if "demo" in only or not db.exists():
            if any(not name.startswith("ingest-") for name in only):
                shutil.rmtree(demo_folder, ignore_errors=True)
                demo_folder.mkdir(parents=True)
                subprocess.run(engine("init", "--db", db), check=True, capture_output=True, env=environment())
                since = time.time()
                demo = engine("demo", "--quick", "--dir", demo_folder)
                if args.smoke:  # one round of one step, no evaluation, no feedback: what is left runs briefly
                    demo += ["--rounds", "1", "--set", "warmup.steps=2", "--set", "trainer.steps_per_round=1",
                             "--set", "eval.every=0", "--set", "synthesis.synthesizer=none"]
                measure("demo --quick", db, demo)
                for round_, phase, longest, count in phase_holds(db, since):
                    shown = "-" if longest is None else f"{longest:.2f} s"
                    print(f"  round {round_} {phase:<11} longest hold {shown} ({count} holds)", flush=True)
        if db.exists():
            with Store(db, read_only=True) as store:
                latest = str(store.scalar("SELECT coalesce(max(round), -1) + 1 FROM failure_patterns"))
            commands = {
                "patterns": engine("patterns", "--db", db, "--round", latest),
                "synthesize": engine("synthesize", "--db", db, "--round", latest, "--synthesizer", "offline:calc"),
                "validate": engine("validate", "--db", db, "--round", latest, "--no-progress"),
                "weights": engine("weights", "--db", db),
                "report": engine("report", "--db", db, "-o", folder / "report.html", "--force"),
            }
            for name in (name for name in WRITERS if name in commands and name in only):
                measure(name, db, commands[name])
        kept = f"; logs in {folder}" if args.keep else ""
        print(f"load average (1 min) at each start: {', '.join(f'{load:.1f}' for load in loads)} on "
              f"{os.cpu_count()} cores{kept}")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
