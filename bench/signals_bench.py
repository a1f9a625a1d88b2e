"""Benchmark: refresh every signal view over N trajectories, against plain Python and pandas.

    python bench/signals_bench.py                 # 10 million trajectories, 100,000 tasks, 30 steps, groups of 8
    python bench/signals_bench.py --n 1000000     # a quicker run
    python bench/signals_bench.py --smoke         # 4,000 trajectories: checks that the script works

It generates the tasks and the trajectories (Parquet), ingests the tasks, then the trajectories (the time
printed), into a fresh store, then computes every public
signal view three ways: the store's SQL views, the plain-Python reference (``tests/signals_reference.py``)
and pandas (below). It checks that all three agree row for row and prints the times and the ratios.

DuckDB times are wall-clock seconds to compute each view and fetch all its rows as Arrow. "alone" queries each
view by itself; "duckdb" is a refresh of all of them inside one signal snapshot, which computes the shared
layers once (its cost is the "(shared snapshot)" row, included in the total). The ratios of a view's row are
against its "alone" time; those of the total row against the whole refresh.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import polars as pl
import pyarrow.parquet as pq

from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.signals.snapshot import signal_snapshot
from coevolve_engine.core.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import signals_reference as ref  # noqa: E402  the executable specification, kept with the tests

VIEWS = ("task_steps", "forgetting", "forgetting_events", "boundary", "rare_patterns",
         "flagged_trajectories", "task_signals")
THRESHOLD, W, THETA, MIN_N = 0.5, 3, 5, 50
TOOLS = ["ls", "cd", "cat", "grep", "mv", "cp", "touch", "echo", "sort", "wc", "diff", "find",
         "get_ticket", "post_tweet", "send_message", "book_flight", "get_balance", "buy_stock"]


#: ``--smoke``: the smallest size that runs every part (a few seconds); the other size options are ignored.
SMOKE = {"n": 4_000, "tasks": 100, "steps": 10}


def generate(path: Path, n: int, tasks: int, steps: int, group: int, seed: int, *,
             tasks_path: Path | None = None) -> int:
    """Write about n trajectories to a Parquet file (and their tasks to ``tasks_path``); return how many
    trajectories were written."""
    rng = np.random.default_rng(seed)
    groups_per_step = max(1, min(tasks, n // (group * steps)))
    task_names = pa.array([f"task-{i:06d}" for i in range(tasks)])
    if tasks_path is not None:
        pq.write_table(pa.table({"task_id": task_names, "source": pa.array(["bench"] * tasks)}), tasks_path)
    # task difficulty is U-shaped, as in RL on a fixed task set: many tasks nearly always or never solved,
    # so about half of the groups have mixed outcomes (the paper's boundary share is about half)
    base = rng.beta(0.4, 0.4, tasks)
    phase = rng.uniform(0, 2 * math.pi, tasks)
    # a pool of action patterns with Zipf frequencies (exponent 2): a few patterns make up most rollouts, as
    # when the tasks of one environment share their tool sequences, and about a sixth are rare (share < 5%)
    pool_size = 300
    pool = []
    for _ in range(pool_size):
        names = rng.choice(TOOLS, rng.integers(0, 6))
        pool.append(json.dumps([{"name": str(name), "arguments": {}} for name in names]))
    pool_weights = 1.0 / np.arange(1, pool_size + 1) ** 2.0
    pool_weights /= pool_weights.sum()
    pool_array = pa.array(pool)
    chunks = []
    for step in range(steps):
        chosen = rng.choice(tasks, groups_per_step, replace=False)
        task_index = np.repeat(chosen, group)
        p = np.clip(base[task_index] + 0.25 * np.sin(step / 4 + phase[task_index]), 0, 1)
        reward = (rng.random(task_index.size) < p).astype(np.float64)
        partial = (reward == 0) & (rng.random(task_index.size) < 0.2)  # partial credit below the threshold
        reward[partial] = np.round(rng.random(partial.sum()) * 0.5, 3)
        actions = pool_array.take(pa.array(rng.choice(pool_size, task_index.size, p=pool_weights)))
        chunks.append(pa.table({
            "task_id": task_names.take(pa.array(task_index)),
            "step": pa.array(np.full(task_index.size, step, dtype=np.int64)),
            "reward": pa.array(reward),
            "actions": actions,
        }))
    table = pa.concat_tables(chunks)
    pq.write_table(table, path, row_group_size=1 << 20)
    return table.num_rows


# -- pandas ------------------------------------------------------------------------------------------

def pandas_views(df: pd.DataFrame, tasks: pd.Series) -> dict[str, pd.DataFrame]:
    """The same definitions in pandas; each view computed on its own, like the SQL views."""
    out: dict[str, pd.DataFrame] = {}
    timings: dict[str, float] = {}

    def ok(frame: pd.DataFrame) -> pd.Series:
        return frame["success"].fillna(frame["reward"] >= THRESHOLD).astype(bool)

    def steps() -> pd.DataFrame:
        g = df.assign(ok=ok(df)).groupby(["task_id", "step"], sort=False)
        r = g.agg(rollouts=("reward", "size"), successes=("ok", "sum"), score=("reward", "mean")).reset_index()
        r["score"] = r["score"].round(9)
        return r

    def forgetting() -> pd.DataFrame:
        s = steps().sort_values(["task_id", "step"])
        shifted = [s.groupby("task_id")["score"].shift(k) for k in range(1, W + 1)]
        best = pd.concat(shifted, axis=1).max(axis=1)
        count = pd.concat(shifted, axis=1).notna().sum(axis=1)
        hit = (best >= THRESHOLD) & (s["score"] < THRESHOLD)
        return s.assign(recent_best=best, window_scores=count, w=W, threshold=THRESHOLD)[hit][
            ["task_id", "step", "score", "recent_best", "window_scores", "w", "threshold"]]

    def events() -> pd.DataFrame:
        s = steps().sort_values(["task_id", "step"])
        prev = s.groupby("task_id")["score"].shift(1)
        s = s.assign(event=(prev >= THRESHOLD) & (s["score"] < THRESHOLD))
        return s.groupby("task_id").agg(scored_steps=("step", "size"), forgetting_events=("event", "sum")).reset_index()

    def groups() -> pd.DataFrame:
        g = df.assign(ok=ok(df)).groupby("group_id", sort=False)
        r = g.agg(task_id=("task_id", "min"), step=("step", "min"), rollouts=("reward", "size"),
                  successes=("ok", "sum"), mean_reward=("reward", "mean")).reset_index()
        r["mean_reward"] = r["mean_reward"].round(9)
        r["p"] = r["successes"] / r["rollouts"]
        r["variance"] = r["p"] * (1 - r["p"])
        return r

    def boundary() -> pd.DataFrame:
        g = groups()
        return g[(g.successes > 0) & (g.successes < g.rollouts)][
            ["task_id", "group_id", "step", "rollouts", "successes", "p", "variance"]]

    def pattern_steps() -> pd.DataFrame:
        d = df[df["action_pattern"].notna()]
        ps = d.groupby(["action_pattern", "step"], sort=False).size().rename("trajectories").reset_index()
        ps = ps.sort_values(["action_pattern", "step"])
        ps["cumulative"] = ps.groupby("action_pattern")["trajectories"].cumsum()
        seen = d.groupby("step").size().sort_index().cumsum().rename("seen")
        ps = ps.join(seen, on="step")
        ps["share"] = ps["cumulative"] / ps["seen"]
        ps["rare"] = (ps["seen"] >= MIN_N) & (ps["share"] < THETA / 100)
        return ps

    def rare_patterns() -> pd.DataFrame:
        ps = pattern_steps()
        total = ps["trajectories"].sum()
        r = ps.assign(rare_n=ps["trajectories"].where(ps["rare"], 0)).groupby("action_pattern").agg(
            trajectories=("trajectories", "sum"), first_step=("step", "min"), last_step=("step", "max"),
            rare_trajectories=("rare_n", "sum")).reset_index()
        r["share"] = r["trajectories"] / total
        r["rare"] = (total >= MIN_N) & (r["share"] < THETA / 100)
        return r[["action_pattern", "trajectories", "share", "rare", "first_step", "last_step", "rare_trajectories"]]

    def flagged() -> pd.DataFrame:
        cols = ["trajectory_id", "task_id", "step", "group_id"]
        f = df.merge(forgetting()[["task_id", "step"]], on=["task_id", "step"])[cols].assign(signal="forgetting")
        b = df[df["group_id"].isin(boundary()["group_id"])][cols].assign(signal="boundary")
        ps = pattern_steps()
        r = df.merge(ps[ps["rare"]][["action_pattern", "step"]], on=["action_pattern", "step"])[cols]
        return pd.concat([f, b, r.assign(signal="rare")], ignore_index=True)

    def task_signals() -> pd.DataFrame:
        s = steps().sort_values(["task_id", "step"])
        latest = s.groupby("task_id").agg(latest_step=("step", "last"), latest_score=("score", "last"),
                                          scored_steps=("step", "size"))
        flags = forgetting().groupby("task_id").size().rename("forgetting_flags")
        g = groups()
        g["mixed"] = (g.successes > 0) & (g.successes < g.rollouts)
        gs = g.groupby("task_id").agg(groups=("group_id", "size"), boundary_groups=("mixed", "sum"))
        ps = pattern_steps()
        rare = df.merge(ps[ps["rare"]][["action_pattern", "step"]], on=["action_pattern", "step"]).groupby(
            "task_id").size().rename("rare_trajectories")
        ids = pd.Index(pd.concat([tasks, df["task_id"]]).unique(), name="task_id")
        r = pd.DataFrame(index=ids).join(latest).join(events().set_index("task_id")[["forgetting_events"]]).join(flags).join(gs).join(rare)
        for col in ("scored_steps", "forgetting_events", "forgetting_flags", "groups", "boundary_groups",
                    "rare_trajectories"):
            r[col] = r[col].fillna(0).astype(int)
        r["boundary_share"] = r["boundary_groups"] / r["groups"].where(r["groups"] > 0)
        return r.reset_index()[["task_id", "latest_step", "latest_score", "scored_steps", "forgetting_events",
                                "forgetting_flags", "groups", "boundary_groups", "boundary_share",
                                "rare_trajectories"]]

    for name, fn in zip(VIEWS, (steps, forgetting, events, boundary, rare_patterns, flagged, task_signals)):
        start = time.perf_counter()
        out[name] = fn()
        timings[name] = time.perf_counter() - start
    return out, timings


# -- comparison -----------------------------------------------------------------------------------------

def normalise(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Same column names, integers as Int64, floats rounded, NaN as null, rows sorted: comparable frames."""
    frame = frame.rename(dict(zip(frame.columns, columns)))
    exprs = []
    for name, dtype in frame.schema.items():
        column = pl.col(name)
        if dtype.is_float():
            exprs.append(column.fill_nan(None).round(9))
        elif dtype.is_integer() or dtype.is_decimal():
            exprs.append(column.cast(pl.Int64))
        else:
            exprs.append(column)
    frame = frame.select(exprs)
    return frame.sort(frame.columns, nulls_last=True)


