"""Measure the synthesis chain on a store with more than 1,000 flagged trajectories.

    python bench/synthesis_bench.py            # 200 BFCL multi_turn_base tasks x 8 rollouts x 2 steps
    python bench/synthesis_bench.py --smoke    # 8 tasks x 4 rollouts, 4 candidates: checks that the script works

It builds the store of bench/patterns_bench.py (rollouts played in the real BFCL environment with seeded
mistakes), then times each phase: patterns (embed and cluster the trajectories flagged at the last step),
summaries (one LLM call per pattern; the model is litellm's ``mock_response``, so the figures measure the
engine, not a model), offline synthesis (``offline:bfcl``) and validation. It prints the LLM calls made by
purpose, the candidates, and the acceptance rate by reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from patterns_bench import build_store

from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.models.llm import LLMClient
from coevolve_engine.patterns import PatternSelection, find_patterns
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis.candidates import synthesize
from coevolve_engine.synthesis.summaries import summarise_patterns
from coevolve_engine.synthesis.validation import validate_candidates

MOCK_SUMMARY = json.dumps({
    "summary": "Rollouts of one API domain fail on a skipped or misspelt step.",
    "failure_cause": "The agent drops a required call or misspells an argument.",
    "instability_pattern": "The same task succeeds or fails depending on one call.",
    "focus_pattern": ["cd > ls", "get_stock_info > place_order"],
    "exploration_objectives": ["Vary the arguments of the calls that go wrong."],
    "do_not_repeat": [],
})


#: ``--smoke``: the smallest size that runs every phase (seconds); the other size options are ignored.
SMOKE = {"tasks": 8, "k": 4, "candidates": 4}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="multi_turn_base tasks (at most 200)")
    parser.add_argument("--k", type=int, default=8, help="rollouts per task and step (a group)")
    parser.add_argument("--candidates", type=int, default=100, help="candidates to synthesize")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", type=Path, default=None, help="the store to build (default: a temporary file)")
    parser.add_argument("--smoke", action="store_true", help=f"the smallest size, to check that the script works "
                        f"({SMOKE['tasks']} tasks x {SMOKE['k']} rollouts, {SMOKE['candidates']} candidates; "
                        "the other size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    db = args.db or Path(tempfile.mkdtemp()) / "synthesis-bench.duckdb"
    if db.exists():
        sys.exit(f"{db} exists; pass another --db")

    phases: dict[str, float] = {}
    started = time.perf_counter()
    build_store(db, args.tasks, args.k, args.seed)
    phases["build store (play + ingest)"] = time.perf_counter() - started

    started = time.perf_counter()
    with Store(db) as store:
        report = find_patterns(store, PatternSelection(seed=args.seed))
    phases["patterns"] = time.perf_counter() - started
    print(f"{report.flagged} flagged trajectories at step {report.step} -> {report.k} patterns "
          f"(sizes {', '.join(map(str, report.sizes))}; silhouette {report.silhouette:.3f})")

    started = time.perf_counter()
    client = LLMClient(db, Endpoint("openai/bench-mock", api_key="none"),
                       completion_kwargs={"mock_response": MOCK_SUMMARY})
    summaries = summarise_patterns(db, client=client)
    phases["summaries"] = time.perf_counter() - started

    started = time.perf_counter()
    with Store(db) as store:
        proposed = synthesize(store, synthesizer="offline:bfcl", max_candidates=args.candidates, seed=args.seed)
    phases["synthesize (offline:bfcl)"] = time.perf_counter() - started

    started = time.perf_counter()
    verdicts = validate_candidates(db)
    phases["validate"] = time.perf_counter() - started

    with Store(db, read_only=True) as store:
        calls = store.execute("SELECT purpose, count(*) FROM llm_calls GROUP BY purpose ORDER BY purpose").fetchall()
        by_reason = store.execute(
            "SELECT reason, count(*) FROM candidates GROUP BY reason ORDER BY count(*) DESC").fetchall()
    print(f"LLM calls: {', '.join(f'{p} {n}' for p, n in calls)} ({summaries.summarised} patterns summarised, "
          f"{summaries.failed} failed)")
    print(f"candidates: {proposed.proposed} proposed "
          f"({', '.join(f'{s} {n}' for s, n in sorted(proposed.by_signal.items()))}); "
          f"{verdicts.accepted} accepted ({100 * verdicts.accepted / max(1, len(verdicts.verdicts)):.0f}%)")
    print("by reason: " + ", ".join(f"{reason} {n}" for reason, n in by_reason))
    print("time per phase: " + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in phases.items()))
    print(f"store: {db}")


if __name__ == "__main__":
    main()
