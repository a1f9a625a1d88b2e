"""Benchmark: what the engine's own work costs around a trainer, before and after issue 16, in one run.

    python bench/loop_cost_bench.py                    # every section, default sizes (a few minutes on 2 cores)
    python bench/loop_cost_bench.py --only opens,sink  # some sections
    python bench/loop_cost_bench.py --ingest-rows 10000000
    python bench/loop_cost_bench.py --smoke            # every section at its smallest size: checks that it works

Sections:

opens     a writable (and a read-only) open of an up-to-date store, median of --opens opens; "before" is an open
          that rebuilds every view and macro, as every open did before the views carried their stamp.
sink      one demo round of training writes (--sink-steps 25 steps x 6 groups x 8 rollouts of calc-sized records)
          to a store: "before" one unit of work per group, each open rebuilding the views; "after" one per step, and
          one per 5 steps (trainer.steps_per_write = 5, the demo's setting). The stores must hold the same
          trajectories.
demo      the demo's training phase, twice with the same seed (the quick demo's store and policy, one round of
          --demo-steps steps of 6 groups of 8): "before" with every open rebuilding the views and one store
          write per group, "after" as the engine runs now. Prints the train phase's seconds, its store seconds
          and writes, and checks that both stores hold the same trajectories.
ingest    --ingest-rows trajectories from Parquet and from JSON lines into a fresh store, rows per second
          against the issue's targets (1.5M/s Parquet, 500k/s JSON lines): "before" is the ingest code of
          --ingest-before (a commit: engine/core/ingest.py, ingest_sources.py and records.py as they were there, read
          with `git show`), "after" the installed code; both stores must hold the same trajectories.
patterns  `query` latency from another process while `patterns` embeds --texts new texts: "before" holds the
          store for writing while it embeds (as `patterns` did), "after" embeds first (``embed_ahead``).
floors    what the parts underneath take on this machine, against the issue's targets: DuckDB's own open and
          close of a store file (and of an in-memory database); for --ingest-rows Parquet rows, DuckDB copying
          the rows into a table of the store and computing their content hashes from there
          (the ingest's md5 expression over the same fields); for the same rows as JSON lines, Python's
          json.loads of every line with nothing else done. An ingest does all of these and more (value checks,
          copy numbers, action patterns, JSON validation), so none of its rates can pass them.

Every figure is wall-clock time on this machine; note the load (``uptime``) next to any figure you quote.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from coevolve_engine.core.store import Store

SECTIONS = ("opens", "sink", "demo", "ingest", "patterns", "floors")
#: ``--smoke``: the smallest size of every section (to check that the script works); the size options are ignored.
SMOKE = {"opens": 2, "sink_steps": 2, "demo_steps": 1, "demo_warmup": 1, "ingest_rows": 2_000, "texts": 8,
         "demo_groups": 2, "demo_k": 2, "demo_sets": ("episode.max_new_tokens=8",)}


@contextmanager
def before_issue_16():
    """The engine as it was: every open rebuilds the views, the store sink writes one group per unit of work."""
    from coevolve_engine.trainers.base import StoreSink, TrajectorySink

    current, write_groups = Store._views_current, StoreSink.write_groups
    Store._views_current = lambda self: False
    StoreSink.write_groups = TrajectorySink.write_groups
    try:
        yield
    finally:
        Store._views_current, StoreSink.write_groups = current, write_groups


def calc_store(path: Path, tasks: int = 200) -> None:
    with Store(path) as store:
        store.add_records("tasks", [{"task_id": f"calc-{i}", "env": "calc", "prompt": f"Add {i} and {i + 1}."}
                                    for i in range(tasks)])


def calc_rollout(task_id: str, k: int, step: int):
    from coevolve_engine.core.rollout import Rollout

    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": k, "b": step})}}
    messages = [{"role": "system", "content": "You are a calculator agent. Call tools to compute."},
                {"role": "user", "content": f"Task {task_id}: add {k} to {step} and report the result."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "name": "add", "content": str(k + step)},
                {"role": "assistant", "content": f"The result is {k + step}."}]
    return Rollout(task_id=task_id, policy=f"calc-tiny@{step - 1}", messages=messages,
                   actions=[{"name": "add", "arguments": {"a": k, "b": step}}], reward=float(k % 2), success=k % 2 == 1,
                   sample_index=k)


def timed_opens(path: Path, n: int, read_only: bool) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        Store(path, read_only=read_only).close()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def section_opens(folder: Path, args) -> None:
    path = folder / "opens.duckdb"
    calc_store(path)
    Store(path).close()
    with before_issue_16():
        rw_before, ro_before = timed_opens(path, args.opens, False), timed_opens(path, args.opens, True)
    Store(path).close()  # stamp the views again
    rw_after, ro_after = timed_opens(path, args.opens, False), timed_opens(path, args.opens, True)
    print(f"opens (median of {args.opens}):")
    print(f"  writable  before {1000 * rw_before:7.1f} ms   after {1000 * rw_after:6.1f} ms   (target: under 10 ms)")
    print(f"  read-only before {1000 * ro_before:7.1f} ms   after {1000 * ro_after:6.1f} ms")


def stored_trajectories(path: Path) -> list[tuple]:
    with Store(path, read_only=True) as store:
        return store.execute("SELECT trajectory_id, task_id, step, group_id, reward, success, actions, messages "
                             "FROM trajectories WHERE step > 0 ORDER BY trajectory_id").fetchall()


def section_sink(folder: Path, args) -> None:
    from coevolve_engine.trainers.base import StoreSink

    results = {}
    for label in ("before", "after", "after, steps_per_write=5"):
        path = folder / f"sink-{label.replace(', ', '-')}.duckdb"
        calc_store(path)
        sink = StoreSink(path, label="bench", steps_per_write=5 if label.endswith("5") else 1)
        steps = [[(f"calc-{(step * 6 + g) % 200}@{step}", [calc_rollout(f"calc-{(step * 6 + g) % 200}", k, step)
                                                         for k in range(8)]) for g in range(6)]
                 for step in range(1, args.sink_steps + 1)]
        started = time.perf_counter()
        if label == "before":
            with before_issue_16():
                for step, groups in enumerate(steps, start=1):
                    sink.write_groups(groups, step=step)
        else:
            for step, groups in enumerate(steps, start=1):
                sink.write_groups(groups, step=step)
            sink.flush()
        results[label] = (time.perf_counter() - started, sink.writes, stored_trajectories(path))
    same = all(result[2] == results["before"][2] for result in results.values())
    print(f"sink, one demo round of writes ({args.sink_steps} steps x 6 groups x 8 rollouts; "
          f"load {os.getloadavg()[0]:.1f}):")
    for label, (seconds, writes, _) in results.items():
        print(f"  {label:<24} {seconds:6.2f} s in {writes} units of work")
    print(f"  same trajectories in both stores: {same}")


def section_demo(folder: Path, args) -> None:
    from coevolve_engine.loop.demo import run_demo

    groups, k = getattr(args, "demo_groups", 6), getattr(args, "demo_k", 8)  # smaller only in --smoke
    overrides = (f"warmup.steps={args.demo_warmup}", f"trainer.steps_per_round={args.demo_steps}",
                 f"trainer.options.group_size={k}", f"trainer.options.groups_per_step={groups}",
                 "synthesis.synthesizer=none", *getattr(args, "demo_sets", ()))
    results = {}
    for label in ("before", "after"):
        target = folder / f"demo-{label}"
        quiet = lambda line: None  # noqa: E731
        if label == "before":
            with before_issue_16():
                db, _ = run_demo(target, quick=True, rounds=1, overrides=overrides, echo=quiet)
        else:
            db, _ = run_demo(target, quick=True, rounds=1, overrides=overrides, echo=quiet)
        with Store(db, read_only=True) as store:
            seconds, outputs = store.execute(
                "SELECT seconds, outputs FROM run_phases WHERE round = 0 AND phase = 'train'").fetchall()[0]
            costs = store.execute("SELECT training_seconds, feedback_seconds, feedback_share FROM round_costs "
                                  "WHERE round = 0").fetchall()[0]
        outputs = json.loads(outputs)
        results[label] = (seconds, outputs, costs, stored_trajectories(db))
    print(f"demo's training phase (quick demo's store and policy, 1 round of {args.demo_steps} steps x {groups} groups "
          f"x {k}):")
    for label, (seconds, outputs, costs, _) in results.items():
        share = "-" if costs[2] is None else f"{100 * costs[2]:.1f}%"
        print(f"  {label:<6} train phase {seconds:6.1f} s, of it store writes {outputs.get('store_seconds', 0):5.2f} s "
              f"in {outputs.get('store_writes', '?')} units; round's feedback {costs[1]:.1f} s = {share} of training")
    print(f"  same trajectories in both stores: {results['before'][3] == results['after'][3]}")


@contextmanager
def ingest_as_of(commit: str):
    """The ingest modules as they were at ``commit`` (from git), in place of the installed ones, and the store's
    ingest calls pointed at them (the store imports them by name when it is imported).

    A commit from before the store moved into ``engine/core/`` has them at ``engine/`` and imports the core
    modules by their old names (``coevolve_engine.errors``); one from before the ingest became a package imports
    ``coevolve_engine.core.ingest_store``: those names point at the installed modules meanwhile.
    """
    import importlib
    import types

    repo = Path(__file__).resolve().parent.parent
    names = ("records", "ingest_sources", "ingest")  # read from the commit
    installed = {"store": "core.store", "registry": "core.registry", "errors": "core.errors",
                 "sqlfiles": "core.sqlfiles", "sqlident": "core.sqlident", "records": "core.records",
                 "ingest": "core.ingest", "ingest_sources": "core.ingest.sources", "ingest_store": "core.ingest.mirror",
                 "outputs": "core.outputs", "lease": "core.lease"}
    touched = ([f"coevolve_engine.core.{n}" for n in names] + [f"coevolve_engine.{n}" for n in installed]
               + ["coevolve_engine.core.ingest_store"])
    saved = {name: sys.modules.get(name) for name in touched}
    store_module = importlib.import_module("coevolve_engine.core.store")
    calls = ("ingest_file", "ingest_opened", "ingest_records")
    bound = {name: getattr(store_module, name) for name in calls if hasattr(store_module, name)}
    try:
        for old, new in installed.items():
            sys.modules[f"coevolve_engine.{old}"] = importlib.import_module(f"coevolve_engine.{new}")
        sys.modules["coevolve_engine.core.ingest_store"] = importlib.import_module("coevolve_engine.core.ingest.mirror")
        for name in names:
            for path in (f"engine/core/{name}.py", f"engine/{name}.py"):
                shown = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True,
                                       text=True)
                if shown.returncode == 0:
                    break
            else:
                raise SystemExit(f"--ingest-before {commit}: no {name}.py under engine/core/ or engine/")
            module = types.ModuleType(f"coevolve_engine.core.{name}")
            module.__file__ = f"{commit}:{path}"
            sys.modules[f"coevolve_engine.core.{name}"] = sys.modules[f"coevolve_engine.{name}"] = module
            exec(compile(shown.stdout, module.__file__, "exec"), module.__dict__)
        for name in bound:
            if hasattr(module, name):  # the store's method calls the commit's function
                setattr(store_module, name, getattr(module, name))
        yield
    finally:
        for name, function in bound.items():
            setattr(store_module, name, function)
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def section_ingest(folder: Path, args) -> None:
    import duckdb

    sys.path.insert(0, str(Path(__file__).parent))
    from signals_bench import generate

    parquet = folder / "ingest.parquet"
    rows = generate(parquet, args.ingest_rows, max(1, args.ingest_rows // 100), 30, 8, 0)
    jsonl = folder / "ingest.jsonl"
    duckdb.connect().execute(f"COPY (SELECT * REPLACE (CAST(actions AS JSON) AS actions) FROM read_parquet('{parquet}')) "
                             f"TO '{jsonl}' (FORMAT json)")  # actions as a JSON list, not a string
    print(f"ingest of {rows:,} trajectories (create_tasks); before = {args.ingest_before}:")
    for fmt, path, target in (("parquet", parquet, 1_500_000), ("jsonl", jsonl, 500_000)):
        stored = {}
        for label in ("before", "after"):
            db = folder / f"ingest-{fmt}-{label}.duckdb"
            Store(db).close()
            with Store(db) as store:
                load = os.getloadavg()[0]
                started = time.perf_counter()
                if label == "before":
                    with ingest_as_of(args.ingest_before):
                        store.ingest_trajectories(path, create_tasks=True)
                else:
                    store.ingest_trajectories(path, create_tasks=True)
                seconds = time.perf_counter() - started
                stored[label] = store.execute(
                    "SELECT md5(string_agg(concat_ws('|', trajectory_id, task_id, step, group_id, reward, success, "
                    "action_pattern, actions, ingest_line), '\n' ORDER BY trajectory_id)) FROM trajectories"
                ).fetchall()[0][0]
            print(f"  {fmt:<8} {label:<6} {seconds:6.1f} s = {rows / seconds:>10,.0f} rows/s   (load {load:.1f}; "
                  f"issue's target {target:,} rows/s)")
        print(f"  {fmt:<8} same trajectories (ids, JSON text, patterns) in both stores: "
              f"{stored['before'] == stored['after']}")


READER = """
import json, sys, time
from coevolve_engine.core.store import Store
db, out, stop = sys.argv[1:4]
from pathlib import Path
waits = []
while not Path(stop).exists():
    started = time.perf_counter()
    with Store(db, read_only=True, wait=120) as store:
        store.execute("SELECT count(*) FROM trajectories").fetchall()
    waits.append(time.perf_counter() - started)
    time.sleep(0.1)
