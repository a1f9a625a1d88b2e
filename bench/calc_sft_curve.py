"""How many warm-up (sft) steps does a calc policy need? Trains the engine's sft trainer on a prepared store's
reference rollouts and scores it greedily every --every steps. --demo is a folder `coevolve-engine demo --dir`
prepared (its demo.duckdb and policy/; the demo prepares both before its first phase).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/calc_sft_curve.py --demo coevolve-demo --steps 1000 --every 100 \\
        [--lr 5e-3 --batch 16]
"""
import argparse
import time
from pathlib import Path

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.evaluate import evaluate_policy, success_rate
from coevolve_engine.trainers import BatchSource
from coevolve_engine.trainers.sft import RFTConfig, RFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--demo", required=True)
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--every", type=int, default=100)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--batch", type=int, default=16)
args = parser.parse_args()
env = load_environment("calc")
db = Path(args.demo) / "demo.duckdb"
seed = list(env.load_tasks(split="seed", n=100, seed=7))
held = [t for t in env.load_tasks(split="test") if t["spec"]["form"] == "steps"]
config = RFTConfig(model=str(Path(args.demo) / "policy"), output_dir=f"/tmp/sft-curve/{time.time():.0f}",
                   learning_rate=args.lr, batch_size=args.batch, max_length=384, save_checkpoint=False)
from coevolve_engine.store import Store
with Store(db, read_only=True) as store:
    ids = [r[0] for r in store.execute("SELECT task_id FROM tasks WHERE split = 'train'").fetchall()]
trainer = RFTTrainer.from_store(db, config, env, BatchSource({i: 1.0 for i in ids}, seed=0))
clock = time.perf_counter()
for done in range(args.every, args.steps + 1, args.every):
    trainer.train(args.every)
    t = time.perf_counter() - clock
    tok = trainer._sft.processing_class
    s = success_rate(evaluate_policy(None, env, seed, model=trainer.model, tokenizer=tok))
    h = success_rate(evaluate_policy(None, env, held, model=trainer.model, tokenizer=tok))
    print(f"sft {done} steps ({t:.0f} s): seed {s:.1%} held-out {h:.1%}", flush=True)
