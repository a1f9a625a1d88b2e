"""Whether a recipe fits the GPUs its launcher names, from a shape-true rehearsal on CPU.

The recipe's policy is built shape-true (its published widths, heads, KV heads, MLP width and vocabulary; one and
two layers; random weights, no download), in bf16 as the GPUs compute. With Qwen3's real vocabulary and chat
template it plays real BFCL multi_turn_base episodes and runs one trl-grpo step through the project's own trainer,
while a sampler reads the process's resident memory; the memory by part (weights, reference, generation,
activations, gradients, Adam's moments) is set against the arithmetic of ``scale_memory.py``, which then predicts
the peak per GPU at full depth for the recipe's launcher (processes, ZeRO stage, bf16) and for one GPU of
80 / 141 GB. It also times generation with and without the fixes (log-probabilities read as tokens are drawn
instead of every step's scores; a bound on the episodes per generate), as tokens per second and their ratio.

The step is the recipe's at a reduced batch (``--episodes``, answers capped at ``--answer-tokens``): what depends
on the batch is linear in episodes x tokens, so the arithmetic carries it to the recipe's batch.

    python bench/scale_rehearsal.py --recipe recipes/bfcl_paper.toml
    python bench/scale_rehearsal.py --recipe recipes/bfcl_paper.toml --smoke    # a narrow model, seconds
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# large blocks straight from the kernel and back on free, so the resident set follows the tensors alive
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_memory import GB, Batch, Launch, Shape, generation_bytes, model_config, predict, shape_of  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: a narrow model with the real vocabulary, for --smoke
NARROW = Shape("narrow", vocab=151936, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128,
               tied=True)
#: the GPU each recipe's launcher is meant for (GB), as its header says
GPU_GB = {"bfcl_paper.toml": 80, "bfcl_paper_qwen2_5_7b.toml": 80, "bfcl_paper_qwen3_30b_a3b.toml": 141}
#: the widest BFCL multi-turn opening in Qwen3's vocabulary (system, tools, first message), over the four
#: categories' 800 tasks (2,049 to 5,252)
WIDEST_OPENING = 5252
HEADROOM = 0.15
#: training rows per episode with Qwen3's thinking on: a segment per user turn (chat_tokens), and BFCL's
#: multi_turn_base tasks have 3.67 user turns on average, rounded up; each row may reach the widest
#: opening plus max_completion_length (the bound holds per segment)
SEGMENTS_PER_EPISODE = 4


class ResidentPeak(threading.Thread):
    """The process's resident memory, sampled every 3 ms; ``mark()`` starts a new peak."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = self.now()
        self.running = True

    def now(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self.page

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.now())
            time.sleep(0.003)

    def mark(self) -> int:
        gc.collect()
        self.peak = now = self.now()
        return now


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(REPO / "recipes" / "bfcl_paper.toml"), help="a run config")
    parser.add_argument("--layers", default="1,2", help="depths to build, comma-separated")
    parser.add_argument("--episodes", type=int, default=2, help="episodes of the rehearsed step (one group)")
    parser.add_argument("--answer-tokens", type=int, default=16, help="tokens per answer in the rehearsed step")
    parser.add_argument("--throughput-episodes", type=int, default=4,
                        help="episodes of the generation timings (old path, new path, bounded)")
    parser.add_argument("--throughput-tokens", type=int, default=48, help="tokens per episode in those timings")
    parser.add_argument("--smoke", action="store_true", help="a narrow model (real vocabulary), in seconds")
    parser.add_argument("--json", default="", help="also write the measurements to this file")
    parser.add_argument("--measured", default="", help="report from the measurements a --json run wrote")
    parser.add_argument("--predict-only", action="store_true", help="only the arithmetic's prediction per GPU")
    return parser


