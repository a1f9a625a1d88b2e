"""One round of trl-grpo through the run's launcher, timed: what a GPU run of the recipes does, in one command.

It builds a store of calc tasks (one and two user turns) and a tiny Qwen3 (or takes ``--model``, a real small
model on disk), then runs `coevolve-engine run` for one round with ``trainer.launcher`` (accelerate by default),
and prints the round's steps/s, episodes/s and peak memory (the training process's resident memory, and the
GPU's peak allocation), read back from the round's stored outputs. On a GPU it trains in bf16 (the device and
dtype are ``core.device.placement()``'s); ``--smoke`` runs the same on CPU in float32 at its smallest size
(what CI runs, so the script does not rot).

    python bench/gpu_smoke.py                                   # one GPU: the tiny Qwen3, bf16, 10 steps
    python bench/gpu_smoke.py --model models/Qwen3-0.6B --max-new-tokens 256
    python bench/gpu_smoke.py --processes 2                     # two GPUs (or two CPU processes with --cpu)
    python bench/gpu_smoke.py --smoke                           # CPU, 2 steps, the tiny model
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SMOKE = {"steps": 2, "groups": 2, "k": 2, "max_new_tokens": 12, "cpu": True}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="", help="a local model directory (default: a tiny Qwen3 built here)")
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps in the round")
    parser.add_argument("--groups", type=int, default=4, help="groups per step, per process")
    parser.add_argument("--k", type=int, default=8, help="rollouts per group")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per answer")
    parser.add_argument("--processes", type=int, default=1, help="training processes (accelerate --num_processes)")
    parser.add_argument("--launcher", default="", help="the launcher command (default: accelerate launch with "
                        "--processes)")
    parser.add_argument("--cpu", action="store_true", help="train on CPU in float32 even with a GPU present")
    parser.add_argument("--smoke", action="store_true", help=f"the smallest size on CPU, to check that the script "
                        f"works ({SMOKE['steps']} steps of {SMOKE['groups']} groups of {SMOKE['k']}; the size "
                        "options are ignored)")
    return parser


def launcher(args) -> str:
    if args.launcher:
        return args.launcher
    accelerate = Path(sys.executable).with_name("accelerate")
    command = str(accelerate) if accelerate.exists() else "accelerate"
    flags = "--mixed_precision no" if args.cpu else "--mixed_precision bf16"
    many = "--multi_gpu " if args.processes > 1 else "--cpu " if args.cpu else ""  # several: gloo on a CPU machine
    return f"{command} launch {many}--num_processes {args.processes} --num_machines 1 {flags} --dynamo_backend no"


def prepare(folder: Path, model: str) -> tuple[Path, str]:
    """A store of calc tasks of one and two user turns, and the policy (built unless ``model`` is given)."""
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template

    environment = load_environment("calc")
    tasks = [t for t in environment.load_tasks(split="seed", n=60, seed=0) if t["spec"]["form"] == "steps"]
    db = folder / "smoke.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks)
    if not model:
        model = str(build_tiny_qwen3(folder / "policy", [qwen3_chat_template()] + [t["prompt"] for t in tasks],
                                     hidden_size=64, vocab_size=1024, digits=True))
    return db, model


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    import torch

    from coevolve_engine.core.device import placement

    where = placement(use_cpu=args.cpu or None)
    if where.device == "cpu" and not args.cpu:
        print("no GPU here: run with --cpu (or --smoke) for the CPU mode", file=sys.stderr)
        return 2
    print(f"device: {where.device} {where.dtype}, torch {torch.__version__}, {args.processes} training "
          f"process(es), launcher: {launcher(args)}")
    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.core.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db, model = prepare(folder, args.model)
        print(f"policy: {model}")
        settings = {"env": "calc", "rounds": 1, "trainer.model": model, "trainer.steps_per_round": args.steps,
                    "trainer.output_dir": str(folder / "checkpoints"), "trainer.launcher": launcher(args),
                    "trainer.options.group_size": args.k, "trainer.options.groups_per_step": args.groups,
                    "trainer.options.learning_rate": 1e-5 if args.model else 1e-3,
                    "trainer.options.temperature": 1.0, "trainer.options.use_cpu": args.cpu,
                    "trainer.options.max_completion_length": 8 * args.max_new_tokens,
                    "episode.max_new_tokens": args.max_new_tokens, "episode.max_model_calls_per_turn": 3,
                    "synthesis.synthesizer": "none", "curriculum.strategy": "uniform", "eval.every": 0}
        overrides = [x for key, value in settings.items() for x in ("--set", f"{key}={json.dumps(value)}")]
        started = time.perf_counter()
        result = CliRunner().invoke(cli, ["run", "--db", str(db), "--config", str(write_config(folder)),
                                          *overrides])
        wall = time.perf_counter() - started
        if result.exit_code != 0:
            print(result.output, file=sys.stderr)
            return 1
        with Store(db, read_only=True) as store:
            (outputs,), = store.execute("SELECT outputs FROM run_phases WHERE phase = 'train'").fetchall()
        outputs = json.loads(outputs)
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    seconds = outputs["seconds_per_step"] * args.steps
    print(f"round: {args.steps} steps, {outputs['rollouts']} episodes in {seconds:.1f} s of training "
          f"({wall:.1f} s with process start and model loading)")
    print(f"steps/s: {args.steps / seconds:.3f}")
    print(f"episodes/s: {outputs['rollouts'] / seconds:.2f}")
    gpu = outputs.get("peak_accelerator_bytes")
    print(f"peak memory: {outputs['peak_rss_bytes'] / 2**20:.0f} MiB resident (main training process), "
          + (f"{gpu / 2**30:.2f} GiB on the GPU" if gpu is not None else "no GPU used"))
    return 0


def write_config(folder: Path) -> Path:
    """An empty run.toml: every setting comes from --set."""
    path = folder / "run.toml"
    path.write_text("", encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
