"""The memory arithmetic of ``scale_memory.py`` against one real GPU, at full depth.

``scale_rehearsal.py`` checks the arithmetic on CPU against a shape-true model of one and two layers; this script
checks the same parts on a CUDA GPU with the recipe's model at its full depth (random weights, no download), on
the GPU's own kernels (sdpa, the caching allocator). It needs torch and transformers only, so it runs on a bare GPU
machine. What it builds is one process of the recipe's launcher as DeepSpeed's bf16 mode holds it on one GPU:
bf16 weights, an fp32 master copy and Adam's two fp32 moments, bf16 gradients, a bf16 KL reference. Then, one at a
time, beyond those states:

- generation: one ``generate`` of the recipe's ``generation_batch_size`` episodes, left-padded to the widest
  opening, adding ``max_new_tokens`` each (no early stop), sampled at the recipe's temperature;
- training: one micro-batch of the recipe's rows (right-padded, every row at the full width), forward and backward
  through the decoder with activation checkpointing as the recipe sets it; the LM head's tiled log-probabilities
  stay arithmetic (``training_bytes``'s ``logits``).

Each part's measured bytes (``torch.cuda.max_memory_allocated`` above what was allocated before it) are printed
beside the arithmetic's, with what the caching allocator reserved and the step times.

    python bench/gpu_memory.py --recipe recipes/bfcl_paper.toml          # on a GPU of >= 120 GB for Qwen3-4B
    python bench/gpu_memory.py --smoke    # CPU: a narrow model, the code paths only (every figure 0)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_memory import GB, Launch, Shape, generation_bytes, model_config, predict, shape_of, \
    training_bytes  # noqa: E402
from scale_rehearsal import NARROW, WIDEST_OPENING, recipe_batch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def read_recipe(path: Path) -> SimpleNamespace:
    """The fields of a recipe that its batch depends on, read with tomllib (the project need not be installed)."""
    data = tomllib.loads(path.read_text())
    trainer, episode = data.get("trainer", {}), data.get("episode", {})
    return SimpleNamespace(
        trainer=SimpleNamespace(model=trainer["model"], options=trainer.get("options", {}),
                                launcher=trainer.get("launcher", "")),
        episode=SimpleNamespace(max_new_tokens=episode["max_new_tokens"],
                                chat_template_kwargs=episode.get("chat_template_kwargs", {})))


def build(shape: Shape, device: str):
    """A random bf16 model of ``shape`` on ``device``, its parameter count checked against the arithmetic's."""
    import torch

    config, cls = model_config(shape, shape.layers, max_position_embeddings=40960, rope_theta=1e6,
                               pad_token_id=0, bos_token_id=None, eos_token_id=None)
    with torch.device("meta"):
        model = cls(config)
    model = model.to_empty(device=device).to(torch.bfloat16)
    model.tie_weights()
    generator = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, 0.02, generator=generator)
    count = sum(p.numel() for p in model.parameters())
    if count != shape.parameters():
        raise SystemExit(f"{shape.name}: {count:,} parameters built, the arithmetic says {shape.parameters():,}")
    return model


