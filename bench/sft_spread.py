"""How much the tiny SFT warm-up's outcome varies: the bar tests/test_trainer_sft.py sets comes from here.

The same warm-up as the test (reference demonstrations of three BFCL multi_turn_base tasks, a 96-wide tiny Qwen3
whose tokenizer is trained on them, 100 SFT steps at 5e-3), repeated over seeds and torch thread counts: the seed
moves the data order, the thread count moves every float sum, and both are another reasonable warm-up. Each is
then played greedily as the test plays it, and the script prints, per warm-up, the user turns whose calls are the
reference's (of 13), the first turns right (of 3) and the whole episodes solved; then the spread, and what the
policy makes before any warm-up. With ``--grpo``, each warm-up then takes the test's GRPO step (4 episodes of
each task sampled at temperature 0.9), and the script prints how many of those 12 made the reference's first
call and how many were solved.

    HF_HUB_OFFLINE=1 python bench/sft_spread.py --seeds 0-11 --threads 1,2      # ~15 s a warm-up on 2 cores
    HF_HUB_OFFLINE=1 python bench/sft_spread.py --seeds 0-5 --threads 1 --grpo  # ~30 s more each
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

TASKS = ["bfcl/multi_turn_base_100", "bfcl/multi_turn_base_116", "bfcl/multi_turn_base_142"]
LEFT_OUT = "bfcl/multi_turn_base_105"  # weight 0, as in the test
WEIGHTS = {**{task: 1.0 for task in TASKS}, LEFT_OUT: 0.0}


def numbers(text: str) -> list[int]:
    """'0-3,7' -> [0, 1, 2, 3, 7]."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out += list(range(int(low), int(high or low) + 1))
    return out


def prepare(folder: Path):
    """The test's store (the tasks and two reference rollouts of each) and its untrained tiny policy."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.core.store import Store
    from coevolve_engine.rollouts.jobs import run_rollout_job
    from coevolve_engine.trainers.sft import demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

    environment = BFCLEnvironment()
    tasks = sorted((t for t in environment.load_tasks(category="multi_turn_base") if t["task_id"] in WEIGHTS),
                   key=lambda t: t["task_id"])
    db = folder / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks)
    run_rollout_job(db, environment, "bfcl", ReferenceAgent(), group_size=2, step=0, concurrency=1)
    corpus = demonstration_corpus(demonstrations(db, environment), vocab_size=2048)
    policy = build_tiny_qwen3(folder / "policy", corpus * 2, hidden_size=96, vocab_size=2048, sliding_window=64)
    return environment, [t for t in tasks if t["task_id"] in TASKS], db, policy


def calls_by_turn(messages: list[dict]) -> list[list[tuple[str, dict]]]:
    """The tool calls the assistant made in each user turn of an episode, in order."""
    turns: list[list[tuple[str, dict]]] = []
    for message in messages:
        if message["role"] == "user":
            turns.append([])
        elif message["role"] == "assistant" and turns:
            turns[-1] += [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                          for c in message.get("tool_calls") or []]
    return turns


def play(checkpoint, environment, tasks) -> tuple[dict[str, int], int, int]:
    """Turns with the reference's calls per task, first turns right, whole episodes solved: greedy, as the test."""
    from coevolve_engine.eval.checkpoint import evaluate_policy

    results = evaluate_policy(checkpoint, environment, tasks, max_new_tokens=40, max_model_calls_per_turn=6)
    made = {r.task_id: calls_by_turn(r.completion) for r in results}
    wanted = {t["task_id"]: [[(c.name, c.arguments) for c in turn]
                             for turn in environment.reference_solution(t["spec"])] for t in tasks}
    right = {task: sum(m == w for m, w in zip(made[task], wanted[task])) for task in wanted}
    firsts = sum(made[task][:1] == wanted[task][:1] for task in wanted)
    return right, firsts, sum(r.success for r in results)


