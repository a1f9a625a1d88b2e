"""How many warm-up (sft) steps does a calc policy need? Trains the engine's sft trainer on a prepared store's
reference rollouts and scores it greedily every --every steps. --demo is a folder `coevolve-engine demo --dir`
prepared (its demo.duckdb and policy/; the demo prepares both before its first phase).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/calc_sft_curve.py --demo coevolve-demo --steps 1000 --every 100 \\
        [--lr 5e-3 --batch 16]
    python bench/calc_sft_curve.py --smoke      # the quick demo's store and policy, 2 steps: checks that it works
"""
import argparse
import tempfile
import time
from pathlib import Path

#: ``--smoke``: the smallest size that runs every part (seconds): the quick demo's store and policy prepared in a
#: temporary folder (unless --demo names one), 2 steps scored after each on 4 tasks of each split.
SMOKE = {"steps": 2, "every": 1, "score_tasks": 4, "max_new_tokens": 8, "max_calls_per_turn": 3}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", help="a folder `coevolve-engine demo --dir` prepared (required unless --smoke)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per answer in scoring")
    parser.add_argument("--max-calls-per-turn", type=int, default=20, help="answers per user turn in scoring")
    parser.add_argument("--smoke", action="store_true", help="the smallest size, to check that the script works "
                        "(the quick demo's store and policy unless --demo is given, 2 steps, 4 tasks scored a split, "
                        "answers of 8 tokens, 3 a turn; the other size options are ignored)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.score_tasks = None
    if args.smoke:
        vars(args).update(SMOKE)
    elif args.demo is None:
        parser.error("--demo is required (or --smoke)")

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.eval.checkpoint import evaluate_policy, success_rate
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers import BatchSource
    from coevolve_engine.trainers.sft import RFTConfig, RFTTrainer

    work = Path(tempfile.mkdtemp(prefix="sft-curve-"))
    if args.demo is None:  # --smoke: the quick demo's store and policy, as `coevolve-engine demo --quick` makes them
        from coevolve_engine.loop.demo import QUICK, prepare

        prepare(work / "demo", QUICK)
    demo = Path(args.demo) if args.demo else work / "demo"
    env = load_environment("calc")
    db = demo / "demo.duckdb"
    seed = list(env.load_tasks(split="seed", n=100, seed=7))[:args.score_tasks]
    held = [t for t in env.load_tasks(split="test") if t["spec"]["form"] == "steps"][:args.score_tasks]
    config = RFTConfig(model=str(demo / "policy"), output_dir=str(work / "sft"), learning_rate=args.lr,
                       batch_size=args.batch, max_length=384, save_checkpoint=False)
    with Store(db, read_only=True) as store:
        ids = [r[0] for r in store.execute("SELECT task_id FROM tasks WHERE split = 'train'").fetchall()]
    trainer = RFTTrainer.from_store(db, config, env, BatchSource({i: 1.0 for i in ids}, seed=0))
    clock = time.perf_counter()
    for done in range(args.every, args.steps + 1, args.every):
        trainer.train(args.every)
        t = time.perf_counter() - clock
        tok = trainer._sft.processing_class
        limits = {"max_new_tokens": args.max_new_tokens, "max_model_calls_per_turn": args.max_calls_per_turn}
        s = success_rate(evaluate_policy(None, env, seed, model=trainer.model, tokenizer=tok, **limits))
        h = success_rate(evaluate_policy(None, env, held, model=trainer.model, tokenizer=tok, **limits))
        print(f"sft {done} steps ({t:.0f} s): seed {s:.1%} held-out {h:.1%}", flush=True)


if __name__ == "__main__":
    main()
