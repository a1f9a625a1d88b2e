"""Stress test: `demo --quick` killed with SIGKILL at random moments, resumed, must end in the uninterrupted store.

    python bench/kill_stress.py --runs 50                    # 50 killed-and-resumed demos (half killed twice)
    python bench/kill_stress.py --runs 10 --load 4           # with 4 busy processes beside each run
    python bench/kill_stress.py --runs 5 --reference DIR     # compare with a finished `demo --quick --dir DIR`
    python bench/kill_stress.py --smoke                      # the reference and one run, killed once

First one `demo --quick` runs without interruption (the reference; its wall time bounds the kill moments). Then
each run starts `demo --quick` in a folder of its own and kills it (its whole process group, SIGKILL) at a
moment drawn uniformly from [1 s, 95% of the reference's time]; every second run is killed again, in the
process that resumes it, at a moment drawn the same way over what remained. The moments come from
``random.Random(f"{seed}:{run}")``, so a run can be repeated. Then `demo --quick` runs to its end, and every table
of the store is compared with the reference's, row for row (as sorted sets), after what depends on when and
where a run happened is normalised:

- the run's folder in any text (paths) becomes ``<DIR>``, and an evaluation's id (a hash of its checkpoint's
  path) becomes its label and step;
- columns of clock time (TIMESTAMP), seconds and latencies, process ids and hosts, and ``run_phases.attempts``
  (a resumed phase counts its attempts) are left out, and so are JSON keys of durations (``*seconds*``,
  ``timings``, ``*_s``, peak memory, ...);
- ``store_lease`` (who holds the store) and ``lock_holds`` are left out, and so are the bookkeeping columns
  ``ingest_id``, ``ingest_line``, ``call_id`` and the ``ingests`` log itself (a killed attempt's ingest is
  recorded; what it ingested is removed and compared through ``trajectories``).

Every other column is compared exactly: rewards, weights, distances and embedding vectors to the last bit.
Printed: one line per run (kill moments, the resumed phases, the differing tables), then the total with the load
average it ran under; ``--out FILE`` also writes every run as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from coevolve_engine.loop.demo import STORE_NAME

_SCRIPT = Path(sys.executable).parent / "coevolve-engine"
ENGINE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "coevolve_engine.cli"]
# one torch thread unless OMP_NUM_THREADS says otherwise: on a shared machine two threads that wait for each other
# are slower than one; the reference and every attempt run alike
ENV = {"OMP_NUM_THREADS": "1", **os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
       "PYTHONUNBUFFERED": "1"}

LEFT_OUT_TABLES = {"store_lease", "lock_holds", "ingests"}
LEFT_OUT_COLUMNS = {"seconds", "latency_s", "waited", "pid", "host", "process_start", "attempts", "ingest_id",
                    "ingest_line", "call_id"}
CLOCK_TYPES = ("TIMESTAMP", "DATE", "TIME")
VOLATILE_KEY = re.compile(r"seconds|timings|elapsed|latency|took|_s$|^wall|^pid$|_at$|rss", re.IGNORECASE)


def demo_command(folder: Path) -> list[str]:
    return [*ENGINE, "demo", "--quick", "--dir", str(folder)]


def run_demo(folder: Path, kill_after: float | None, log: Path) -> tuple[str, float]:
    """Run `demo --quick` in ``folder``; kill its process group after ``kill_after`` seconds if it still runs.
    Returns ('killed' | 'exit <rc>', seconds)."""
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(demo_command(folder), stdout=out, stderr=subprocess.STDOUT, env=ENV,
                                   start_new_session=True)
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return "killed", time.monotonic() - started
    return f"exit {process.returncode}", time.monotonic() - started


def _text(value: str, aliases: dict[str, str]) -> str:
    for old, new in aliases.items():
        value = value.replace(old, new)
    return value


def _normal_json(value, aliases: dict[str, str]):
    if isinstance(value, dict):
        return {k: _normal_json(v, aliases) for k, v in value.items() if not VOLATILE_KEY.search(k)}
    if isinstance(value, list):
        return [_normal_json(v, aliases) for v in value]
    if isinstance(value, str):
        return _text(value, aliases)
    return value


def _normal(value, kind: str, aliases: dict[str, str]):
    if kind == "JSON" and isinstance(value, str):
        try:
            return json.dumps(_normal_json(json.loads(value), aliases), sort_keys=True)
        except ValueError:
            pass
    if isinstance(value, str):
        return _text(value, aliases)
    if isinstance(value, list):
        return tuple(_normal(v, "", aliases) for v in value)
    return value


def snapshot(folder: Path) -> dict[str, list[tuple]]:
    """Every table of the store in ``folder``, normalised (module docstring), rows sorted."""
    con = duckdb.connect(str(folder / STORE_NAME), read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                            "ORDER BY table_name").fetchall() if t not in LEFT_OUT_TABLES]
        # the folder, and the evaluation ids made from a checkpoint's path, name where the run happened
        aliases = {str(folder): "<DIR>"}
        aliases.update({eval_id: f"<eval {label} at step {step}>" for eval_id, label, step in con.execute(
            "SELECT eval_id, label, step FROM evaluations").fetchall()})
        found = {}
        for table in tables:
            columns = [(name, kind) for name, kind in con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = $t "
                "ORDER BY column_index", {"t": table}).fetchall()
                if name not in LEFT_OUT_COLUMNS and not kind.startswith(CLOCK_TYPES)]
            names = ", ".join(f'"{name}"' for name, _ in columns)
            rows = con.execute(f'SELECT {names} FROM "{table}"').fetchall()
            found[table] = sorted((tuple(_normal(v, kind, aliases) for v, (_, kind) in zip(row, columns))
                                   for row in rows), key=repr)
        return found
    finally:
        con.close()


def differences(got: dict[str, list[tuple]], want: dict[str, list[tuple]]) -> dict[str, str]:
    """Table -> what differs (row counts and a first differing row), for every table that differs."""
    found = {}
    for table in sorted(set(got) | set(want)):
        a, b = got.get(table), want.get(table)
        if a == b:
            continue
        if a is None or b is None:
            found[table] = "missing in " + ("the resumed store" if a is None else "the reference")
            continue
        only_a = [row for row in a if row not in b]
        only_b = [row for row in b if row not in a]
        first = repr((only_a or only_b)[0])[:300] if (only_a or only_b) else "same rows, other multiplicities"
        found[table] = f"{len(a)} rows vs {len(b)}; {len(only_a)} only here, {len(only_b)} only in the reference; {first}"
    return found


def resumed_phases(folder: Path) -> list[str]:
    con = duckdb.connect(str(folder / STORE_NAME), read_only=True)
    try:
        return [f"{r}:{p}" for r, p in con.execute("SELECT round, phase FROM run_phases WHERE attempts > 1 "
                                                   "ORDER BY round, phase").fetchall()]
    finally:
        con.close()


def start_load(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_load(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
        process.wait()


def one_run(index: int, seed: int, base: Path, reference: dict, reference_seconds: float) -> dict:
    rng = random.Random(f"{seed}:{index}")
    folder = base / f"run-{index}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kills = 2 if index % 2 else 1
    attempts, left = [], reference_seconds * 0.95
    for attempt in range(kills):
        moment = rng.uniform(1.0, max(1.5, left))
        outcome, seconds = run_demo(folder, moment, folder / f"attempt-{attempt}.log")
        attempts.append({"kill_after": round(moment, 1), "outcome": outcome, "seconds": round(seconds, 1)})
        left = max(1.5, left - moment)
        if outcome != "killed":
            break
    outcome, seconds = run_demo(folder, None, folder / "resume.log")
    attempts.append({"kill_after": None, "outcome": outcome, "seconds": round(seconds, 1)})
    result = {"run": index, "attempts": attempts, "load": round(os.getloadavg()[0], 1)}
    if outcome != "exit 0":
        result["differs"] = {"(run)": f"the resumed demo ended with {outcome}: see {folder / 'resume.log'}"}
        return result
    result["resumed"] = resumed_phases(folder)
    result["differs"] = differences(snapshot(folder), reference)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50, help="killed-and-resumed demos to run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--first", type=int, default=0, help="index of the first run (to continue a series)")
    parser.add_argument("--load", type=int, default=0, help="busy processes to run beside each demo")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="a folder where `demo --quick` already ran to its end (default: run one first)")
    parser.add_argument("--minutes", type=float, default=None, help="start no run after this many minutes")
    parser.add_argument("--out", type=Path, default=None, help="also write each run as a JSON line here")
    parser.add_argument("--keep", action="store_true", help="keep the folders of runs whose store matched")
    parser.add_argument("--smoke", action="store_true", help="the smallest size: one run, killed once")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.first = 1, 0
    base = args.dir or Path(tempfile.mkdtemp(prefix="kill-stress-"))
    base.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    loads = []
    if args.reference is None:
        args.reference = base / "reference"
        shutil.rmtree(args.reference, ignore_errors=True)
        args.reference.mkdir(parents=True)
        outcome, seconds = run_demo(args.reference, None, base / "reference.log")
        if outcome != "exit 0":
            print(f"the uninterrupted demo ended with {outcome}; see {base / 'reference.log'}", file=sys.stderr)
            return 2
    else:
        seconds = float(json.loads((args.reference / "stress-seconds.json").read_text())) if (
            args.reference / "stress-seconds.json").exists() else 180.0
    (args.reference / "stress-seconds.json").write_text(json.dumps(round(seconds, 1)))
    reference = snapshot(args.reference)
    print(f"reference: {args.reference} ({seconds:.0f} s); {sum(map(len, reference.values()))} rows in "
          f"{len(reference)} tables compared", flush=True)
    differing = ran = killed = 0
    for index in range(args.first, args.first + args.runs):
        if args.minutes is not None and time.monotonic() - began > args.minutes * 60:
            break
        load = start_load(args.load)
        try:
            result = one_run(index, args.seed, base, reference, seconds)
        finally:
            stop_load(load)
        ran += 1
        loads.append(result["load"])
        killed += sum(a["outcome"] == "killed" for a in result["attempts"])
        differing += bool(result["differs"])
        moments = ", ".join(f"{a['kill_after']} s ({a['outcome']})" for a in result["attempts"][:-1])
        verdict = ("DIFFERS: " + "; ".join(f"{t}: {d}" for t, d in result["differs"].items())
                   if result["differs"] else "same store")
        print(f"run {index}: killed at {moments}; resumed {', '.join(result.get('resumed', [])) or 'nothing'} "
              f"in {result['attempts'][-1]['seconds']} s; load {result['load']}; {verdict}", flush=True)
        if args.out:
            with args.out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
        if not result["differs"] and not args.keep:
            shutil.rmtree(base / f"run-{index}", ignore_errors=True)
    mean_load = sum(loads) / len(loads) if loads else 0.0
    print(f"{ran} runs, {killed} kills, {differing} differing stores; load average {min(loads, default=0):.1f}-"
          f"{max(loads, default=0):.1f} (mean {mean_load:.1f}) with {args.load} busy processes added; "
          f"{(time.monotonic() - began) / 60:.1f} min")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
