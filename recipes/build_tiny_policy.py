"""Build a tiny local policy for an environment: a random Qwen3 of ~0.3M parameters and a byte-level BPE tokenizer
trained on the spot on the environment's tool schemas and tasks, with a tool-calling chat template TRL recognises.
Offline, a few seconds on a CPU.

    python recipes/build_tiny_policy.py runs/cpu_tiny/policy                 # BFCL, for cpu_tiny.toml
    python recipes/build_tiny_policy.py runs/counter/policy --env counter    # any installed environment

It learns nothing by itself: it exists so the whole loop (bootstrap, GRPO, evaluation, signals, ...) can run
on a laptop or in CI. The GPU recipes train real models instead (trainer.model in bfcl_paper.toml).
For BFCL the tokenizer reads the tools of generated worlds (never an eval task's); for any other environment, the
tasks it ships (``load_tasks()``).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def bfcl_tasks(worlds: int = 16, seed: int = 0) -> list[dict]:
    """Tasks in ``worlds`` generated BFCL worlds, to read their tool schemas from (no eval task's)."""
    from coevolve_engine.adapters.environments import load_environment

    environment = load_environment("bfcl")
    return [{"task_id": f"tiny-policy-corpus-{index}",
             "spec": environment.exploration_spec(world, "Help me with my errands.")}
            for index, world in enumerate(environment.exploration_worlds(worlds, seed))]


def build(path: str | Path, *, env: str = "bfcl", hidden_size: int = 64, layers: int = 2,
          vocab_size: int = 1024) -> Path:
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import build_tiny_policy

    # a sliding window lets a tiny model see the end of a long prompt of tool schemas (see build_tiny_qwen3)
    return build_tiny_policy(path, load_environment(env), bfcl_tasks() if env == "bfcl" else None,
                             hidden_size=hidden_size, layers=layers, vocab_size=vocab_size, sliding_window=64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="the folder to write the model and tokenizer to")
    parser.add_argument("--env", default="bfcl", help="the environment (a registered name, a plugin's included)")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    build(args.path, env=args.env, hidden_size=args.hidden_size, layers=args.layers)
    print(f"tiny policy for {args.env} written to {args.path}")


if __name__ == "__main__":
    main()