def build_model(shape: Shape, layers: int, tokenizer, path: Path) -> Path:
    """Save a random ``shape`` model of ``layers`` layers in bf16 (with the tokenizer) under ``path``."""
    import torch
    config, cls = model_config(shape, layers, max_position_embeddings=40960, rope_theta=1e6,
                               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                               bos_token_id=None, dtype="bfloat16")
    with torch.device("meta"):
        model = cls(config)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    model.tie_weights()  # to_empty leaves a tied head a parameter of its own
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.fill_(1.0)
            elif name.endswith("bias"):
                parameter.zero_()
            else:
                parameter.normal_(0.0, 0.02, generator=generator)
    count = sum(p.numel() for p in model.parameters())
    if count != shape.depth(layers).parameters():
        raise RuntimeError(f"{shape.name} at {layers} layers: {count:,} parameters, the arithmetic says "
                           f"{shape.depth(layers).parameters():,}")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    del model
    gc.collect()
    return path


def bfcl_tasks(tokenizer, count: int, chat_template_kwargs: dict, limit: int | None = None):
    """The ``count`` multi_turn_base tasks with the shortest openings (the CPU's time goes to the prompt), and
    the openings' lengths over all 200 (the first ``limit``)."""
    from coevolve_engine.adapters.agents.chat_tokens import ChatTokens
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment
    from coevolve_engine.trainers.trl_grpo.episodes import task_prompt

    environment = BFCLEnvironment()
    tasks = list(environment.load_tasks(category="multi_turn_base", limit=limit))
    chat = ChatTokens(tokenizer, chat_template_kwargs)
    lengths = {}
    for task in tasks:
        episode = environment.start(task["task_id"], task["spec"])
        try:
            lengths[task["task_id"]] = len(chat.start(task_prompt(environment, task), episode.tools()).ids)
        finally:
            episode.close()
    shortest = sorted(tasks, key=lambda t: (lengths[t["task_id"]], t["task_id"]))[:count]
    return environment, shortest, lengths


def rehearse_step(model_path: Path, environment, tasks, recipe, args, tmp: Path) -> dict:
    """One trl-grpo step of the recipe's settings at the reduced batch, memory read by part."""
    import torch
    from transformers import TrainerCallback

    import coevolve_engine.trainers.trl_grpo.trainer as trl_trainer
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers import BatchSource
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig, TRLGRPOTrainer

    options = dict(recipe.trainer.options)
    # the rehearsal holds its weights in bf16, as the GPUs compute (their fp32 master weights are arithmetic)
    trl_trainer.training_dtype = lambda: torch.bfloat16
    db = tmp / f"store-{model_path.name}.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks)
    config = TRLGRPOConfig(
        model=str(model_path), output_dir=str(tmp / f"out-{model_path.name}"), group_size=args.episodes,
        groups_per_step=1, learning_rate=1e-6, beta=options.get("beta", 1e-3), temperature=options.get("temperature",
                                                                                                      0.9),
        max_completion_length=args.answer_tokens, max_new_tokens=args.answer_tokens, max_model_calls_per_turn=1,
        chat_template_kwargs=recipe.episode.chat_template_kwargs, use_cpu=True, save_checkpoint=False,
        policy_name="rehearsal", trl_args={"max_grad_norm": 1.0})
    peak = ResidentPeak()
    peak.start()
    parts: dict[str, float] = {}
    loads: list[tuple[int, int]] = []
    from transformers import AutoModelForCausalLM

    real_load = AutoModelForCausalLM.from_pretrained.__func__

    def load(cls, *a, **k):
        before = peak.mark()
        model = real_load(cls, *a, **k)
        loads.append((before, peak.mark()))
        return model

    AutoModelForCausalLM.from_pretrained = classmethod(load)
    start = peak.mark()
    try:
        trainer = TRLGRPOTrainer.from_store(db, config, environment, BatchSource({t["task_id"]: 1.0 for t in tasks}))
    finally:
        AutoModelForCausalLM.from_pretrained = classmethod(real_load)
    built = peak.mark()
    parts["weights"] = loads[0][1] - loads[0][0]
    parts["reference"] = built - start - parts["weights"]
    grpo, model = trainer._grpo, trainer.model
    play = trainer._rollout_func
    shapes: dict[str, int] = {}

    def rollout(prompts, trl_trainer_):
        before = peak.mark()
        began = time.perf_counter()
        output = play(prompts, trl_trainer_)
        parts["generation"] = peak.peak - before
        parts["generation_s"] = time.perf_counter() - began
        shapes["prompt"] = max(len(p) for p in output["prompt_ids"])
        shapes["completion"] = max(len(c) for c in output["completion_ids"])
        shapes["generated"] = sum(sum(m) for m in output["env_mask"])
        parts["after_rollout"] = peak.mark()
        return output

    grpo.rollout_func = rollout

    def forward_end(module, inputs, output):
        if torch.is_grad_enabled() and "activations" not in parts:
            parts["activations"] = peak.now() - parts["after_rollout"]

    hook = model.register_forward_hook(forward_end)

    class Phases(TrainerCallback):
        def on_pre_optimizer_step(self, args_, state, control, **kwargs):
            parts["backward_peak"] = peak.peak - parts["after_rollout"]
            parts["gradients"] = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters()
                                     if p.grad is not None)
            parts["before_step"] = peak.mark()

        def on_step_end(self, args_, state, control, **kwargs):
            parts["moments"] = peak.now() - parts["before_step"] - 0  # gradients are freed after the step
            parts["step_peak"] = peak.peak - parts["before_step"]

    grpo.add_callback(Phases())
    began = time.perf_counter()
    trainer.train(1)
    parts["step_s"] = time.perf_counter() - began
    hook.remove()
    parts["total_peak"] = max(peak.peak, parts.get("total_peak", 0)) - start
    peak.running = False
    parts.update(shapes)
    parts["parameters"] = sum(p.numel() for p in model.parameters())
    parts["moments"] += parts["gradients"]  # the step frees the gradients it read: the moments are what grew
    del trainer, grpo, model
    gc.collect()
    return parts


