"""Curriculum benchmark: the demo's loop under each curriculum strategy, the same training budget, several seeds.

    HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True python bench/curriculum_bench.py --out /tmp/curriculum
    python bench/curriculum_bench.py --out /tmp/cb --quick          # the mechanics in a minute or two
    python bench/curriculum_bench.py --out /tmp/cb --jobs 2 --set warmup.steps=800   # two runs at a time

Per seed, the demo's store and policy are prepared and warmed up once (coevolve_engine.demo), then each
strategy runs `coevolve-engine run` from that warmed-up checkpoint on a copy of the store, with the demo's
configuration, the --set overrides and the strategy's settings (SETTINGS). Held-out success comes from the store
(the run's eval phase writes every round's evaluation): one row per (strategy, seed, round) with the last
training step and the success. Prints a table of mean and spread over seeds per strategy and round, each seed's
paired differences (last round minus round 0; final minus uniform's final), and the steps each strategy needed
to reach uniform's final held-out success; writes results.csv, table.md and heldout.png under --out.

The demo's configuration is 8 rounds of 25 GRPO steps; `--set rounds=4` halves the budget, and `--set rounds=8`
on a finished 4-round benchmark extends every run to 8.

Every run is a resumable `coevolve-engine run` in its own folder, so a rerun with the same --out finishes what
was interrupted and reads what was finished. With --jobs N, N runs go at a time in separate processes, each
with its share of the cores as torch threads.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import time
from pathlib import Path

#: What each benchmarked name sets over the demo's configuration. The four curriculum strategies all train on
#: the task set the loop grows; "fixed" is the usual RL baseline: uniform draws from the training tasks as they
#: were, nothing synthesized.
SETTINGS = {
    "coevolve": [],
    "uniform": ["curriculum.strategy=uniform", "curriculum.settings={}"],
    "plr": ["curriculum.strategy=plr", "curriculum.settings={}"],
    "dapo-filter": ["curriculum.strategy=dapo-filter", "curriculum.settings={}"],
    "fixed": ["curriculum.strategy=uniform", "curriculum.settings={}", "synthesis.synthesizer=none"],
}


def warmed_base(out: Path, seed: int, quick: bool, sets: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """The seed's prepared store (tasks, demonstrations) and its warmed-up checkpoint, made once."""
    from coevolve_engine.demo import FULL, QUICK, prepare, run_demo
    from coevolve_engine.loop.run import warmup_checkpoint
    from coevolve_engine.store import Store

    base = out / f"seed-{seed}" / "base"
    db, _ = prepare(base, QUICK if quick else FULL, seed=seed, echo=lambda line: None)
    with Store(db, read_only=True) as store:
        warmed = warmup_checkpoint(store)
    if warmed is None:  # run the demo's warm-up alone: round 0 up to its train phase is not needed
        run_demo(base, quick=quick, seed=seed, overrides=(*sets, "rounds=1", "trainer.steps_per_round=1"),
                 echo=lambda line: None)
        with Store(db, read_only=True) as store:
            warmed = warmup_checkpoint(store)
    return db, Path(warmed)


def run_strategy(out: Path, seed: int, strategy: str, base_db: Path, warmed: Path, quick: bool,
                 sets: tuple[str, ...] = ()) -> list[dict]:
    """One strategy's run from the seed's warmed-up checkpoint (resumed if it was interrupted); its evaluations."""
    from coevolve_engine.demo import FULL, QUICK, demo_config_text
    from coevolve_engine.loop import RunLoop, load_config
    from coevolve_engine.store import Store

    folder = out / f"seed-{seed}" / strategy
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.duckdb"
    if not db.exists():  # the prepared store without the base's own run, renamed into place once clean
        fresh = folder / "fresh.duckdb"
        shutil.copy(base_db, fresh)
        with Store(fresh) as store, store.transaction() as con:
            for table in ("eval_results", "evaluations", "run_phases", "rounds", "task_weights", "weight_sets",
                          "pattern_members", "failure_patterns", "candidates"):
                con.execute(f"DELETE FROM {table}")
            con.execute("DELETE FROM tasks WHERE source = 'synthesized'")
            con.execute("DELETE FROM trajectories WHERE step > 0")
        fresh.rename(db)
    config_path = folder / "run.toml"
    config_path.write_text(demo_config_text(), encoding="utf-8")
    size = QUICK if quick else FULL
    config = load_config(config_path, [*size.overrides, f"rounds={size.rounds}", f"seed={seed}", *sets,
                                       f"trainer.model={warmed}", f"trainer.output_dir={folder / 'checkpoints'}",
                                       "warmup.steps=0", *SETTINGS[strategy]])
    RunLoop(db, config, echo=lambda line: None).run()
    with Store(db, read_only=True) as store:
        rows = store.execute("SELECT label, step, success_rate FROM evaluations ORDER BY step, label").fetchall()
    return [{"strategy": strategy, "seed": seed, "label": label, "step": step, "heldout": rate}
            for label, step, rate in rows]


def _timed(job, *args) -> tuple[object, float]:
    started = time.perf_counter()
    return job(*args), time.perf_counter() - started


def _threads(count: int) -> None:
    import torch

    from coevolve_engine.loop.train_round import quiet_libraries

    torch.set_num_threads(count)
    quiet_libraries()