class Memory:
    """Bytes allocated on the GPU (0 on CPU): now, and the peak since ``mark``."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch, self.cuda = torch, device.startswith("cuda")

    def now(self) -> int:
        if not self.cuda:
            return 0
        self.torch.cuda.synchronize()
        return self.torch.cuda.memory_allocated()

    def mark(self) -> int:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        return self.now()

    def peak(self) -> int:
        if not self.cuda:
            return 0
        self.torch.cuda.synchronize()
        return self.torch.cuda.max_memory_allocated()

    def reserved_peak(self) -> int:
        return self.torch.cuda.max_memory_reserved() if self.cuda else 0


def measure(shape: Shape, batch, recipe, device: str) -> dict:
    import torch

    memory = Memory(device)
    p = shape.parameters()
    found: dict[str, float] = {"parameters": p}
    began = time.perf_counter()
    start = memory.mark()
    model = build(shape, device)
    found["weights"] = memory.now() - start
    found["build_s"] = time.perf_counter() - began
    before = memory.now()
    reference = build(shape, device).eval().requires_grad_(False)
    found["reference"] = memory.now() - before
    before = memory.now()
    # DeepSpeed's bf16 mode: an fp32 master copy and Adam's two fp32 moments per parameter (flat buffers)
    master = torch.empty(p, dtype=torch.float32, device=device)
    moments = [torch.zeros(p, dtype=torch.float32, device=device) for _ in range(2)]
    found["master_and_moments"] = memory.now() - before

    # generation: left-padded openings, the widest at the batch's prompt width
    generator = torch.Generator(device="cpu").manual_seed(0)
    rows, width, new = batch.gen_episodes, batch.gen_prompt, batch.gen_new
    lengths = [width - (width // 4) * (i % 2) for i in range(rows)]  # half the rows a quarter shorter: a padding mask
    ids = torch.zeros(rows, width, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, width - n:] = torch.randint(1, shape.vocab, (n,), generator=generator)
        mask[i, width - n:] = 1
    ids, mask = ids.to(device), mask.to(device)
    model.eval()
    temperature = recipe.trainer.options.get("temperature", 0.9)
    before = memory.mark()
    began = time.perf_counter()
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                             do_sample=True, temperature=temperature, top_p=1.0, top_k=0, pad_token_id=0,
                             eos_token_id=None, use_cache=True)
    found["generation_s"] = time.perf_counter() - began
    found["generation"] = memory.peak() - before
    found["generated_tokens"] = int((out.shape[1] - width) * rows)
    del out, ids, mask
    if device.startswith("cuda"):
        torch.cuda.empty_cache()

    # training: one micro-batch at the full width, right-padded rows, the completion scored
    model.train()
    model.config.use_cache = False
    if batch.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    rows, width, completion = batch.train_rows, batch.train_width, batch.train_completion or batch.train_width
    lengths = [width - (width // 8) * (i % 2) for i in range(rows)]
    ids = torch.zeros(rows, width, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1, shape.vocab, (n,), generator=generator)
        mask[i, :n] = 1
    ids, mask = ids.to(device), mask.to(device)
    weights = torch.randn(rows, completion, 1, generator=generator).to(device=device, dtype=torch.bfloat16)
    before = memory.mark()
    began = time.perf_counter()
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    found["forward_end"] = memory.now() - before
    loss = (hidden[:, -completion:].float() * weights.float()).mean()
    loss.backward()
    found["training_s"] = time.perf_counter() - began
    found["training"] = memory.peak() - before
    found["gradients"] = sum(q.grad.numel() * q.grad.element_size() for q in model.parameters() if q.grad is not None)
    found["training_tokens"] = rows * width
    found["peak_allocated"] = memory.peak()
    found["reserved_peak"] = memory.reserved_peak()
    if device.startswith("cuda"):
        found["device"] = torch.cuda.get_device_name()
        found["device_total"] = torch.cuda.get_device_properties(0).total_memory
    found["attention"] = model.config._attn_implementation
    found["torch"] = torch.__version__
    import transformers

    found["transformers"] = transformers.__version__
    del master, moments, reference
    return found


def gb(value: float) -> str:
    return f"{value / GB:.2f}"


def report(shape: Shape, batch, found: dict) -> None:
    p = shape.parameters()
    one = Launch(processes=1, zero_stage=3)  # DeepSpeed's bf16 states at n = 1: what was built
    parts = predict(shape, one, batch)
    generation = generation_bytes(shape, batch, 2)
    training = training_bytes(shape, batch, 2)
    rows = [
        ("weights (bf16)", found["weights"], parts.weights),
        ("KL reference (bf16)", found["reference"], parts.reference),
        ("fp32 master + Adam moments", found["master_and_moments"], 12 * p),
        ("gradients (bf16)", found["gradients"], 2 * p),
        ("generation (KV cache, prefill, logits)", found["generation"], generation["total"]),
        ("training micro-batch, decoder (fwd+bwd)", found["training"] - found["gradients"],
         training["layers"] + training["outside"]),
    ]
    print(f"{'part':<42}{'measured GB':>12}{'arithmetic GB':>15}{'measured/arith':>16}")
    for name, measured, predicted in rows:
        ratio = f"{measured / predicted:.3f}" if predicted else "-"
        print(f"{name:<42}{gb(measured):>12}{gb(predicted):>15}{ratio:>16}")
    states = found["weights"] + found["reference"] + found["master_and_moments"]
    measured_peak = states + max(found["generation"], found["training"])
    predicted_peak = parts.weights + parts.reference + parts.optimizer + max(
        parts.generation, parts.activations + parts.logits)
    print(f"peak allocated: measured {gb(found['peak_allocated'])} GB (states {gb(states)} + the larger phase) "
          f"against the arithmetic's {gb(predicted_peak)} GB before its LM-head tile "
          f"({gb(training['logits'])} GB) and fixed allowance ({gb(parts.overhead)} GB); the allocator reserved "
          f"{gb(found['reserved_peak'])} GB at most")
    print(f"of which the larger phase measured: {gb(measured_peak)} GB")
    print(f"generation: {found['generated_tokens']:,} tokens in {found['generation_s']:.1f} s "
          f"({found['generated_tokens'] / found['generation_s']:.0f} tokens/s, {batch.gen_episodes} episodes of "
          f"{batch.gen_prompt:,} + {batch.gen_new:,} tokens); training micro-batch: {found['training_tokens']:,} "
          f"tokens forward and backward in {found['training_s']:.1f} s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(REPO / "recipes" / "bfcl_paper.toml"), help="a run config")
    parser.add_argument("--layers", type=int, default=0, help="depth to build (0: the model's full depth)")
    parser.add_argument("--smoke", action="store_true",
                        help="on CPU: a narrow model with a small batch, to check the code paths (no memory is read)")
    parser.add_argument("--json", default="", help="also write the measurements to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    recipe = read_recipe(Path(args.recipe))
    shape = shape_of(recipe.trainer.model)
    batch = recipe_batch(recipe, shape, True)
    device = "cuda"
    if args.smoke:
        shape, device = NARROW, "cpu"
        batch = replace(batch, gen_episodes=2, gen_prompt=64, gen_new=8, train_rows=2, train_width=96,
                        train_completion=32)
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU, or pass --smoke to check the code paths on CPU")
    if args.layers:
        shape = shape.depth(args.layers)
    print(f"{Path(args.recipe).name}: {shape.name}, {shape.layers} layers, {shape.parameters() / 1e9:.2f}B "
          f"parameters; one process's batch: generation {batch.gen_episodes} x ({batch.gen_prompt:,} + "
          f"{batch.gen_new:,}) tokens (widest opening {WIDEST_OPENING:,}); training {batch.train_rows} rows x "
          f"{batch.train_width:,} tokens, checkpointing {batch.checkpointing}", flush=True)
    found = measure(shape, batch, recipe, device)
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1) + "\n")
    if args.smoke:
        print(f"smoke run: the code paths ran ({found['generated_tokens']} tokens generated, "
              f"{found['training_tokens']} trained); no memory is read on CPU, so every measured figure is 0")
        report(shape, batch, found)
        return 0
    print(f"{found.get('device', '')}: {gb(found.get('device_total', 0))} GB; torch {found['torch']}, "
          f"transformers {found['transformers']}, attention {found['attention']}")
    report(shape, batch, found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
