"""Measure finding failure patterns on a store with over a thousand flagged trajectories of real BFCL tasks.

The store holds BFCL's multi_turn_base tasks (shipped in bfcl-eval) and two steps of rollouts per task,
played in the real BFCL environment by a scripted agent that replays each task's ground truth with seeded
mistakes: skipping the ``cd`` calls, misspelling a string argument, dropping a turn's last call, or calling a
tool that does not exist. The environment executes every call and scores every episode with BFCL's checkers,
so the tool messages, error observations and verdicts are the ones a real agent would meet. Each task gets a
success rate per step, so most groups are mixed (boundary), tasks that got worse forget, and the mistakes
make rare action patterns.

Then ``find_patterns`` runs twice at the last step (the second time every embedding comes from the cache)
and the bench prints the flagged trajectories, the patterns, their sizes and the time of each phase.

    python bench/patterns_bench.py                 # 200 tasks x 8 rollouts x 2 steps
    python bench/patterns_bench.py --tasks 50 --k 4 --db /tmp/patterns.duckdb
    python bench/patterns_bench.py --smoke         # 8 tasks x 4 rollouts: checks that the script works
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from coevolve_engine.adapters.agents.base import Agent, ModelReply  # noqa: E402
from coevolve_engine.adapters.calls import ParsedCall  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.core.environment import ToolCall  # noqa: E402
from coevolve_engine.patterns import PatternSelection, find_patterns  # noqa: E402
from coevolve_engine.trainers.base import group_records  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

MISTAKES = ("skip_cd", "misspell", "drop_last", "unknown_tool")
#: ``--smoke``: the smallest size that runs every part (seconds); --tasks and --k are ignored.
SMOKE = {"tasks": 8, "k": 4}

# The API classes most members of a pattern use (a BFCL task declares the classes it involves).
CLASSES_SQL = """
SELECT c AS api_class, count(*) AS members
FROM (SELECT unnest(from_json(k.spec->'involved_classes', '["VARCHAR"]')) AS c
      FROM pattern_members AS m JOIN trajectories AS t USING (trajectory_id) JOIN tasks AS k USING (task_id)
      WHERE m.pattern_id = $p)
GROUP BY c ORDER BY members DESC, c LIMIT 3
"""


def _misspell(calls: list[ToolCall], rng: random.Random) -> list[ToolCall]:
    """One string argument of one call gets a wrong value."""
    spots = [(i, key) for i, call in enumerate(calls) for key, value in call.arguments.items()
             if isinstance(value, str)]
    if not spots:
        return calls
    i, key = rng.choice(spots)
    wrong = dict(calls[i].arguments, **{key: calls[i].arguments[key] + "_old"})
    return [*calls[:i], ToolCall(calls[i].name, wrong), *calls[i + 1:]]


def mistaken_plan(solution: list[list[ToolCall]], mistake: str | None, rng: random.Random) -> list[list[ToolCall]]:
    """The ground truth, turn by turn, with one kind of mistake (None: the ground truth itself)."""
    plan = [list(turn) for turn in solution]
    turns = [i for i, turn in enumerate(plan) if turn]
    if mistake is None or not turns:
        return plan
    if mistake == "skip_cd":
        skipped = [[call for call in turn if call.name != "cd"] for turn in plan]
        return skipped if skipped != plan else mistaken_plan(solution, "misspell", rng)
    turn = rng.choice(turns)
    if mistake == "misspell":
        plan[turn] = _misspell(plan[turn], rng)
    elif mistake == "drop_last":
        plan[turn] = plan[turn][:-1]
    elif mistake == "unknown_tool":
        call = plan[turn][0]
        plan[turn][0] = ToolCall(call.name + "_v2", call.arguments)
    return plan


class ReplayAgent(Agent):
    """Answers each user turn with that turn's planned calls, then with a short text."""

    policy = "replay"

    def __init__(self, plan: list[list[ToolCall]]) -> None:
        self.plan = plan

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        turn = sum(message["role"] == "user" for message in messages) - 1
        if messages[-1]["role"] != "user" or turn >= len(self.plan) or not self.plan[turn]:
            return ModelReply(content="Done.")
        calls = [ParsedCall(c.name, dict(c.arguments), json.dumps(c.arguments)) for c in self.plan[turn]]
        return ModelReply(content=None, calls=calls)