def summarise(rows: list[dict]) -> tuple[list[dict], dict[str, int | None]]:
    by: dict[tuple[str, str, int], list[float]] = {}
    for row in rows:
        by.setdefault((row["strategy"], row["label"], row["step"]), []).append(row["heldout"])
    table = [{"strategy": s, "label": label, "step": step, "mean": statistics.mean(v),
              "spread": statistics.pstdev(v) if len(v) > 1 else 0.0, "seeds": len(v)}
             for (s, label, step), v in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][2]))]
    trained = [t for t in table if t["label"] != "start"]  # the starting policy is the same for every strategy
    uniform = [t for t in trained if t["strategy"] == "uniform"]
    target = uniform[-1]["mean"] if uniform else None
    reach = {}
    for strategy in {t["strategy"] for t in trained}:
        hits = [t["step"] for t in trained if t["strategy"] == strategy and target is not None and t["mean"] >= target]
        reach[strategy] = min(hits) if hits else None
    return table, reach


def paired(rows: list[dict]) -> list[dict]:
    """Per strategy, over seeds: the final held-out success minus round 0's (what the later rounds added) and
    minus uniform's final on the same seed (the strategies share each seed's warm-up, so differences pair)."""
    final: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], float] = {}
    for row in sorted(rows, key=lambda r: r["step"]):
        if row["label"] != "start":
            final[(row["strategy"], row["seed"])] = row["heldout"]
            first.setdefault((row["strategy"], row["seed"]), row["heldout"])
    out = []
    for strategy in sorted({s for s, _ in final}):
        seeds = sorted(seed for s, seed in final if s == strategy)
        gain = [final[(strategy, seed)] - first[(strategy, seed)] for seed in seeds]
        versus = [final[(strategy, seed)] - final[("uniform", seed)] for seed in seeds if ("uniform", seed) in final]
        out.append({"strategy": strategy, "gain": gain, "versus_uniform": versus})
    return out


def _points(values: list[float]) -> str:
    if not values:
        return "-"
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    return (f"{100 * statistics.mean(values):+.1f} (sd {100 * spread:.1f}; "
            + " ".join(f"{100 * v:+.1f}" for v in values) + ")")


def plot(table: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for strategy in sorted({t["strategy"] for t in table}):
        points = [t for t in table if t["strategy"] == strategy]
        steps = [t["step"] for t in points]
        means = [100 * t["mean"] for t in points]
        spread = [100 * t["spread"] for t in points]
        axes.plot(steps, means, marker="o", label=strategy)
        axes.fill_between(steps, [m - s for m, s in zip(means, spread)], [m + s for m, s in zip(means, spread)],
                          alpha=0.15)
    axes.set_xlabel("training step")
    axes.set_ylabel("held-out success (%)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategies", default=",".join(SETTINGS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--quick", action="store_true", help="the demo's --quick size: checks the mechanics only")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a run setting over the demo's configuration, for the warm-up and every strategy "
                             "(repeatable), e.g. warmup.steps=600")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process [default: 1]")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    strategies = args.strategies.split(",")
    if unknown := sorted(set(strategies) - set(SETTINGS)):
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(SETTINGS)}")
    sets = tuple(args.sets)
    args.out.mkdir(parents=True, exist_ok=True)

    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    context = multiprocessing.get_context("spawn")  # torch and duckdb in a forked child are not safe
    rows: list[dict] = []
    with ProcessPoolExecutor(args.jobs, mp_context=context, initializer=_threads, initargs=(threads,)) as pool:
        warmups = {seed: pool.submit(_timed, warmed_base, args.out, seed, args.quick, sets) for seed in seeds}
        bases = {}
        for seed, future in warmups.items():  # every seed's warm-up first: its strategies start from it
            bases[seed], seconds = future.result()
            print(f"seed {seed} warm-up: {seconds:.0f} s", flush=True)
        runs = {(seed, strategy): pool.submit(_timed, run_strategy, args.out, seed, strategy, *bases[seed],
                                              args.quick, sets)
                for seed in seeds for strategy in strategies}
        for (seed, strategy), future in runs.items():
            result, seconds = future.result()
            rows += result
            print(f"seed {seed} {strategy}: {seconds:.0f} s", flush=True)
    with (args.out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table, reach = summarise(rows)
    lines = ["| strategy | evaluated | step | held-out mean | spread (sd) | seeds |", "|---|---|---|---|---|---|"]
    lines += [f"| {t['strategy']} | {t['label']} | {t['step']} | {100 * t['mean']:.1f}% | {100 * t['spread']:.1f} | "
              f"{t['seeds']} |" for t in table]
    lines += ["", "| strategy | last round minus round 0, points | final minus uniform's final, points |",
              "|---|---|---|"]
    lines += [f"| {p['strategy']} | {_points(p['gain'])} | {_points(p['versus_uniform'])} |" for p in paired(rows)]
    if any(t["strategy"] == "uniform" for t in table):
        lines += ["", "Steps to reach uniform's final held-out success (mean over seeds): "
                  + ", ".join(f"{s} {step if step is not None else 'never'}" for s, step in sorted(reach.items()))]
    text = "\n".join(lines)
    (args.out / "table.md").write_text(text + "\n")
    plot(table, args.out / "heldout.png")
    print(text)
    print(f"\nwritten: {args.out / 'results.csv'}, {args.out / 'table.md'}, {args.out / 'heldout.png'}")


if __name__ == "__main__":
    main()
