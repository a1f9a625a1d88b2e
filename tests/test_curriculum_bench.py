"""The curriculum benchmark: its report on literal runs, and the mechanics end to end at the quick size (arms from
one warm-up, the held-out set fixed first and checked, resume)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the bench imports curriculum_stats beside it, as when run
    spec = importlib.util.spec_from_file_location("curriculum_bench", BENCH / "curriculum_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs():
    """Five seeds; fixed ends at 40%, paper 2-6 points above it, weighted 4-8 above and there by step 25."""
    finals = {"fixed": [0.40] * 5, "paper": [0.42, 0.44, 0.46, 0.42, 0.46], "weighted": [0.44, 0.48, 0.46, 0.44, 0.48]}
    curve, tasks = [], []
    for arm, values in finals.items():
        for seed, final in enumerate(values):
            middle = final if arm == "weighted" else 0.38
            for step, value in ((0, 0.35), (25, middle), (50, final)):
                curve.append({"arm": arm, "seed": seed, "label": "start" if step == 0 else str(step // 25 - 1),
                              "step": step, "heldout": value})
            for index, (calls, turns) in enumerate([(1, 1), (2, 2), (3, 3), (3, 1)]):
                solved = calls < 3 or (arm == "weighted" and index == 3)
                tasks.append({"arm": arm, "seed": seed, "task_id": f"t{index}", "calls": calls, "operands": "small",
                              "distractors": 0, "turns": turns, "success": int(solved), "reward": float(solved)})
    return curve, tasks


def test_the_report_pairs_by_seed_and_checks_the_target(bench):
    curve, tasks = _runs()
    text, figures = bench.report(curve, tasks, ["fixed", "paper", "weighted"])
    weighted, paper = figures["arms"]["weighted"], figures["arms"]["paper"]
    assert weighted["minus_fixed"]["mean"] == pytest.approx(0.06)
    assert weighted["minus_fixed"]["low"] > 0.04 and weighted["minus_fixed"]["high"] <= 0.08 + 1e-9
    assert weighted["minus_paper"]["mean"] == pytest.approx(0.02)
    assert paper["minus_fixed"]["mean"] == pytest.approx(0.04)
    assert (weighted["reach"], paper["reach"], figures["arms"]["fixed"]["reach"]) == (25, 50, 50)
    assert weighted["reach_per_seed"] == [25] * 5
    assert "| weighted | 46.0% (2.0) | 44.0 48.0 46.0 44.0 48.0 | +6.0 [" in text
    assert "| 3 call(s) | 2 | 0.0 | 0.0 | 50.0 |" in text and "| 2 user turn(s) | 1 | 100.0 | 100.0 | 100.0 |" in text
    # per cell, minus fixed, paired by seed: weighted solves half of the 3-call tasks on every seed, fixed none
    assert "| 3 call(s) | 2 | +0.0 [+0.0, +0.0] | +50.0 [+50.0, +50.0] |" in text
    assert figures["cell_diffs"][("calls", 3, "weighted")]["mean"] == pytest.approx(0.5)
    lines = bench.target_lines(figures)
    assert lines[0].startswith("- weighted (the default) minus fixed: +6.0 points, 95% CI [")
    assert lines[0].endswith(", 5 seed(s): target (>= +3.0, CI above 0, >= 5 seeds) met")
    assert lines[1].startswith("- paper minus fixed: +4.0 points") and lines[1].endswith("(above 0 on average) met")
    assert lines[2] == "- cells where weighted ends more than 5 points under fixed: none: target met"
    assert lines[3] == "- weighted reaches fixed's final mean at step 25 of 50"
    assert len(lines) == 4  # fixed's final is its best: no remark on it
    assert "| weighted | 5 / 0 / 0 | [+3.5, +8.5] | 25 |" in text and "| paper | 5 / 0 / 0 |" in text


def test_a_fixed_arm_that_ends_below_its_best_is_named(bench):
    curve, tasks = _runs()
    for row in curve:  # fixed peaks at step 25 and falls back
        if row["arm"] == "fixed" and row["step"] == 25:
            row["heldout"] = 0.45
    text, figures = bench.report(curve, tasks, ["fixed", "paper", "weighted"])
    assert figures["fixed_best"] == {"step": 25, "mean": pytest.approx(0.45)}
    # paper ends at 44% on average, below fixed's best of 45%
    assert figures["arms"]["weighted"]["reach_best"] == 25 and figures["arms"]["paper"]["reach_best"] is None
    lines = bench.target_lines(figures)
    assert lines[4].startswith("  (fixed ended below its own best, 45.0% at step 25") and lines[4].endswith("step 25)")


def test_a_difference_whose_interval_reaches_zero_misses_the_target(bench):
    curve, tasks = _runs()
    for row in curve:  # one seed where paper and weighted fall far below fixed
        if row["arm"] in ("paper", "weighted") and row["seed"] == 0 and row["step"] == 50:
            row["heldout"] = 0.20 if row["arm"] == "paper" else 0.30
    _, figures = bench.report(curve, tasks, ["fixed", "paper", "weighted"])
    paper, weighted = figures["arms"]["paper"]["minus_fixed"], figures["arms"]["weighted"]["minus_fixed"]
    assert weighted["mean"] >= 0.03 and weighted["low"] < 0  # its mean alone would pass
    lines = bench.target_lines(figures)
    assert lines[0].endswith("NOT met") and paper["mean"] < 0 and lines[1].endswith("NOT met")


def test_fewer_than_five_seeds_or_a_cell_far_under_fixed_misses_the_target(bench):
    curve, tasks = _runs()
    curve = [row for row in curve if row["seed"] < 4]
    for row in tasks:  # weighted no longer solves the 1-call task
        if row["arm"] == "weighted" and row["task_id"] == "t0":
            row.update(success=0, reward=0.0)
    _, figures = bench.report(curve, [row for row in tasks if row["seed"] < 4], ["fixed", "paper", "weighted"])
    lines = bench.target_lines(figures)
    assert ", 4 seed(s): target" in lines[0] and lines[0].endswith("NOT met")
    assert lines[2] == "- cells where weighted ends more than 5 points under fixed: 1 call(s) -100.0: target NOT met"


def test_the_time_table_reads_each_phase_of_each_run(bench):
    runs = [{"arm": "fixed", "load": 2.0, **{f"{p}_s": 0.0 for p in bench.PHASES}, "train_s": 30.0, "eval_s": 10.0},
            {"arm": "fixed", "load": float("nan"), **{f"{p}_s": 0.0 for p in bench.PHASES}, "train_s": 50.0,
             "eval_s": 10.0}]
    lines = bench.time_lines(runs, ["fixed", "plr"])
    assert len(lines) == 3  # plr has no run
    assert lines[2] == ("| fixed | 2 | 0.0 s (0%) | 40 s (80%) | 10 s (20%) | 0.0 s (0%) | 0.0 s (0%) | 0.0 s (0%) "
                        "| 0.0 s (0%) | 50 s | 2.0-2.0 |")


def test_only_steps_every_run_evaluated_enter_the_means(bench):
    # a run extended under another eval schedule has a step the others lack: a mean there would be one seed's
    curve = [{"arm": arm, "seed": seed, "label": str(step), "step": step, "heldout": 0.3}
             for arm in ("fixed", "weighted") for seed in (0, 1) for step in (0, 25, 50)]
    curve.append({"arm": "fixed", "seed": 0, "label": "extra", "step": 40, "heldout": 0.9})
    kept, dropped = bench.on_common_steps(curve)
    assert dropped == [40] and len(kept) == 12 and {row["step"] for row in kept} == {0, 25, 50}


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, str(BENCH / "curriculum_bench.py"), "--out", str(out), "--quick",
                           "--seeds", "0", "--arms", "fixed,weighted", *extra],
                          capture_output=True, text=True, env=env, timeout=900)


def test_each_run_counts_contaminated_candidates_and_dead_groups_per_arm(bench, tmp_path, jsonl):
    from coevolve_engine.core.store import Store
    from coevolve_engine.synthesis.candidates import Candidate, write_candidates

    db = tmp_path / "store.duckdb"
    with Store(db) as store:  # step 1: a@1 mixed, b@1 all failed; step 2: a@2 all solved
        store.ingest_trajectories(jsonl([{"task_id": t, "step": step, "reward": r} for t, step, r in (
            ("a", 1, 1.0), ("a", 1, 0.0), ("b", 1, 0.0), ("b", 1, 0.0), ("a", 2, 1.0), ("a", 2, 1.0))]),
            create_tasks=True)
        made = [Candidate.create(round=0, pattern_id=None, signal=None, env="calc", synthesizer="test",
                                 prompt=f"p{i}", spec={"i": i}) for i in range(3)]
        write_candidates(store, made)
        store.execute("UPDATE candidates SET verdict = 'rejected', reason = 'contaminated' WHERE prompt = 'p0'")
    run = bench.read_run(db, "plr", 0)
    assert {k: run[k] for k in bench.GATE_AND_HEALTH_COLUMNS} == {"candidates": 3, "contaminated": 1, "groups": 3,
                                                                 "dead_groups": 2}
    assert {run[f"{phase}_s"] for phase in bench.PHASES} == {0.0}  # ingested, never run: no phase
    assert bench.read_run(db, "plr", 0, up_to_step=1)["dead_groups"] == 1
    other = {"arm": "fixed", "seed": 1, "candidates": 0, "contaminated": 0, "groups": 4, "dead_groups": 1}
    assert bench.gate_and_health_lines([run, other], ["fixed", "plr", "paper"])[2:] == [
        "| fixed | 0 | 0 | 4 | 1 (25.0%) | 25.0 |", "| plr | 3 | 1 | 3 | 2 (66.7%) | 66.7 |"]


def test_quick_benchmark_runs_fixes_the_held_out_set_and_resumes(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / "bench"
    first = _run(out)
    assert first.returncode == 0, first.stderr[-3000:]
    manifest = json.loads((out / "heldout.json").read_text())
    assert len(manifest) == 20 and all(len(row["spec_sha256"]) == 64 for row in manifest)
    for name in ("table.md", "heldout.png", "results.csv", "tasks.csv", "runs.csv"):
        assert (out / name).stat().st_size > 0, name
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["arm"], r["step"]) for r in rows} == {(arm, step) for arm in ("fixed", "weighted")
                                                    for step in ("0", "2", "4")}
    start = {r["heldout"] for r in rows if r["step"] == "0"}
    assert len(start) == 1  # both arms start from the seed's one warmed-up policy
    with (out / "tasks.csv").open() as handle:
        assert {r["task_id"] for r in csv.DictReader(handle)} == {row["task_id"] for row in manifest}
    table = (out / "table.md").read_text()
    assert "Target (issue 42):" in table and "Where a run's time goes" in table
    with (out / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert len(runs) == 2 and all(float(run["train_s"]) > 0 and float(run["eval_s"]) > 0 for run in runs)

    again = _run(out)  # everything finished: read back, the same figures
    assert again.returncode == 0, again.stderr[-3000:]
    assert "seed 0 fixed:" in again.stdout
    with (out / "results.csv").open() as handle:
        assert list(csv.DictReader(handle)) == rows

    reported = _run(out, "--report-only")  # nothing run: the finished runs read back
    assert reported.returncode == 0, reported.stderr[-3000:]
    with (out / "results.csv").open() as handle:
        assert list(csv.DictReader(handle)) == rows

    manifest[0]["spec_sha256"] = "0" * 64  # a held-out set that changed: the benchmark stops
    (out / "heldout.json").write_text(json.dumps(manifest))
    changed = _run(out)
    assert changed.returncode != 0 and "held-out set may not change" in changed.stderr


def test_the_noise_table_pairs_each_task_with_fixed_on_its_seed(bench):
    rows = []
    for seed, solved in enumerate(([0, 1], [1, 1], [0, 0])):  # weighted's verdicts on t0, t1; fixed solves t0 only
        for task, success in zip(("t0", "t1"), solved):
            rows.append({"arm": "weighted", "seed": seed, "task_id": task, "success": success})
            rows.append({"arm": "fixed", "seed": seed, "task_id": task, "success": int(task == "t0")})
    rows.append({"arm": "plr", "seed": 0, "task_id": "t0", "success": 1})  # one seed: no spread to split
    lines = bench.noise_lines(rows, ["fixed", "weighted", "plr"])
    # differences per seed: [-1, +1] (d = 0), [0, +1] (d = 0.5), [-1, 0] (d = -0.5): variance 0.25 over seeds;
    # squared standard errors 2/2, 0.5/2, 0.5/2: mean 0.5, share 200%
    assert lines[2:] == ["| weighted | 3 | 50.0 points | 70.7 points | 200% |"]