def time_generation(model_path: Path, environment, tasks, args, recipe) -> dict:
    """Generation on the shape-true model, old path against new: tokens per second and the peak beyond the
    weights of (a) ``output_scores`` with a log-softmax per token (before), (b) log-probabilities read as tokens are
    drawn, (c) the same with one episode per generate."""
    import torch
    from transformers import AutoModelForCausalLM

    from coevolve_engine.adapters.agents.chat_tokens import ChatTokens
    from coevolve_engine.adapters.agents.local_agent import TokenPolicy
    from coevolve_engine.trainers.trl_grpo.episodes import task_prompt

    tokenizer_path = model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).eval()
    chat = ChatTokens(tokenizer, recipe.episode.chat_template_kwargs)
    prompts = []
    for task in (tasks * args.throughput_episodes)[:args.throughput_episodes]:
        episode = environment.start(task["task_id"], task["spec"])
        prompts.append(chat.start(task_prompt(environment, task), episode.tools()).ids)
        episode.close()
    width = max(map(len, prompts))
    pad = tokenizer.pad_token_id
    new = args.throughput_tokens
    temperature = recipe.trainer.options.get("temperature", 0.9)
    peak = ResidentPeak()
    peak.start()
    results = {}

    def measured(name, run):
        before = peak.mark()
        began = time.perf_counter()
        with torch.no_grad():
            tokens = run()
        results[name] = {"peak": peak.peak - before, "seconds": time.perf_counter() - began, "tokens": tokens}

    def old_path():
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = (ids != pad).long()
        torch.manual_seed(0)
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                             do_sample=True, temperature=temperature, top_p=1.0, top_k=0, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)
        generated = out.sequences[:, width:].tolist()
        logprobs = [[float(torch.log_softmax(out.scores[t][row].float(), -1)[token]) for t, token in enumerate(seq)]
                    for row, seq in enumerate(generated)]
        results["old_logprobs"] = logprobs
        return sum(map(len, generated))

    def new_path(size):
        def run():
            from types import SimpleNamespace

            policy = TokenPolicy(model, tokenizer, temperature=temperature, max_new_tokens=new, logprobs=True,
                                 generation_batch_size=size,
                                 generate_kwargs={"min_new_tokens": new})
            plays = [SimpleNamespace(messages=None, tools=None, stop=lambda *_: None,
                                     state={"tokens": _Tokens(p)}) for p in prompts]
            policy._tokens = lambda play: play.state["tokens"]
            torch.manual_seed(0)
            policy.respond(plays)
            if size == 0:
                results["new_logprobs"] = [play.state["tokens"].logprobs for play in plays]
            return sum(len(play.state["tokens"].added) for play in plays)
        return run

    measured("scores kept (before)", old_path)
    measured("read as drawn", new_path(0))
    measured("read as drawn, 1 per generate", new_path(1))
    old, fresh = results.pop("old_logprobs"), results.pop("new_logprobs")
    diff = max(abs(a - b) for row_a, row_b in zip(old, fresh) for a, b in zip(row_a, row_b))
    peak.running = False
    del model
    gc.collect()
    return {"runs": results, "max_logprob_difference": diff, "episodes": len(prompts), "prompt": width,
            "new": new}