def grpo_step(checkpoint, environment, tasks, db: Path, folder: Path) -> tuple[int, int, int]:
    """The test's GRPO step from ``checkpoint`` on a copy of the store: episodes that made the reference's first
    call, episodes solved, episodes."""
    import shutil

    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers import TRAINERS, BatchSource
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig

    copy = folder / "grpo.duckdb"
    shutil.copy(db, copy)
    config = TRLGRPOConfig(model=str(checkpoint), output_dir=str(folder / "grpo"), group_size=4,
                           groups_per_step=len(TASKS), learning_rate=1e-3, beta=0.0, temperature=0.9,
                           max_completion_length=1024, max_new_tokens=40, max_model_calls_per_turn=6,
                           policy_name="warm")
    TRAINERS.load("trl-grpo").from_store(copy, config, environment, BatchSource(WEIGHTS, seed=0)).train(1)
    with Store(copy, read_only=True) as store:
        rows = store.sql("SELECT task_id, reward, messages FROM trajectories WHERE policy = 'warm@0'").rows()
    first = {t["task_id"]: [(c.name, c.arguments) for c in environment.reference_solution(t["spec"])[0]]
             for t in tasks}
    made_first = sum(calls_by_turn(json.loads(messages))[:1] == [first[task]] for task, _, messages in rows)
    return made_first, sum(reward == 1.0 for _, reward, _ in rows), len(rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-11", help="warm-up seeds, e.g. 0-11 or 0,3,5 (default 0-11)")
    parser.add_argument("--threads", default="1,2", help="torch thread counts to repeat them with (default 1,2)")
    parser.add_argument("--steps", type=int, default=100, help="SFT steps of each warm-up (the test's: 100)")
    parser.add_argument("--grpo", action="store_true", help="then take the test's GRPO step from each warm-up")
    parser.add_argument("--smoke", action="store_true",
                        help="one seed, one thread, 5 steps, with --grpo: checks the script runs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seeds, thread_counts, steps = numbers(args.seeds), numbers(args.threads), args.steps
    if args.smoke:
        seeds, thread_counts, steps, args.grpo = [0], [1], 5, True

    import torch
    from coevolve_engine.trainers import TRAINERS, BatchSource
    from coevolve_engine.trainers.sft import RFTConfig

    folder = Path(tempfile.mkdtemp(prefix="sft-spread-"))
    environment, tasks, db, policy = prepare(folder)
    right, firsts, episodes = play(policy, environment, tasks)
    turns = sum(len(environment.reference_solution(t["spec"])) for t in tasks)
    print(f"untrained policy: {sum(right.values())} of {turns} turns with the reference's calls, "
          f"{firsts} of {len(tasks)} first turns, {episodes} whole episodes")
    outcomes = []
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for seed in seeds:
            started = time.perf_counter()
            config = RFTConfig(model=str(policy), output_dir=str(folder / f"out-{threads}-{seed}"), steps=steps,
                               max_length=1024, seed=seed, trl_args={"truncation_mode": "keep_end"})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trainer = TRAINERS.load("sft").from_store(db, config, environment, BatchSource(WEIGHTS, seed=seed))
            trainer.progress = lambda line: None
            report = trainer.train()
            right, firsts, episodes = play(report.checkpoint, environment, tasks)
            outcome = (sum(right.values()), firsts, episodes)
            sampled = ""
            if args.grpo:
                made_first, solved, played = grpo_step(report.checkpoint, environment, tasks, db,
                                                       folder / f"out-{threads}-{seed}")
                outcome += (made_first, solved)
                sampled = f"; GRPO step: first call in {made_first} of {played}, {solved} solved"
            outcomes.append(outcome)
            print(f"warm-up seed {seed}, {threads} thread{'s' * (threads > 1)}: last loss {trainer.losses[-1]:.4f}, "
                  f"{sum(right.values())} of {turns} turns right (by task {list(right.values())}), "
                  f"{firsts} of {len(tasks)} first turns, {episodes} whole episodes{sampled} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    names = ("turns right", "first turns right", "whole episodes", "GRPO first calls", "GRPO episodes solved")
    for name, values in zip(names, zip(*outcomes)):
        print(f"over {len(outcomes)} warm-ups, {name}: min {min(values)}, mean {sum(values) / len(values):.2f}, "
              f"max {max(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
