"""Every script in bench/ runs at its smallest size (``--smoke``) and prints its result lines.

A script is a file of bench/ with an ``if __name__ == "__main__":`` block, found by glob: each has an entry in
``SCRIPTS``, the lines its output must hold, in order, as patterns that name its rows and sections, never its
figures (they depend on the machine). A module of bench/ that is not a script is listed in ``HELPERS``. A new
file without an entry fails ``test_every_bench_file_is_a_script_or_a_helper`` and its own smoke test.

Each script runs in a subprocess from a scratch folder (its working directory and TMPDIR, so whatever it writes
lands there), offline (HF_HUB_OFFLINE=1, LITELLM_LOCAL_MODEL_COST_MAP=True), and must exit 0. A script that
needs what the project does not install is skipped, with the reason, unless it is provided (``NEEDS``).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"

VIEWS = ("task_steps", "forgetting", "forgetting_events", "boundary", "rare_patterns", "flagged_trajectories",
         "task_signals")

#: bench/ script -> the lines its --smoke output holds, in order (regular expressions, searched in each line).
SCRIPTS: dict[str, list[str]] = {
    "signals_bench.py": [
        r"^generated [\d,]+ trajectories over [\d,]+ tasks, \d+ steps, groups of \d+",
        r"^stored [\d,]+ tasks in", r"^ingested [\d,]+ in",
        r"^flags by signal: boundary [\d,]+, forgetting [\d,]+, rare [\d,]+$",
        r"^groups with mixed outcomes: [\d,]+ of [\d,]+",
        r"^view +rows +alone s +duckdb s +pandas s +python s +pandas/db +python/db +agree$",
        r"^\(shared snapshot\) ",
        *(rf"^{view} +[\d,]+ .* yes$" for view in VIEWS),
        r"^all signals .* all agree$",
    ],
    "sampling_bench.py": [
        r"^store with [\d,]+ tasks: ", r"^compute_weights \(coevolve\) \+ store: .*first weight set",
        r"^load_weights \(DuckDB -> numpy\): ", r"^sampler setup \(cumulative sum of [\d,]+ weights\): ",
        r"^batch of \d+ tasks x K=\d+ from [\d,]+ weighted tasks: mean .* median .* p99 ",
        r"^for comparison, numpy Generator.choice\(p=...\) per batch: ",
    ],
    "episode_bench.py": [
        r"^policy: .* to build and warm up\)", r"^one step: \d+ groups x \d+ rollouts, user turns per task \[1, 2, 3\]",
        r"^ +batched: .* episodes/s .* answers, .* tokens sampled", r"^ +one at a time: .* episodes/s",
        r"^batched is [\d.]+x faster$", r'^\{"episodes": \d+, "batched": [\d.]+, "one at a time": [\d.]+\}$',
    ],
    "patterns_bench.py": [
        r"^store: \d+ BFCL multi_turn_base tasks x \d+ rollouts x 2 steps; step 1: \d+ rollouts, .* flags at step 1: ",
        r"^built in play episodes .* ingest ",
        r"^first run \(embeddings computed\): \d+ flagged trajectories at step 1 -> \d+ patterns",
        r"^  phases: select .* render .* embed .* cluster .* write ",
        r"^second run \(embeddings cached\): \d+ flagged .* 0 texts embedded",
        r"^  sizes: \d+", r"^  0-0 +\d+ +\w+ +\[.*\] +e\.g\. bfcl/multi_turn_base_\d+; tasks using: \w+ \d+",
        r"^store: .*patterns-bench\.duckdb$",
    ],
    "synthesis_bench.py": [
        r"^\d+ flagged trajectories at step 1 -> \d+ patterns \(sizes ",
        r"^LLM calls: summary \d+ \(\d+ patterns summarised, 0 failed\)$",
        r"^candidates: \d+ proposed \(.*\); \d+ accepted", r"^by reason: \w+ \d+",
        r"^time per phase: build store \(play \+ ingest\) .* patterns .* summaries .* synthesize \(offline:bfcl\) "
        r".* validate ",
        r"^store: .*synthesis-bench\.duckdb$",
    ],
    "calc_feasibility.py": [
        r"^policy .*; rendered test prompt tokens min/mean/max \(\d+, [\d.]+, \d+\)",
        r"^\[untrained\] train \(seed\) [\d.]+%  held-out [\d.]+%", r"^   held-out by skill: calls=1 \d+/\d+",
        r"^SFT: \d+ steps in .* -> ", r"^\[after SFT\] train \(seed\) ", r"^GRPO: \d+ steps, \d+ rollouts in ",
        r"^\[after GRPO\] train \(seed\) ", r'^\{"train_split": "seed", "prompt_tokens": .*"phases": ',
    ],
    "calc_sft_curve.py": [
        r"^store .*demo\.duckdb: \d+ training tasks", r"^demonstrations: \d+ reference rollouts",
        r"^policy .*: a tiny Qwen3", r"^sft 1 steps \(.*\): seed [\d.]+% held-out [\d.]+%$", r"^sft 2 steps \(",
    ],
    "loop_cost_bench.py": [
        r"^load average [\d.]+ on \d+ cores; working in ",
        r"^opens \(median of \d+\):", r"^  writable  before .* after ", r"^  read-only before .* after ",
        r"^sink, one demo round of writes", r"^  before +[\d.]+ s in \d+ units of work", r"^  after +[\d.]+ s in ",
        r"^  after, steps_per_write=5 ", r"^  same trajectories in both stores: True$",
        r"^demo's training phase", r"^  before train phase .* store writes .* round's feedback",
        r"^  after  train phase ", r"^  same trajectories in both stores: True$",
        r"^ingest of [\d,]+ trajectories \(create_tasks\); before = \w+:", r"^  parquet  before ",
        r"^  parquet  after ", r"^  parquet  same trajectories .*: True$", r"^  jsonl    before ",
        r"^  jsonl    after ", r"^  jsonl    same trajectories .*: True$",
        r"^`query` from another process while `patterns` embeds \d+ new texts",
        r"^  before patterns .* queries, longest", r"^  after  patterns ",
        r"^floors \(load ", r"^  DuckDB connect \+ close of the store file ", r"^  DuckDB connect \+ close in memory ",
        r"^  copy the rows into a table of the store ", r"^  content hashes of the copied rows",
        r"^  copy and hashes, nothing else ", r"^  json.loads of every JSON line, nothing else ",
    ],
    "curriculum_bench.py": [
        r"^held-out set: \d+ tasks, fixed in ", r"^\| arm \| final held-out, mean \(sd\) \|", r"^\| fixed \| ",
        r"^\| weighted \| ", r"^Held-out success, mean over seeds", r"^Final held-out success by skill parameter",
        r"^Target \(issue 18\):", r"^- weighted minus fixed: ",
        r"^written: .*table\.md, .*heldout\.png, .*results\.csv, .*tasks\.csv$",
    ],
    "verl_check.py": [r"^1\. each override, composed on its own",
                      r"^2\. our exported Parquet in verl's dataset classes", r"^all checks passed against verl "],
}
#: Modules of bench/ that scripts import and that are not scripts themselves.
HELPERS = {"curriculum_stats.py": "the curriculum benchmark's statistics, imported by curriculum_bench.py"}
#: Scripts that need what the project does not install: (environment variable that provides it, why, the
#: arguments it adds).
NEEDS = {"verl_check.py": ("COEVOLVE_VERL_VENV", "set COEVOLVE_VERL_VENV to a venv with verl (python "
                           "bench/verl_check.py --venv DIR --install makes one)", lambda value: ["--venv", value])}
#: A smoke run that takes longer than this is stuck (a quiet machine takes seconds).
TIMEOUT_S = 600


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def is_script(path: Path) -> bool:
    return re.search(r'^if __name__ == "__main__":', path.read_text(encoding="utf-8"), re.MULTILINE) is not None


FILES = sorted(path.name for path in BENCH.glob("*.py"))
FOUND_SCRIPTS = [name for name in FILES if is_script(BENCH / name)]


def test_every_bench_file_is_a_script_or_a_helper():
    for name in FILES:
        if is_script(BENCH / name):
            assert name in SCRIPTS, (f"bench/{name} is a script with no entry in SCRIPTS: give it --smoke and list "
                                     "the lines it prints")
        else:
            assert name in HELPERS, f"bench/{name} is not a script (no __main__ block) and not listed in HELPERS"
    assert sorted([*SCRIPTS, *HELPERS]) == FILES, "SCRIPTS and HELPERS name files bench/ does not hold"
    assert not set(SCRIPTS) & set(HELPERS)


def missing_lines(output: str, patterns: list[str]) -> list[str]:
    """The patterns no line matches after the lines the earlier patterns matched (in order)."""
    lines, at, missing = output.splitlines(), 0, []
    for pattern in patterns:
        found = next((i for i in range(at, len(lines)) if re.search(pattern, lines[i])), None)
        if found is None:
            missing.append(pattern)
        else:
            at = found + 1
    return missing


@pytest.mark.parametrize("name", FOUND_SCRIPTS)
def test_each_script_runs_at_its_smoke_size(name, tmp_path):
    assert name in SCRIPTS, f"bench/{name} has no entry in SCRIPTS"
    extra = []
    if name in NEEDS:
        variable, reason, arguments = NEEDS[name]
        if not os.environ.get(variable):
            pytest.skip(reason)
        extra = arguments(os.environ[variable])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TMPDIR": str(tmp_path)}
    started, cpu = time.perf_counter(), children_cpu_seconds()
    result = subprocess.run([sys.executable, str(BENCH / name), "--smoke", *extra], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    # CPU seconds are what a quiet machine would take at most; wall seconds grow with the machine's load
    print(f"bench/{name} --smoke: {time.perf_counter() - started:.1f} s wall, "
          f"{children_cpu_seconds() - cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}")
    assert result.returncode == 0, f"bench/{name} --smoke exited {result.returncode}:\n{result.stderr[-3000:]}"
    missing = missing_lines(result.stdout, SCRIPTS[name])
    assert not missing, f"bench/{name} --smoke did not print lines matching {missing}:\n{result.stdout[-3000:]}"
    assert "Traceback" not in result.stderr
