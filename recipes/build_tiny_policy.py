"""Build the tiny local policy the CPU recipe (cpu_tiny.toml) trains: a random Qwen3 of ~0.3M parameters and a
byte-level BPE tokenizer trained on the spot on BFCL's tool schemas, with a tool-calling chat template TRL
recognises. Offline, a few seconds on a CPU.

    python recipes/build_tiny_policy.py runs/cpu_tiny/policy

It learns nothing by itself: it exists so the whole loop (bootstrap, GRPO, evaluation, signals, ...) can run
on a laptop or in CI. The GPU recipes train real models instead (trainer.model in bfcl_paper.toml).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def tool_corpus(worlds: int = 16, seed: int = 0) -> list[str]:
    """The chat template and the tool schemas BFCL shows in ``worlds`` generated worlds (no eval task's)."""
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import qwen3_chat_template

    environment = load_environment("bfcl")
    corpus = [qwen3_chat_template()]
    for index, world in enumerate(environment.exploration_worlds(worlds, seed)):
        spec = environment.exploration_spec(world, "Help me with my errands.")
        episode = environment.start(f"tiny-policy-corpus-{index}", spec)
        try:
            corpus.append(json.dumps(episode.tools()))
        finally:
            episode.close()
    return corpus


def build(path: Path, *, hidden_size: int = 64, layers: int = 2, vocab_size: int = 1024) -> Path:
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    # a sliding window lets a tiny model see the end of a ~2,400-token BFCL prompt (see build_tiny_qwen3)
    return build_tiny_qwen3(path, tool_corpus(), hidden_size=hidden_size, layers=layers, vocab_size=vocab_size,
                            sliding_window=64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="the folder to write the model and tokenizer to")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    build(args.path, hidden_size=args.hidden_size, layers=args.layers)
    print(f"tiny policy written to {args.path}")


if __name__ == "__main__":
    main()
