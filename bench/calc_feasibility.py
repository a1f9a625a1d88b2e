"""Can a tiny policy learn calc on a CPU in minutes? SFT warm-up, then GRPO, with the engine's own parts.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/calc_feasibility.py [--sft-steps 300] [--grpo-steps 40]
        [--train-split seed|full] [--hidden 64 --layers 2]
    python bench/calc_feasibility.py --smoke    # 4 tasks, 2 SFT and 1 GRPO steps: checks that the script works

Every part is the product's, as `coevolve-engine demo` uses them:

1. A store with calc tasks of ``--train-split`` (training) and of the test split (held out), and reference
   demonstrations of the training tasks (``run_rollout_job`` with the reference agent, step 0).
2. A tiny Qwen3 (``trainers.tiny_policy.build_tiny_qwen3``, digit-by-digit tokenizer) trained on the
   demonstrations' rendered text (``demonstration_corpus``), as the demo builds its policy.
3. Scores the untrained policy on both splits with ``engine.evaluate.evaluate_policy``: greedy, every user turn
   played by the one episode player, the environment's verdict.
4. SFT with the engine's ``sft`` trainer (``TRAINERS.build``, the run's warm-up) on the demonstrations.
5. GRPO with the engine's ``trl-grpo`` trainer on the training tasks, rollouts written to the store.
6. Scores after each phase: success per split, per skill value on the held-out split, and seconds.

Figures measured with the earlier version of this script (its own tokenizer, demonstrations and one-shot
evaluation; 2-core CPU, shared): SFT took seed-split greedy success 0% -> 31%, 40 GRPO steps then 31% -> 38.5%,
held-out 0.7% -> 1.7%. This version plays whole episodes as the engine does; rerun it for its own figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def score(policy: Path, env, tasks: list[dict[str, Any]],
          max_new_tokens: int = 48) -> tuple[float, dict[str, list[int]]]:
    """Greedy success rate on ``tasks`` (the engine's evaluation), and successes per skill value."""
    from coevolve_engine.eval.checkpoint import evaluate_policy, success_rate

    results = evaluate_policy(policy, env, tasks, max_new_tokens=max_new_tokens, max_model_calls_per_turn=3)
    by_skill: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for task, result in zip(tasks, results):
        for key in ("calls", "tools", "operands", "distractors", "form"):
            cell = by_skill[f"{key}={task['spec']['skill'][key]}"]
            cell[0] += result.success
            cell[1] += 1
    return success_rate(results), dict(by_skill)


def build_store(work: Path, env, args) -> tuple[Path, list[dict], list[dict]]:
    """The store: training tasks with reference demonstrations at step 0, and the held-out tasks."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.rollouts.jobs import run_rollout_job
    from coevolve_engine.core.store import Store

    train = list(env.load_tasks(split=args.train_split, n=args.train_tasks))
    test = [{**task, "split": "eval"} for task in env.load_tasks(split="test", n=args.test_tasks)]
    db = work / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", train, label=f"calc {args.train_split} tasks")
        store.add_records("tasks", test, label="calc test tasks (held out)")
    run_rollout_job(db, env, "calc", ReferenceAgent(parallel=True), group_size=1, step=0, concurrency=1, progress=False)
    return db, train, test


def build_policy(work: Path, db: Path, env, test: list[dict], args) -> tuple[Path, dict[str, Any]]:
    """The tiny policy, its tokenizer trained on the demonstrations, as the demo builds it; and prompt sizes
    with this tokenizer and with the plain byte-level one."""
    from coevolve_engine.trainers.sft import demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, build_tokenizer, demonstration_corpus

    rows = demonstrations(db, env)
    corpus = demonstration_corpus(rows, vocab_size=args.vocab)
    policy = build_tiny_qwen3(work / "policy", corpus, hidden_size=args.hidden, layers=args.layers,
                              vocab_size=args.vocab, digits=True)
    from transformers import AutoTokenizer

    tokenizer, plain = AutoTokenizer.from_pretrained(policy), build_tokenizer(corpus, vocab_size=args.vocab)
    prompts = [[{"role": "user", "content": task["prompt"]}] for task in test]
    tools = rows[0]["tools"]  # calc's tools, the same in every task
    sizes = {name: [len(t(t.apply_chat_template(p, tools=tools, tokenize=False), add_special_tokens=False)["input_ids"])
                    for p in prompts] for name, t in (("digits", tokenizer), ("plain", plain))}
    return policy, {name: (min(n), round(sum(n) / len(n), 1), max(n)) for name, n in sizes.items()}


def train(name: str, options: dict[str, Any], steps: int, db: Path, env, model: Path, output: Path,
          tasks: list[dict], start_step: int = 0):
    """``steps`` of the engine's trainer ``name``, built as `coevolve-engine run` builds it; its report."""
    from coevolve_engine.core.sink import StoreSink
    from coevolve_engine.trainers import TRAINERS, BatchSource, TrainContext

    context = TrainContext(store_path=db, env="calc", environment=env, seed=0, model=str(model),
                           output_dir=str(output), start_step=start_step, policy_name="calc-tiny",
                           source=BatchSource({t["task_id"]: 1.0 for t in tasks}, seed=0),
                           sink=StoreSink(db, label=f"bench {name}") if name != "sft" else None)
    trainer = TRAINERS.build(name, options, context)
    return trainer.train(steps)


#: ``--smoke``: the smallest size that runs every phase (seconds); the other size options are ignored.
SMOKE = {"sft_steps": 2, "grpo_steps": 1, "k": 2, "groups": 2, "train_tasks": 4, "test_tasks": 4, "max_new_tokens": 8}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=64, help="hidden size of the tiny Qwen3")
    parser.add_argument("--layers", type=int, default=2, help="layers of the tiny Qwen3")
    parser.add_argument("--vocab", type=int, default=1024, help="BPE vocabulary size")
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT optimizer steps (the sft trainer's)")
    parser.add_argument("--sft-lr", type=float, default=3e-3, help="SFT learning rate")
    parser.add_argument("--grpo-steps", type=int, default=40, help="GRPO optimizer steps")
    parser.add_argument("--grpo-lr", type=float, default=5e-4, help="GRPO learning rate")
    parser.add_argument("--temperature", type=float, default=1.0, help="GRPO rollout temperature")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per answer, in GRPO and in scoring")
    parser.add_argument("--k", type=int, default=8, help="GRPO group size")
    parser.add_argument("--groups", type=int, default=8, help="groups per GRPO step")
    parser.add_argument("--train-tasks", type=int, default=200, help="tasks to train on")
    parser.add_argument("--train-split", default="seed", choices=("seed", "full"),
                        help="train on the seed split (part of the skill space) or on 'full' (all of it)")
    parser.add_argument("--test-tasks", type=int, default=300, help="held-out tasks to score on")
    parser.add_argument("--workdir", default=None, help="where to keep the policy and store (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="the smallest size, to check that the script works "
                        "(4 tasks a split, 2 SFT steps, 1 GRPO step of 2 groups of 2, answers of 8 tokens; the other "
                        "size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)

    from coevolve_engine.adapters.environments import load_environment

    work = Path(args.workdir or tempfile.mkdtemp(prefix="calc-feasibility-"))
    work.mkdir(parents=True, exist_ok=True)
    env = load_environment("calc")
    clock = time.perf_counter()
    db, train_tasks, test_tasks = build_store(work, env, args)
    policy, sizes = build_policy(work, db, env, test_tasks, args)
    print(f"policy {policy}; rendered test prompt tokens min/mean/max {sizes['digits']} (the plain byte-level "
          f"tokenizer: {sizes['plain']})", flush=True)
    results: list[dict[str, Any]] = []

    def report(phase: str, checkpoint: Path) -> None:
        started = time.perf_counter()
        train_rate, _ = score(checkpoint, env, train_tasks, args.max_new_tokens)
        test_rate, skills = score(checkpoint, env, test_tasks, args.max_new_tokens)
        results.append({"phase": phase, "train": round(train_rate, 3), "held_out": round(test_rate, 3),
                        "elapsed_s": round(time.perf_counter() - clock, 1)})
        print(f"[{phase}] train ({args.train_split}) {train_rate:.1%}  held-out {test_rate:.1%}  "
              f"(eval {time.perf_counter() - started:.0f} s, {time.perf_counter() - clock:.0f} s so far)", flush=True)
        print("   held-out by skill: " + "  ".join(f"{k} {w}/{n}" for k, (w, n) in sorted(skills.items())),
              flush=True)

    report("untrained", policy)
    started = time.perf_counter()
    sft = train("sft", {"learning_rate": args.sft_lr, "batch_size": 16}, args.sft_steps, db, env, policy,
                work / "sft", train_tasks)
    sft_seconds = time.perf_counter() - started
    print(f"SFT: {sft.steps} steps in {sft_seconds:.0f} s -> {sft.checkpoint}", flush=True)
    report("after SFT", sft.checkpoint)

    started = time.perf_counter()
    grpo = train("trl-grpo", {"group_size": args.k, "groups_per_step": args.groups, "learning_rate": args.grpo_lr,
                              "beta": 0.0, "temperature": args.temperature, "max_new_tokens": args.max_new_tokens,
                              "max_model_calls_per_turn": 3}, args.grpo_steps, db, env, sft.checkpoint,
                 work / "grpo", train_tasks)
    grpo_seconds = time.perf_counter() - started
    print(f"GRPO: {grpo.steps} steps, {grpo.rollouts} rollouts in {grpo_seconds:.0f} s "
          f"({grpo_seconds / grpo.steps:.2f} s/step)", flush=True)
    report("after GRPO", grpo.checkpoint)
    print(json.dumps({"train_split": args.train_split, "prompt_tokens": sizes, "sft_seconds": round(sft_seconds, 1),
                      "grpo_seconds": round(grpo_seconds, 1), "phases": results}))


if __name__ == "__main__":
    main()