class _Tokens:
    """The part of ``EpisodeTokens`` that ``TokenPolicy.respond`` uses (the timing plays fixed prompts)."""

    def __init__(self, ids):
        self.ids, self.completion_ids, self.added, self.logprobs = list(ids), [], [], []

    def add(self, ids, *, sampled, logprobs=None):
        self.added += ids
        self.logprobs += logprobs or []


def recipe_batch(recipe, shape: Shape, fixed: bool) -> Batch:
    """One process's batch of the recipe at full size: with its bounds (``fixed``) or as before them. A micro-batch
    of one episode holds all its segments' rows (``SEGMENTS_PER_EPISODE`` with Qwen3's thinking on)."""
    options = recipe.trainer.options
    thinking = shape.qk_norm and recipe.episode.chat_template_kwargs.get("enable_thinking", True)
    segments = SEGMENTS_PER_EPISODE if thinking else 1
    episodes = options.get("group_size", 8) * options.get("groups_per_step", 4)
    completion = options.get("max_completion_length", 4096)
    new = recipe.episode.max_new_tokens
    return Batch(gen_episodes=(options.get("generation_batch_size") or episodes) if fixed else episodes,
                 gen_prompt=WIDEST_OPENING + completion - new, gen_new=new,
                 train_rows=((options.get("micro_batch_size") or episodes) if fixed else episodes) * segments,
                 train_width=WIDEST_OPENING + completion, train_completion=completion, beta=options.get("beta", 1e-3) > 0,
                 checkpointing=bool(options.get("activation_checkpointing")), scores_kept=not fixed)


def print_prediction(recipe, recipe_path: Path, full: Shape) -> None:
    """The predicted peak per GPU of the recipe at full depth: on its launcher and on one GPU of 80 / 141 GB, with
    the recipe's bounds ("fixed") and as before them."""
    fixed, before = recipe_batch(recipe, full, True), recipe_batch(recipe, full, False)
    scores_full = generation_bytes(full, replace(before, gen_episodes=32, gen_new=1024, scores_kept=True), 2)
    print(f"  scores at 32 episodes x 1,024 tokens ({full.name}): {gb(scores_full['scores'])} GB")
    launch = Launch.from_launcher(recipe.trainer.launcher)
    gpu_gb = GPU_GB.get(recipe_path.name, 80)
    print(f"\npredicted peak per GPU, {full.name} at full depth ({full.layers} layers, {full.parameters() / 1e9:.2f}B "
          "parameters), bf16:")
    print(f"{'launch':<34} {'batch':<8} {'states':>7} {'ref':>5} {'gather':>7} {'gen':>6} {'act':>6} "
          f"{'peak':>6} {'GPU':>5} {'fits (15%)':>10}")
    verdicts = {}
    for label, where, gpu in ((f"launcher: {launch.processes} x ZeRO-{launch.zero_stage}", launch, gpu_gb),
                              ("1 GPU", replace(launch, processes=1), 80), ("1 GPU", replace(launch, processes=1), 141)):
        for name, batch in (("fixed", fixed), ("before", before)):
            parts = predict(full, where, batch)
            peak = parts.peak()
            fits = peak <= gpu * GB * (1 - HEADROOM)
            verdicts[(label, gpu, name)] = (peak, fits)
            print(f"{label:<34} {name:<8} {gb(parts.weights + parts.optimizer):>7} {gb(parts.reference):>5} "
                  f"{gb(max(parts.gathered_generation, parts.gathered_training)):>7} {gb(parts.generation):>6} "
                  f"{gb(parts.activations + parts.logits):>6} {gb(peak):>6} {gpu:>5} "
                  f"{'yes' if fits else 'no':>10}")
    peak, fits = verdicts[(f"launcher: {launch.processes} x ZeRO-{launch.zero_stage}", gpu_gb, "fixed")]
    print(f"\n{recipe_path.name}: {peak / GB:.1f} GB per GPU on {launch.processes} GPUs of {gpu_gb} GB "
          f"({1 - peak / (gpu_gb * GB):.0%} headroom): {'fits' if fits else 'does NOT fit'}")


