"""Every script in bench/ runs at its smallest size (``--smoke``) and prints its result lines.

A script is a file of bench/ with an ``if __name__ == "__main__":`` block, found by glob: each has an entry in
``SCRIPTS``, the lines its output must hold, in order, as patterns that name its rows and sections, never its
figures (they depend on the machine). A module of bench/ that is not a script is listed in ``HELPERS``. A new
file without an entry fails ``test_every_bench_file_is_a_script_or_a_helper`` and its own smoke test.

Each script runs in a subprocess from a scratch folder (its working directory and TMPDIR, so whatever it writes
lands there), offline (HF_HUB_OFFLINE=1, LITELLM_LOCAL_MODEL_COST_MAP=True), and must exit 0. The scripts are
started together, one per core (up to 4), each with one torch thread; each test waits for its own. A script that
needs what the project does not install is skipped, with the reason, unless it is provided (``NEEDS``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
        r"^load_weights \(DuckDB -> numpy\): ", r"^sampler setup \(checks of [\d,]+ weights\): ",
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
    "gpu_memory.py": [
        r"^bfcl_paper.toml: narrow, 2 layers, [\d.]+B parameters; one process's batch: generation \d+ x ",
        r"^smoke run: the code paths ran \(\d+ tokens generated, \d+ trained\)",
        r"^part +measured GB +arithmetic GB +measured/arith$", r"^weights \(bf16\) ", r"^KL reference \(bf16\) ",
        r"^fp32 master \+ Adam moments ", r"^gradients \(bf16\) ", r"^generation \(KV cache, prefill, logits\) ",
        r"^training micro-batch, decoder \(fwd\+bwd\) ", r"^peak allocated: measured ",
        r"^generation: [\d,]+ tokens in .* training micro-batch: [\d,]+ tokens forward and backward in ",
    ],
    "scale_rehearsal.py": [
        r"^recipe bfcl_paper\.toml: models/Qwen3-4B -> shape narrow .* launcher: accelerate launch",
        r"^BFCL multi_turn_base openings in Qwen3's vocabulary: [\d,]+ to [\d,]+ tokens",
        r"^measured \(resident memory, GB\) for one trl-grpo step",
        r"^ +1 weights ", r"^ +1 whole step's peak ", r"^ +2 weights ", r"^ +2 whole step's peak ",
        r"^per layer: activations [\d,]+ bytes per token measured, [\d,]+ by the arithmetic$",
        r"^the arithmetic predicts the measured peak within \d+%",
        r"^generation on the narrow model", r"^  scores kept \(before\) +peak ", r"^  read as drawn +peak ",
        r"^  read as drawn, 1 per generate +peak ",
        r"^  the scores' size by the arithmetic: .* log-probabilities differ by at most ",
        r"^predicted peak per GPU, Qwen3-4B at full depth \(36 layers, 4\.02B parameters\)",
        r"^launcher: 8 x ZeRO-3 +fixed ", r"^launcher: 8 x ZeRO-3 +before ",
        r"^bfcl_paper\.toml: [\d.]+ GB per GPU on 8 GPUs of 80 GB \(\d+% headroom\): fits$",
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
    "sft_spread.py": [
        r"^untrained policy: \d+ of \d+ turns with the reference's calls, \d+ of 3 first turns, \d+ whole episodes$",
        r"^warm-up seed 0, 1 thread: last loss [\d.]+, \d+ of \d+ turns right \(by task \[[\d, ]+\]\), "
        r"\d+ of 3 first turns, \d+ whole episodes; GRPO step: first call in \d+ of 12, \d+ solved",
        r"^over 1 warm-ups, turns right: min \d+, mean [\d.]+, max \d+$",
        r"^over 1 warm-ups, first turns right: min",
        r"^over 1 warm-ups, whole episodes: min",
        r"^over 1 warm-ups, GRPO first calls: min \d+",
        r"^over 1 warm-ups, GRPO episodes solved: min \d+",
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
        r"^Where a run's time goes", r"^\| fixed \| 1 \| [\d.]+ s \(", r"^Target \(issue 42\):",
        r"^- weighted \(the default\) minus fixed: ",
        r"^written: .*table\.md, .*heldout\.png, .*results\.csv, .*tasks\.csv$",
    ],
    "lock_bench.py": [
        r"^[\d,]+ trajectories of [\d,]+ tasks \(--create-tasks\), a query every ",
        r"^ingest-jsonl +queries (\d+)/\1 answered, longest wait [\d.]+ s .*; longest hold [\d.]+ s ",
        r"^ingest-parquet +queries (\d+)/\1 answered, longest wait [\d.]+ s .*; longest hold [\d.]+ s ",
        r"^demo --quick +queries (\d+)/\1 answered, longest wait ", r"^  round 0 train +longest hold ",
        r"^patterns +queries (\d+)/\1 answered", r"^synthesize +queries (\d+)/\1 answered",
        r"^validate +queries (\d+)/\1 answered", r"^weights +queries (\d+)/\1 answered",
        r"^report +queries (\d+)/\1 answered, .*longest hold - \(no writing open\)",
        r"^load average \(1 min\) at each start: ",
    ],
    "kill_stress.py": [
        r"^reference: .* \(\d+ s\); [\d,]+ rows in \d+ tables compared$",
        r"^run 0: killed at [\d.]+ s \((killed|exit 0)\); resumed .* in [\d.]+ s; load [\d.]+; same store$",
        r"^1 runs, [01] kills, 0 differing stores; load average ",
    ],
    "gpu_smoke.py": [
        r"^device: cpu float32, torch .*, 1 training process\(es\), launcher: .*accelerate.* launch --cpu",
        r"^policy: ", r"^round: \d+ steps, \d+ episodes in [\d.]+ s of training", r"^steps/s: [\d.]+$",
        r"^episodes/s: [\d.]+$", r"^peak memory: \d+ MiB resident \(main training process\), no GPU used$",
    ],
    "verl_check.py": [r"^1\. each override, composed on its own",
                      r"^2\. our exported Parquet in verl's dataset classes",
                      r"^3\. BFCL multi-turn episodes in verl's agent loop",
                      r"^4\. verl's dump back into the store", r"^all checks passed against verl "],
}
#: Modules of bench/ that scripts import and that are not scripts themselves.
HELPERS = {"curriculum_stats.py": "the curriculum benchmark's statistics, imported by curriculum_bench.py",
           "scale_memory.py": "the memory arithmetic of a trl-grpo step, imported by scale_rehearsal.py",
           "verl_episodes.py": "verl_check.py's multi-turn episodes and dump, imported by verl_check.py"}
#: Scripts that need what the project does not install: (environment variable that provides it, why, the
#: arguments it adds).
NEEDS = {"verl_check.py": ("COEVOLVE_VERL_VENV", "set COEVOLVE_VERL_VENV to a venv with verl (python "
                           "bench/verl_check.py --venv DIR --install makes one)", lambda value: ["--venv", value])}
#: A smoke run that takes longer than this is stuck (a quiet machine takes seconds).
TIMEOUT_S = 600
#: Scripts run at once (each with one torch thread): the cores, up to 4.
WORKERS = max(1, min(4, os.cpu_count() or 1))


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


@dataclass
class SmokeRun:
    code: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # the script's CPU seconds and its children's: about what a quiet machine takes


def smoke_run(name: str, folder: Path, extra: list[str]) -> SmokeRun:
    """``bench/NAME --smoke`` in ``folder`` (its working directory and TMPDIR), one torch thread, offline."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TMPDIR": str(folder),
           "OMP_NUM_THREADS": "1"}
    out, err = folder / "smoke.stdout", folder / "smoke.stderr"
    started = time.perf_counter()
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen([sys.executable, str(BENCH / name), "--smoke", *extra], cwd=folder, env=env,
                                   stdout=stdout, stderr=stderr)
        timer = threading.Timer(TIMEOUT_S, process.kill)
        timer.start()
        _, status, usage = os.wait4(process.pid, 0)  # the exit status and the CPU it used, its children's included
        timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
    return SmokeRun(process.returncode, out.read_text(), err.read_text(), time.perf_counter() - started,
                    usage.ru_utime + usage.ru_stime)


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory):
    """The smoke runs of the scripts whose tests were selected, started at once, WORKERS at a time."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_each_script_runs_at_its_smoke_size"]
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    runs = {}
    for name in selected:
        if name not in SCRIPTS:
            continue
        extra = []
        if name in NEEDS:
            variable, _, arguments = NEEDS[name]
            if not os.environ.get(variable):
                continue
            extra = arguments(os.environ[variable])
        runs[name] = pool.submit(smoke_run, name, tmp_path_factory.mktemp(name.removesuffix(".py")), extra)
    yield runs
    pool.shutdown(wait=True)


@pytest.mark.parametrize("name", FOUND_SCRIPTS)
def test_each_script_runs_at_its_smoke_size(name, smoke_runs):
    assert name in SCRIPTS, f"bench/{name} has no entry in SCRIPTS"
    if name in NEEDS and not os.environ.get(NEEDS[name][0]):
        pytest.skip(NEEDS[name][1])
    run = smoke_runs[name].result()
    print(f"bench/{name} --smoke: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU, load {os.getloadavg()[0]:.1f}")
    assert run.code == 0, f"bench/{name} --smoke exited {run.code}:\n{run.stderr[-3000:]}"
    missing = missing_lines(run.stdout, SCRIPTS[name])
    assert not missing, f"bench/{name} --smoke did not print lines matching {missing}:\n{run.stdout[-3000:]}"
    assert "Traceback" not in run.stderr