def from_rows(rows: list[tuple], columns: list[str]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000, help="trajectories to generate")
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks")
    parser.add_argument("--steps", type=int, default=30, help="training steps")
    parser.add_argument("--group", type=int, default=8, help="rollouts per group")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--skip-python", action="store_true", help="skip the (slow) plain-Python reference")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write data (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"the smallest size, to check that the script works ({SMOKE['n']:,} trajectories, "
                             f"{SMOKE['tasks']} tasks, {SMOKE['steps']} steps; --n, --tasks and --steps are ignored)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="coevolve-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data, task_data, db = workdir / "trajectories.parquet", workdir / "tasks.parquet", workdir / "bench.duckdb"
    db.unlink(missing_ok=True)

    t0 = time.perf_counter()
    n = generate(data, args.n, args.tasks, args.steps, args.group, args.seed, tasks_path=task_data)
    print(f"generated {n:,} trajectories over {args.tasks:,} tasks, {args.steps} steps, groups of {args.group}"
          f" in {time.perf_counter() - t0:.1f} s")

    with Store(db) as store:
        t0 = time.perf_counter()
        tasks_report = store.ingest_tasks(task_data)  # every trajectory names a stored task
        print(f"stored {tasks_report.added:,} tasks in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        report = store.ingest_trajectories(data)
        print(f"ingested {report.added:,} in {time.perf_counter() - t0:.1f} s")

        # each view on its own: every view repeats its passes over the trajectories
        alone: dict[str, float] = {}
        for view in VIEWS:
            start = time.perf_counter()
            store.con.sql(f"SELECT * FROM {view}").to_arrow_table()
            alone[view] = time.perf_counter() - start
        # a refresh: every view computed and fetched (as Arrow) inside one signal snapshot
        sql_times: dict[str, float] = {}
        arrow: dict[str, pa.Table] = {}
        start = time.perf_counter()
        with signal_snapshot(store, SignalParams(THRESHOLD, W, THETA, MIN_N)):
            snapshot_s = time.perf_counter() - start
            for view in VIEWS:
                begin = time.perf_counter()
                arrow[view] = store.con.sql(f"SELECT * FROM {view}").to_arrow_table()
                sql_times[view] = time.perf_counter() - begin
        refresh_s = time.perf_counter() - start
        sql_frames = {view: pl.from_arrow(table) for view, table in arrow.items()}
        flags = sql_frames["flagged_trajectories"]["signal"].value_counts().sort("signal").rows()
        print("flags by signal: " + ", ".join(f"{name} {count:,}" for name, count in flags))
        groups, mixed = store.execute("SELECT count(*), count(*) FILTER (WHERE successes > 0 AND successes < rollouts) "
                                      "FROM group_outcomes").fetchall()[0]
        print(f"groups with mixed outcomes: {mixed:,} of {groups:,} ({100 * mixed / groups:.1f}%)")
        frame = store.execute(
            "SELECT trajectory_id, task_id, step, group_id, reward, success, action_pattern FROM scored_trajectories"
        ).df()
        task_ids = store.execute("SELECT task_id FROM tasks").df()["task_id"]

    pandas_rows, pandas_times = pandas_views(frame, task_ids)

    python_times: dict[str, float] = {}
    python_rows: dict[str, list] = {}
    if not args.skip_python:
        trajectories = [ref.Trajectory(*row) for row in frame.astype(object).where(frame.notna(), None)
                        .itertuples(index=False, name=None)]
        fns = {
            "task_steps": lambda: ref.task_steps(trajectories, THRESHOLD),
            "forgetting": lambda: ref.forgetting(trajectories, W, THRESHOLD),
            "forgetting_events": lambda: ref.forgetting_events(trajectories, THRESHOLD),
            "boundary": lambda: ref.boundary(trajectories, THRESHOLD),
            "rare_patterns": lambda: ref.rare_patterns(trajectories, THETA, MIN_N),
            "flagged_trajectories": lambda: ref.flagged_trajectories(trajectories, THRESHOLD, W, THETA, MIN_N),
            "task_signals": lambda: ref.task_signals(trajectories, list(task_ids), THRESHOLD, W, THETA, MIN_N),
        }
        for view in VIEWS:
            start = time.perf_counter()
            python_rows[view] = fns[view]()
            python_times[view] = time.perf_counter() - start

    print(f"\n{'view':<22}{'rows':>12}{'alone s':>9}{'duckdb s':>10}{'pandas s':>10}{'python s':>10}"
          f"{'pandas/db':>11}{'python/db':>11}  agree")
    print(f"{'(shared snapshot)':<22}{'':>12}{'':>9}{snapshot_s:>10.3f}")
    disagreements = 0
    for view in VIEWS:
        columns = sql_frames[view].columns
        expected = normalise(sql_frames[view], columns)
        agree = normalise(pl.from_pandas(pandas_rows[view]), columns).equals(expected)
        if python_rows:
            agree = agree and normalise(from_rows(python_rows[view], columns), columns).equals(expected)
        disagreements += not agree
        py = python_times.get(view)
        print(f"{view:<22}{expected.height:>12,}{alone[view]:>9.3f}{sql_times[view]:>10.3f}{pandas_times[view]:>10.3f}"
              f"{(f'{py:.3f}' if py else '-'):>10}{pandas_times[view] / alone[view]:>10.1f}x"
              f"{(f'{py / alone[view]:.1f}x' if py else '-'):>11}  {'yes' if agree else 'NO'}")
    total_sql, total_pd = refresh_s, sum(pandas_times.values())
    total_py = sum(python_times.values()) if python_times else None
    print(f"{'all signals':<22}{'':>12}{sum(alone.values()):>9.3f}{total_sql:>10.3f}{total_pd:>10.3f}"
          f"{(f'{total_py:.3f}' if total_py else '-'):>10}{total_pd / total_sql:>10.1f}x"
          f"{(f'{total_py / total_sql:.1f}x' if total_py else '-'):>11}  "
          f"{'all agree' if not disagreements else f'{disagreements} disagree'}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