def gb(value: float) -> str:
    return f"{value / GB:,.1f}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if any(os.environ.get(key) != value for key, value in MALLOC.items()):
        os.execve(sys.executable, [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])],
                  {**os.environ, **MALLOC})
    from coevolve_engine.loop.config_files import load_config

    recipe_path = Path(args.recipe)
    recipe = load_config(recipe_path, check=False)
    full = shape_of(recipe.trainer.model)
    shape = NARROW if args.smoke else full
    if args.smoke:
        args.episodes, args.answer_tokens = 2, 4
        args.throughput_episodes, args.throughput_tokens = 2, 8
    layers = [int(n) for n in args.layers.split(",")]
    began = time.perf_counter()
    sys.path.insert(0, str(REPO / "tests"))  # Qwen3's tokenizer built offline: one construction, the tests'
    from qwen3_vocab import qwen3_tokenizer

    tokenizer = qwen3_tokenizer()
    environment, tasks, lengths = bfcl_tasks(tokenizer, args.episodes, recipe.episode.chat_template_kwargs,
                                             limit=20 if args.smoke else None)
    print(f"recipe {recipe_path.name}: {recipe.trainer.model} -> shape {shape.name} (hidden {shape.hidden}, heads "
          f"{shape.heads}/{shape.kv_heads}, MLP {shape.intermediate}, vocabulary {shape.vocab:,}); launcher: "
          f"{recipe.trainer.launcher or '(one process)'}")
    print(f"BFCL multi_turn_base openings in Qwen3's vocabulary: {min(lengths.values()):,} to "
          f"{max(lengths.values()):,} tokens over {len(lengths)} tasks; rehearsed on the {args.episodes} shortest "
          f"({', '.join(str(lengths[t['task_id']]) for t in tasks)} tokens)")
    if args.predict_only:
        print_prediction(recipe, recipe_path, full)
        return 0
    if args.measured:
        saved = json.loads(Path(args.measured).read_text())
        measured = {int(depth): parts for depth, parts in saved["measured"].items()}
        timing, args.episodes, args.answer_tokens = saved["timing"], saved["episodes"], saved["answer_tokens"]
        report(args, recipe, recipe_path, shape, full, measured, timing, began)
        return 0
    measured: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as scratch:
        tmp = Path(scratch)
        timing = None
        for depth in layers:
            path = build_model(shape, depth, tokenizer, tmp / f"{shape.name}-{depth}")
            if depth == layers[0]:
                timing = time_generation(path, environment, tasks, args, recipe)
            measured[depth] = rehearse_step(path, environment, tasks, recipe, args, tmp)
            for child in path.iterdir():
                child.unlink()
    if args.json:
        Path(args.json).write_text(json.dumps({"measured": measured, "timing": timing, "episodes": args.episodes,
                                               "answer_tokens": args.answer_tokens}, indent=1))
    report(args, recipe, recipe_path, shape, full, measured, timing, began)
    return 0


