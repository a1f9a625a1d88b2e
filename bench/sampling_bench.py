"""Weighted sampling at scale: compute, store and load one round's weights for 1,000,000 tasks, then time a
batch of 512 GRPO groups (K = 8) drawn from them.

    python bench/sampling_bench.py [--tasks 1000000] [--batch 512] [-k 8] [--batches 1000]
    python bench/sampling_bench.py --smoke       # 1,000 tasks: checks that the script works

The store is a temporary DuckDB file with N tasks (one in 50 'synthesized') and a few scored rollouts for one
task in 10, so the coevolve strategy has signals to weigh. Target: a batch far below a training step. A batch
of distinct tasks (fewer groups than tasks with a positive weight) costs O(N): torch.multinomial without
replacement draws an exponential variate per task.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from coevolve_engine.curriculum import WeightedGroupSampler, compute_weights, load_weights
from coevolve_engine.core.store import Store

#: ``--smoke``: the smallest size that runs every part (a few seconds); the other size options are ignored.
SMOKE = {"tasks": 1_000, "batch": 16, "k": 4, "batches": 20}


def build_store(path: Path, n_tasks: int) -> Store:
    store = Store(path)
    store.execute("INSERT INTO tasks (task_id, source) SELECT printf('task-%07d', i), "
                  "CASE WHEN i % 50 = 0 THEN 'synthesized' ELSE 'bench' END FROM range($n) AS r(i)", {"n": n_tasks})
    # tasks 0, 10, 20, ...: steps 0-2, groups of 4, rewards from a hash so the run is the same every time
    store.execute("""
        INSERT INTO trajectories (trajectory_id, task_id, step, group_id, reward, action_pattern)
        SELECT printf('t-%d-%d-%d', i, s, j), printf('task-%07d', i), s, printf('task-%07d@%d', i, s),
               CASE WHEN hash(i, s, j) % 3 = 0 THEN 1.0 ELSE 0.0 END, 'a>b'
        FROM range(0, $n, 10) AS r(i), range(3) AS st(s), range(4) AS g(j)""", {"n": n_tasks})
    return store


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true",
                        help=f"the smallest size, to check that the script works ({SMOKE['tasks']:,} tasks, batches of "
                             f"{SMOKE['batch']}; the other size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        store = build_store(Path(folder) / "bench.duckdb", args.tasks)
        print(f"store with {args.tasks:,} tasks: {time.perf_counter() - start:.2f} s")
        with store:
            start = time.perf_counter()
            computed = compute_weights(store, 0, "coevolve")
            print(f"compute_weights (coevolve) + store: {time.perf_counter() - start:.2f} s; {computed.reason}")
            start = time.perf_counter()
            weight_set = load_weights(store, 0)
            print(f"load_weights (DuckDB -> numpy): {time.perf_counter() - start:.3f} s")

    start = time.perf_counter()
    sampler = WeightedGroupSampler(weight_set.weights, group_size=args.k, groups_per_step=args.batch, seed=0)
    setup_ms = 1e3 * (time.perf_counter() - start)
    print(f"sampler setup (checks of {len(weight_set):,} weights): {setup_ms:.2f} ms")

    times = []
    for step in range(args.batches):
        start = time.perf_counter()
        batch = sampler.batch(step)
        times.append(time.perf_counter() - start)
    assert batch.shape == (args.batch * args.k,)
    ms = 1e3 * np.array(times)
    print(f"batch of {args.batch} tasks x K={args.k} from {len(weight_set):,} weighted tasks: "
          f"mean {ms.mean():.3f} ms, median {np.median(ms):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms "
          f"over {args.batches} batches")

    rng = np.random.default_rng(0)
    p = weight_set.probabilities
    start = time.perf_counter()
    for _ in range(20):
        np.repeat(rng.choice(len(p), size=args.batch, replace=True, p=p), args.k)
    print(f"for comparison, numpy Generator.choice(p=...) per batch: {1e3 * (time.perf_counter() - start) / 20:.2f} ms")


if __name__ == "__main__":
    main()