def build_store(db: Path, n_tasks: int, k: int, seed: int) -> dict[str, float]:
    """Import the tasks and write two steps of k rollouts each; returns seconds per part."""
    env = load_environment("bfcl")
    tasks = list(env.load_tasks(category="multi_turn_base", limit=n_tasks))
    timings = {}
    started = time.perf_counter()
    rng = random.Random(seed)
    records = []
    for task in tasks:
        solution = env.reference_solution(task["spec"])
        rates = (rng.uniform(0.3, 1.0), rng.uniform(0.1, 0.8))  # success rate at step 0 and step 1
        for step, rate in enumerate(rates):
            group = []
            for index in range(k):
                mistake = None if rng.random() < rate else rng.choice(MISTAKES)
                rollout = ReplayAgent(mistaken_plan(solution, mistake, rng)).run(env, task["task_id"], task["spec"])
                rollout.sample_index = index
                group.append(rollout)
            records += group_records(group, step=step, group_id=f"{task['task_id']}@{step}")
    timings["play episodes"] = time.perf_counter() - started
    started = time.perf_counter()
    with Store(db) as store:
        store.add_records("tasks", tasks, label="bfcl multi_turn_base")
        store.add_records("trajectories", records, label="replayed rollouts")
    timings["ingest"] = time.perf_counter() - started
    return timings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="multi_turn_base tasks (at most 200)")
    parser.add_argument("--k", type=int, default=8, help="rollouts per task and step (a group)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", type=Path, default=None, help="the store to build (default: a temporary file)")
    parser.add_argument("--smoke", action="store_true", help=f"the smallest size, to check that the script works "
                        f"({SMOKE['tasks']} tasks x {SMOKE['k']} rollouts; --tasks and --k are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    db = args.db or Path(tempfile.mkdtemp()) / "patterns-bench.duckdb"
    if db.exists():
        sys.exit(f"{db} exists; pass another --db")

    built = build_store(db, args.tasks, args.k, args.seed)
    with Store(db) as store:
        counts = store.execute(
            "SELECT count(*), count(*) FILTER (WHERE success) FROM trajectories WHERE step = 1").fetchall()[0]
        by_signal = store.execute(
            "SELECT signal, count(*) FROM flagged_trajectories WHERE step = 1 GROUP BY signal ORDER BY signal"
        ).fetchall()
        print(f"store: {args.tasks} BFCL multi_turn_base tasks x {args.k} rollouts x 2 steps; step 1: "
              f"{counts[0]} rollouts, {counts[1]} succeeded; flags at step 1: "
              + ", ".join(f"{signal} {n}" for signal, n in by_signal))
        print("built in " + ", ".join(f"{part} {seconds:.1f} s" for part, seconds in built.items()))
        for run in ("first run (embeddings computed)", "second run (embeddings cached)"):
            started = time.perf_counter()
            report = find_patterns(store, PatternSelection(round=0, replace=True))
            total = time.perf_counter() - started
            print(f"\n{run}: {report.flagged} flagged trajectories at step {report.step} -> {report.k} patterns "
                  f"(silhouette {report.silhouette:.3f}), {report.embedded} texts embedded, {total:.2f} s in all")
            print("  phases: " + ", ".join(f"{phase} {seconds:.3f} s" for phase, seconds in report.timings.items()))
        print("  sizes: " + ", ".join(map(str, report.sizes)))
        for pattern in report.patterns:
            counts = " ".join(f"{signal} {n}" for signal, n in pattern.signal_counts.items())
            classes = store.execute(CLASSES_SQL, {"p": pattern.pattern_id}).fetchall()
            print(f"  {pattern.pattern_id:<5} {pattern.size:>5}  {pattern.dominant_signal:<10} [{counts}]  "
                  f"e.g. {pattern.representative_task}; tasks using: "
                  + ", ".join(f"{name} {n}" for name, n in classes))
    print(f"\nstore: {db}")


if __name__ == "__main__":
    main()
