"""Run the engine's own loop on calc from scratch and score every round's checkpoint on held-out tasks.

    HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True OMP_NUM_THREADS=1 \\
        python bench/calc_demo_run.py --config bench/calc_demo.toml --workdir /tmp/calc-demo \\
        [--set curriculum.strategy=uniform ...] [--seed-tasks 200] [--hidden 64 --layers 2]

1. A store with ``--seed-tasks`` calc seed tasks and their reference rollouts at step 0
   (`coevolve-engine rollout --model reference -k 1 --step 0`, with the reference agent's ``parallel=True``: all
   of a task's calls in one assistant message, so a rollout needs one tool-calling iteration: the warm-up's
   demonstrations).
2. A tiny Qwen3 (``trainers.tiny_policy.build_tiny_qwen3(digits=True)``) whose tokenizer is trained on those
   demonstrations (``demonstration_corpus``) plus the `full` split's prompts (every skill's words; no test prompt).
3. `coevolve-engine run --config CONFIG --db STORE --set trainer.model=... --set trainer.output_dir=...`.
4. ``coevolve_engine.evaluate.evaluate_policy`` (greedy) on the held-out set for the random policy, the warm-up
   checkpoint and every round's checkpoint. Held-out = the ``test`` split's 'steps' tasks (150 of 300: the
   'goal' form asks the policy to do arithmetic, which no setting taught in minutes); the whole test split and
   the seed tasks are scored too.

Prints one line per checkpoint and a JSON summary (also written to WORKDIR/summary.json; bench/calc_demo_table.py
prints it as a table). ``--prepare-only`` makes the store and policy; ``--policy DIR`` reuses them (the store is
copied, so runs compared from one DIR share the warm-up data and the initial policy). Preparing takes ~45 s for
200 seed tasks, ~200 s for 1000.

Measured with bench/calc_demo.toml (2 shared cores, OMP_NUM_THREADS=1), held-out success per checkpoint:
warm-up 7.6%, rounds 0-3 7.0 / 8.9 / 8.3 / 10.2% (coevolve, loop 387 s) against 7.0 / 8.3 / 7.0 / 7.0% with
``--set curriculum.strategy=uniform --set 'curriculum.settings={}'`` (loop 355 s); one seed, 157 tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path


def prepare(workdir: Path, seed_tasks: int, hidden: int, layers: int, vocab: int) -> tuple[Path, Path]:
    from click.testing import CliRunner

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.cli import cli
    from coevolve_engine.store import Store
    from coevolve_engine.trainers.sft import demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

    env = load_environment("calc")
    db, policy = workdir / "store.duckdb", workdir / "policy"
    with Store(db) as store:
        store.add_records("tasks", list(env.load_tasks(split="seed", n=seed_tasks)), label="calc seed tasks")
    import coevolve_engine.cli.rollout as rollout_cli
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent

    make_agent = rollout_cli.make_agent  # the reference agent with all of a turn's calls in one message
    rollout_cli.make_agent = lambda model, **kw: (ReferenceAgent(max_steps=kw["max_steps"], policy=kw["policy"],
                                                                 parallel=True) if model == "reference"
                                                  else make_agent(model, **kw))
    result = CliRunner().invoke(cli, ["rollout", "--env", "calc", "--model", "reference", "-k", "1", "--step", "0",
                                      "--db", str(db), "--no-progress"])
    assert result.exit_code == 0, result.output
    corpus = demonstration_corpus(demonstrations(db, env), vocab_size=vocab)
    corpus += [t["prompt"] for t in env.load_tasks(split="full")]  # the words of every skill; no test prompt
    build_tiny_qwen3(policy, corpus, hidden_size=hidden, layers=layers, vocab_size=vocab, digits=True)
    return db, policy


def score(path: str, env, sets: dict[str, list[dict]], max_turns: int) -> dict[str, float]:
    from coevolve_engine.evaluate import evaluate_policy, success_rate

    out = {}
    for name, tasks in sets.items():
        results = evaluate_policy(path, env, tasks, max_new_tokens=40, max_turns=max_turns)
        out[name] = round(success_rate(results), 4)
        if name == "held_out":
            by = defaultdict(lambda: [0, 0])
            for task, result in zip(tasks, results):
                ok = result.success
                for key in ("calls", "operands", "distractors"):
                    by[f"{key}={task['spec']['skill'][key]}"][0] += ok
                    by[f"{key}={task['spec']['skill'][key]}"][1] += 1
            out["by_skill"] = {k: f"{w}/{n}" for k, (w, n) in sorted(by.items())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--seed-tasks", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--policy", default=None, help="reuse this prepared workdir's store and policy")
    parser.add_argument("--eval-only", action="store_true", help="only score the checkpoints of WORKDIR's store")
    parser.add_argument("--prepare-only", action="store_true",
                        help="only make WORKDIR's store and policy (reuse them with --policy WORKDIR)")
    args = parser.parse_args()

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.store import Store

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    clock = time.perf_counter()
    if args.policy and not args.eval_only:  # copy a prepared store (seed tasks + reference rollouts) and reuse its policy
        import shutil

        shutil.copy(Path(args.policy) / "store.duckdb", workdir / "store.duckdb")
        db, policy = workdir / "store.duckdb", Path(args.policy) / "policy"
    elif not args.eval_only:
        db, policy = prepare(workdir, args.seed_tasks, args.hidden, args.layers, args.vocab)
    print(f"prepared in {time.perf_counter() - clock:.0f} s", flush=True)
    if args.prepare_only:
        return

    if args.eval_only:
        report(workdir / "store.duckdb", workdir / "policy" if not args.policy else Path(args.policy) / "policy",
               workdir, args.overrides, None, clock)
        return
    command = [sys.executable, "-m", "coevolve_engine.cli", "run", "--config", args.config, "--db", str(db),
               "--set", f"trainer.model={policy}", "--set", f"trainer.output_dir={workdir / 'checkpoints'}"]
    for override in args.overrides:
        command += ["--set", override]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=os.environ)
    loop_seconds = time.perf_counter() - started
    report(db, policy, workdir, args.overrides, loop_seconds, clock)


def report(db: Path, policy: Path, workdir: Path, overrides: list[str], loop_seconds: float | None,
           clock: float) -> None:
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.store import Store

    env = load_environment("calc")
    test = list(env.load_tasks(split="test"))
    sets = {"held_out": [t for t in test if t["spec"]["form"] == "steps"], "test_all": test,
            "seed": list(env.load_tasks(split="seed", n=100, seed=7))}
    with Store(db, read_only=True) as store:
        rounds = store.execute("SELECT round, checkpoint FROM rounds WHERE checkpoint IS NOT NULL "
                               "ORDER BY round").fetchall()
        phases = store.execute("SELECT round, sum(seconds) FROM run_phases GROUP BY round ORDER BY round").fetchall()
        added = dict(store.execute("SELECT round, count(*) FROM candidates WHERE verdict = 'accepted' "
                                   "GROUP BY round").fetchall())
        warm = store.scalar("SELECT json_extract_string(outputs, '$.checkpoint') FROM run_phases "
                            "WHERE phase = 'warmup'")
        train = dict(store.execute("SELECT round, json_extract(outputs, '$.success_rate') FROM run_phases "
                                   "WHERE phase = 'train'").fetchall())
        max_turns = int(json.loads(store.scalar("SELECT config FROM rounds WHERE round = 0"))["trainer"]["options"]
                        .get("max_tool_calling_iterations", 4))
    seconds = dict(phases)
    rows = [{"checkpoint": "random", **score(str(policy), env, sets, max_turns)}]
    if warm:
        rows.append({"checkpoint": "warm-up", **score(warm, env, sets, max_turns)})
    elapsed = 0.0
    for round_, checkpoint in rounds:
        elapsed += seconds.get(round_, 0.0)
        rows.append({"checkpoint": f"round {round_}", "loop_s": round(elapsed, 1),
                     "train_rollout_success": train.get(round_), "tasks_added": added.get(round_, 0),
                     **score(checkpoint, env, sets, max_turns)})
    for row in rows:
        print(json.dumps(row), flush=True)
    summary = {"overrides": overrides, "loop_seconds": loop_seconds and round(loop_seconds, 1), "rows": rows}
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"loop {loop_seconds or 0:.0f} s, total {time.perf_counter() - clock:.0f} s", flush=True)


if __name__ == "__main__":
    main()
