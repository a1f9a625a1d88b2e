"""Episodes per second of training rollouts: the episode player with the tiny demo policy, batched against one at a time.

A training step of trl-grpo plays G groups of K rollouts of calc tasks (1, 2 and 3 user turns) with the model
being trained (``trainers.trl_grpo.episodes.TrainingPolicy``: sampling at the rollout temperature, token ids and
log-probabilities kept). Batched, every open episode of the step is answered by one ``generate`` per round of
answers (what the trainer does); one at a time, each episode is answered alone (``batch_size=1``). Both play the
same tasks with the same model; the bench prints episodes per second, tokens sampled, and the speed-up.

The policy is the demo's shape (hidden 64, 2 layers, a digit-splitting BPE of 1024 tokens), warmed up here by a
few SFT steps on reference demonstrations so its answers have the length and form of real ones (a random model
writes a random answer of max_new_tokens every time).

    python bench/episode_bench.py                     # 6 groups of 8, as a demo training step
    python bench/episode_bench.py --groups 12 --k 8 --warmup 200
    python bench/episode_bench.py --smoke             # 3 groups of 2, 2 warm-up steps: checks that it works
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def build_policy(folder: Path, environment, tasks, warmup: int) -> Path:
    """A tiny Qwen3 with the demo's shape, fine-tuned ``warmup`` steps on reference rollouts of ``tasks``."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.rollouts.jobs import run_rollout_job
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers import BatchSource
    from coevolve_engine.trainers.sft import RFTConfig, RFTTrainer, demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

    db = folder / "bench.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks)
    run_rollout_job(db, environment, environment.name, ReferenceAgent(parallel=True), group_size=1, step=0, concurrency=1)
    rows = demonstrations(db, environment)
    policy = build_tiny_qwen3(folder / "policy", demonstration_corpus(rows, vocab_size=1024), hidden_size=64,
                              layers=2, vocab_size=1024, digits=True)
    if warmup:
        config = RFTConfig(model=str(policy), output_dir=str(folder / "sft"), steps=warmup, batch_size=16,
                           learning_rate=5e-3)
        trainer = RFTTrainer(config, rows, BatchSource({t["task_id"]: 1.0 for t in tasks}))
        policy = trainer.train().checkpoint
    return policy


def play(environment, rows, model, tokenizer, config, batch_size: int | None) -> tuple[float, list]:
    from coevolve_engine.adapters.agents.player import play_all, start_play
    from coevolve_engine.trainers.trl_grpo.episodes import TrainingPolicy

    agent = TrainingPolicy(model, tokenizer, config, "bench")
    plays = [start_play(environment, row["task_id"], row["spec"], agent) for row in rows]
    started = time.perf_counter()
    rollouts = play_all(plays, agent, batch_size=batch_size)
    return time.perf_counter() - started, rollouts


#: ``--smoke``: the smallest size that runs every part (seconds); the other size options are ignored.
SMOKE = {"groups": 3, "k": 2, "warmup": 2, "repeats": 1, "max_new_tokens": 8}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=6, help="tasks per step (GRPO groups)")
    parser.add_argument("--k", type=int, default=8, help="rollouts per task (group size)")
    parser.add_argument("--warmup", type=int, default=150, help="SFT steps before measuring")
    parser.add_argument("--repeats", type=int, default=2, help="steps measured per mode (the best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per answer (the demo's: 48)")
    parser.add_argument("--smoke", action="store_true", help=f"the smallest size, to check that the script works "
                        f"({SMOKE['groups']} groups of {SMOKE['k']}, {SMOKE['warmup']} warm-up steps, one repeat, "
                        f"answers of {SMOKE['max_new_tokens']} tokens; the other size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig

    torch.manual_seed(args.seed)
    environment = load_environment("calc")
    tasks = [t for t in environment.load_tasks(split="full", n=120, seed=args.seed) if t["spec"]["form"] == "steps"]
    by_turns = {n: [t for t in tasks if len(t["spec"].get("turns", [0])) == n] for n in (1, 2, 3)}
    chosen = [task for trio in zip(*by_turns.values()) for task in trio][:args.groups]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        policy = build_policy(Path(tmp), environment, tasks, args.warmup)
        print(f"policy: {policy} ({time.perf_counter() - started:.0f} s to build and warm up)")
        model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(policy)
        config = TRLGRPOConfig(model=str(policy), output_dir=tmp, temperature=1.3, max_new_tokens=args.max_new_tokens,
                               max_completion_length=256, max_model_calls_per_turn=3)
        rows = [task for task in chosen for _ in range(args.k)]
        turns = [len(t["spec"].get("turns", [0])) for t in chosen]
        print(f"one step: {len(chosen)} groups x {args.k} rollouts, user turns per task {turns}, "
              f"torch threads {torch.get_num_threads()}")
        results = {}
        for name, batch_size in (("batched", None), ("one at a time", 1)):
            best = None
            for _ in range(args.repeats):
                seconds, rollouts = play(environment, rows, model, tokenizer, config, batch_size)
                best = seconds if best is None else min(best, seconds)
            sampled = sum(r.usage.completion_tokens for r in rollouts)
            answers = sum(r.usage.llm_calls for r in rollouts)
            solved = sum(r.success for r in rollouts)
            results[name] = best
            print(f"{name:>14}: {len(rows) / best:7.1f} episodes/s  ({best:.2f} s a step; {answers} answers, "
                  f"{sampled} tokens sampled, {solved}/{len(rows)} solved)")
        print(f"batched is {results['one at a time'] / results['batched']:.1f}x faster")
        print(json.dumps({"episodes": len(rows), **{k: round(len(rows) / v, 2) for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