Path(out).write_text(json.dumps(waits))
"""


def flagged_store(path: Path, texts: int) -> None:
    """Boundary groups (two successes, two failures) whose rollouts all render to distinct texts."""
    import random

    rng = random.Random(0)
    words = ["file", "folder", "ticket", "order", "balance", "message", "report", "archive", "flight", "stock"]
    groups = max(1, texts // 4)
    with Store(path) as store:
        store.add_records("tasks", [{"task_id": f"t{g}", "prompt": f"Task {g}"} for g in range(groups)])
        records = []
        for g in range(groups):
            for k in range(4):
                said = " ".join(rng.choice(words) for _ in range(12))
                records.append({"task_id": f"t{g}", "step": 1, "reward": float(k % 2),
                                "messages": [{"role": "user", "content": f"Task {g}: {said}"},
                                             {"role": "assistant", "content": f"I tried {said} ({k})."}]})
        store.add_records("trajectories", records)


def section_patterns(folder: Path, args) -> None:
    from coevolve_engine.models.embeddings import Embedder
    from coevolve_engine.patterns import find_patterns
    from coevolve_engine.patterns.find import embed_ahead

    base = folder / "patterns-base.duckdb"
    flagged_store(base, args.texts)
    Embedder()._load()  # the model loaded once, outside both measurements
    print(f"`query` from another process while `patterns` embeds {args.texts} new texts (reader opens every 0.1 s):")
    for label in ("before", "after"):
        db = folder / f"patterns-{label}.duckdb"
        shutil.copy(base, db)
        out, stop = folder / f"reader-{label}.json", folder / f"stop-{label}"
        reader = subprocess.Popen([sys.executable, "-c", READER, str(db), str(out), str(stop)])
        time.sleep(3.0)  # the reader is importing and reading
        embedder = Embedder()
        started = time.perf_counter()
        if label == "before":
            with Store(db) as store:
                embedder.store = store
                find_patterns(store, embedder=embedder)
        else:
            embedder, _ = embed_ahead(db, embedder=embedder)
            with Store(db) as store:
                find_patterns(store, embedder=embedder)
        seconds = time.perf_counter() - started
        time.sleep(1.0)
        stop.touch()
        reader.wait(timeout=180)
        waits = json.loads(out.read_text())
        print(f"  {label:<6} patterns {seconds:5.1f} s; {len(waits)} queries, longest {max(waits):5.2f} s, "
              f"mean {statistics.mean(waits):.3f} s")


def section_floors(folder: Path, args) -> None:
    import duckdb

    sys.path.insert(0, str(Path(__file__).parent))
    from signals_bench import generate

    db = folder / "floors.duckdb"
    Store(db).close()
    memory = lambda: duckdb.connect().close()  # noqa: E731
    on_file = lambda: duckdb.connect(str(db)).close()  # noqa: E731
    print(f"floors (load {os.getloadavg()[0]:.1f}):")
    for label, open_close in (("DuckDB connect + close of the store file", on_file),
                              ("DuckDB connect + close in memory", memory)):
        times = []
        for _ in range(args.opens):
            started = time.perf_counter()
            open_close()
            times.append(time.perf_counter() - started)
        print(f"  {label:<44} {1000 * statistics.median(times):6.1f} ms  (median of {args.opens}; "
              "issue's target for a whole open: under 10 ms)")
    parquet = folder / "floors.parquet"
    rows = generate(parquet, args.ingest_rows, max(1, args.ingest_rows // 100), 30, 8, 0)
    source = f"read_parquet('{parquet}')"
    content = ("md5(to_json(struct_pack(task_id, step := CAST(step AS HUGEINT), group_id := NULL::VARCHAR, reward, "
               "success := NULL::BOOLEAN, actions, messages := NULL::VARCHAR, policy := NULL::VARCHAR, "
               "error := NULL::VARCHAR, meta := NULL::VARCHAR)))")
    con = duckdb.connect(str(db))
    spent = 0.0
    for label, sql in (
        ("copy the rows into a table of the store", f"CREATE OR REPLACE TABLE floor_copy AS SELECT * FROM {source}"),
        ("content hashes of the copied rows (the md5)", f"SELECT max({content}) FROM floor_copy"),
    ):
        started = time.perf_counter()
        con.execute(sql).fetchall()
        seconds = time.perf_counter() - started
        spent += seconds
        print(f"  {label:<44} {seconds:6.2f} s = {rows / seconds:>10,.0f} rows/s")
    print(f"  {'copy and hashes, nothing else':<44} {spent:6.2f} s = {rows / spent:>10,.0f} rows/s  (issue's target for "
          "a whole ingest: 1,500,000 rows/s)")
    jsonl = folder / "floors.jsonl"
    con.execute(f"COPY (SELECT * REPLACE (CAST(actions AS JSON) AS actions) FROM {source}) TO '{jsonl}' (FORMAT json)")
    con.close()
    started = time.perf_counter()
    with jsonl.open("rb") as handle:
        for line in handle:
            json.loads(line)
    seconds = time.perf_counter() - started
    print(f"  {'json.loads of every JSON line, nothing else':<44} {seconds:6.2f} s = {rows / seconds:>10,.0f} rows/s  "
          "(issue's target for a whole ingest: 500,000 rows/s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--opens", type=int, default=30, help="opens per measurement")
    parser.add_argument("--sink-steps", type=int, default=25, help="training steps of sink writes (a demo round: 25)")
    parser.add_argument("--demo-steps", type=int, default=10, help="training steps of the demo's round")
    parser.add_argument("--demo-warmup", type=int, default=150, help="warm-up steps before the demo's round")
    parser.add_argument("--ingest-rows", type=int, default=1_000_000, help="trajectories to ingest")
    parser.add_argument("--ingest-before", default="f93a85a",
                        help="the commit whose ingest code is 'before' (default: main before the vectorized ingest)")
    parser.add_argument("--texts", type=int, default=400, help="new texts `patterns` embeds")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    parser.add_argument("--smoke", action="store_true", help="every section at its smallest size, to check that the "
                        "script works (2 opens, 2 sink steps, a demo round of 1 step of 2 groups of 2 with answers "
                        "of 8 tokens, 2,000 rows, 8 texts; the size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="loop-cost-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; working in {folder}")
    try:
        for name in SECTIONS:
            if name in chosen:
                started = time.perf_counter()
                globals()[f"section_{name}"](folder, args)
                print(f"  ({name}: {time.perf_counter() - started:.0f} s)")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