def report(args, recipe, recipe_path, shape, full, measured, timing, began) -> None:
    """Print the measurements against the arithmetic, the generation timings, and the prediction per GPU."""
    layers = sorted(measured)
    print(f"\nmeasured (resident memory, GB) for one trl-grpo step of {args.episodes} episodes, answers of "
          f"{args.answer_tokens} tokens, against the arithmetic of scale_memory.py:")
    print(f"{'layers':>6} {'part':<26} {'measured':>9} {'arithmetic':>10} {'ratio':>6}")
    cpu = Launch(processes=1, zero_stage=0, compute_bytes=2, gpu=False, weight_bytes=2, reference_bytes=2)
    worst = 0.0
    per_part: dict[int, dict[str, float]] = {}
    for depth, m in measured.items():
        at = shape.depth(depth)
        batch = Batch(gen_episodes=args.episodes, gen_prompt=m["prompt"], gen_new=args.answer_tokens,
                      train_rows=args.episodes, train_width=m["prompt"] + m["completion"],
                      train_completion=m["completion"],
                      beta=recipe.trainer.options.get("beta", 1e-3) > 0)
        parts = predict(at, cpu, batch)
        p = at.parameters()
        gradients = 2 * p
        rows = {"weights": (m["weights"], parts.weights), "reference": (m["reference"], parts.reference),
                "generation (KV, prefill)": (m["generation"], parts.generation),
                "activations (forward end)": (m["activations"], parts.activations),
                "gradients": (m["gradients"], gradients), "Adam moments": (m["moments"], 4 * p)}
        predicted_peak = parts.weights + parts.reference + max(parts.generation, gradients + parts.activations
                                                               + parts.logits, gradients + 4 * p)
        rows["whole step's peak"] = (m["total_peak"], predicted_peak)
        per_part[depth] = {name: value for name, (value, _) in rows.items()}
        for name, (value, expected) in rows.items():
            ratio = value / expected if expected else float("nan")
            print(f"{depth:>6} {name:<26} {gb(value):>9} {gb(expected):>10} {ratio:>6.2f}")
        worst = max(worst, abs(m["total_peak"] / predicted_peak - 1))
    if len(layers) == 2:
        one, two = (per_part[d] for d in layers)
        per_layer = (two["activations (forward end)"] - one["activations (forward end)"]) / (layers[1] - layers[0])
        tokens = args.episodes * (measured[layers[1]]["prompt"] + measured[layers[1]]["completion"])
        from scale_memory import activation_bytes_per_token

        print(f"per layer: activations {per_layer / tokens:,.0f} bytes per token measured, "
              f"{activation_bytes_per_token(shape, 2):,.0f} by the arithmetic")
    verdict = 'agrees' if worst <= 0.15 else 'DISAGREES'
    if args.smoke:  # the process's own memory dwarfs a narrow model's: the comparison only holds at real width
        verdict = "not judged on the narrow --smoke model (the interpreter's own memory dwarfs it)"
    print(f"the arithmetic predicts the measured peak within {worst:.0%} (tolerance 15%): {verdict}")
    runs = timing["runs"]
    print(f"\ngeneration on the {'narrow' if args.smoke else 'shape-true'} model ({len(layers) and layers[0]} layer), "
          f"{timing['episodes']} episodes, "
          f"prompt {timing['prompt']:,} tokens, {timing['new']} new tokens each:")
    base = runs["scores kept (before)"]
    for name, run in runs.items():
        rate = run["tokens"] / run["seconds"]
        print(f"  {name:<32} peak {gb(run['peak']):>6} GB  {rate:8.1f} tokens/s  "
              f"({rate / (base['tokens'] / base['seconds']):.2f}x)")
    scores = generation_bytes(shape, Batch(gen_episodes=timing["episodes"], gen_prompt=timing["prompt"],
                                           gen_new=timing["new"], train_rows=1, train_width=1, scores_kept=True), 2)
    print(f"  the scores' size by the arithmetic: {gb(scores['scores'])} GB; measured drop "
          f"{gb(base['peak'] - runs['read as drawn']['peak'])} GB; log-probabilities differ by at most "
          f"{timing['max_logprob_difference']:.1e}")
    print_prediction(recipe, recipe_path, full)
    print(f"rehearsal took {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())
