"""The memory arithmetic of a trl-grpo step, by part, for a model shape, a launcher and a batch shape.

One definition per figure: ``bench/scale_rehearsal.py`` checks these formulas against what a shape-true model
(the real widths, one and two layers) holds on CPU, then applies them at full depth on the recipe's launcher.
Bytes per process. Names: P parameters, L layers, h hidden, Q = heads x head_dim, K = KV heads x head_dim,
I the MLP width (the active experts' for a mixture of experts), V the vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

GB = 1e9
#: DeepSpeed's stage3_max_live_parameters default: parameters ZeRO-3 keeps gathered at once while training
ZERO3_LIVE_PARAMETERS = 1e9
#: DeepSpeed's reduce bucket and prefetch buffers, plus the CUDA context: a fixed allowance per GPU
GPU_OVERHEAD = 3.0 * GB


@dataclass(frozen=True)
class Shape:
    """A causal LM's widths, as its published config.json gives them."""

    name: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's width, or one expert's
    tied: bool  # input embeddings shared with the LM head
    qkv_bias: bool = False  # Qwen2.5
    qk_norm: bool = True  # Qwen3
    experts: int = 0  # 0: dense
    active_experts: int = 0

    def depth(self, layers: int) -> "Shape":
        return replace(self, layers=layers)

    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def k(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_parameters(self) -> int:
        h, q, k = self.hidden, self.q, self.k
        attention = h * q + 2 * h * k + q * h + (q + 2 * k) * self.qkv_bias + 2 * self.head_dim * self.qk_norm
        if self.experts:
            mlp = self.experts * 3 * h * self.intermediate + h * self.experts  # experts and router
        else:
            mlp = 3 * h * self.intermediate
        return attention + mlp + 2 * h

    def parameters(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.hidden + self.layers * self.layer_parameters()

    @property
    def active_intermediate(self) -> int:
        """The MLP width a token goes through (the active experts' together)."""
        return self.intermediate * (self.active_experts or 1)


#: the shapes of the recipes' policies (the published config.json of each)
SHAPES = {shape.name: shape for shape in (
    Shape("Qwen3-4B", vocab=151936, hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, intermediate=9728,
          tied=True),
    Shape("Qwen3-8B", vocab=151936, hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, intermediate=12288,
          tied=False),
    Shape("Qwen2.5-7B", vocab=152064, hidden=3584, layers=28, heads=28, kv_heads=4, head_dim=128, intermediate=18944,
          tied=False, qkv_bias=True, qk_norm=False),
    Shape("Qwen3-30B-A3B", vocab=151936, hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128,
          intermediate=768, tied=False, experts=128, active_experts=8),
)}


def shape_of(model: str) -> Shape:
    """The shape of a recipe's ``trainer.model`` (a folder named after the published model)."""
    name = model.rstrip("/").split("/")[-1]
    for known, shape in SHAPES.items():
        if name == known or name.startswith(known + "-"):  # Qwen2.5-7B-Instruct
            return shape
    raise SystemExit(f"no known shape for model {model!r}; known: {', '.join(SHAPES)}")


@dataclass(frozen=True)
class Launch:
    """How a step runs: processes, ZeRO stage (0 or 3), compute dtype bytes, and where."""

    processes: int = 1
    zero_stage: int = 0
    compute_bytes: int = 2  # bf16
    gpu: bool = True
    weight_bytes: int = 4  # the trained weights (fp32 master weights under mixed precision)
    reference_bytes: int = 2  # the KL reference, only read

    @classmethod
    def from_launcher(cls, launcher: str) -> "Launch":
        """The processes and ZeRO stage an ``accelerate launch`` command line names."""
        processes = re.search(r"--num_processes[ =](\d+)", launcher)
        stage = re.search(r"--zero_stage[ =](\d+)", launcher)
        return cls(processes=int(processes.group(1)) if processes else 1,
                   zero_stage=int(stage.group(1)) if stage and "--use_deepspeed" in launcher else 0)


@dataclass(frozen=True)
class Batch:
    """One process's share of a step. gen_*: one generate call; train_*: one micro-batch."""

    gen_episodes: int  # episodes in one generate
    gen_prompt: int  # the widest context a generate starts from (tokens)
    gen_new: int  # tokens one generate adds (an answer)
    train_rows: int  # rows (episodes or segments) in one micro-batch
    train_width: int  # tokens of a row (prompt + completion, padded to the widest)
    train_completion: int = 0  # of which completion (the positions the LM head scores)
    beta: bool = True  # a KL reference is held
    checkpointing: bool = False
    scores_kept: bool = False  # generate keeps every step's scores (the path before SampledLogprobs)


def model_config(shape: Shape, layers: int, **extra):
    """transformers' config and model class of ``shape`` cut to ``layers`` layers (``extra``: further config
    fields): Qwen3-MoE, Qwen3 (query/key norms) or Qwen2."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, \
        Qwen3MoeForCausalLM

    common = dict(vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=layers,
                  num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                  tie_word_embeddings=shape.tied, **extra)
    if shape.experts:
        return Qwen3MoeConfig(**common, moe_intermediate_size=shape.intermediate, num_experts=shape.experts,
                              num_experts_per_tok=shape.active_experts, decoder_sparse_step=1,
                              mlp_only_layers=[]), Qwen3MoeForCausalLM
    if shape.qk_norm:
        return Qwen3Config(**common, intermediate_size=shape.intermediate), Qwen3ForCausalLM
    return Qwen2Config(**common, intermediate_size=shape.intermediate), Qwen2ForCausalLM


def activation_bytes_per_token(shape: Shape, compute: int) -> float:
    """What one decoder layer keeps for its backward, per token (transformers' Qwen eager code with sdpa):
    both RMSNorms keep an fp32 copy of their input and their 16-bit output (6h each); q and k go through their own
    RMSNorm (fp32 input + output) and rotary (rotate_half's copy, the rotated tensor); with a padding mask the KV
    heads are repeated to all heads before sdpa, which keeps q, the repeated k and v and its output; o_proj keeps
    its input; the MLP keeps gate, up, silu(gate) and their product."""
    c, f = compute, 4
    h, q, k, i = shape.hidden, shape.q, shape.k, shape.active_intermediate
    norms = 2 * (f + c) * h
    qk = ((f + c) * (q + k) if shape.qk_norm else 0) + c * (q + k)  # norms, rotate_half
    attention = c * (q + 2 * q + q + q)  # rotated q, repeated k and v, sdpa's output, o_proj's input
    mlp = 4 * c * i
    return norms + qk + attention + mlp


@dataclass
class Parts:
    """Peak bytes per process, by part."""

    weights: float
    reference: float
    optimizer: float  # gradients and Adam's moments (ZeRO-3: with the fp32 master weights, sharded)
    gathered: float  # ZeRO-3: weights gathered beyond this process's shard (generation: all; training: live)
    generation: float  # KV cache, the prefill's widest layer, per-step logits (and the scores, if kept)
    activations: float
    logits: float
    overhead: float

    def generation_peak(self) -> float:
        return self.weights + self.reference + self.optimizer + self.gathered_generation + self.generation + \
            self.overhead

    def training_peak(self) -> float:
        return self.weights + self.reference + self.optimizer + self.gathered_training + self.activations + \
            self.logits + self.overhead

    gathered_generation: float = 0.0
    gathered_training: float = 0.0

    def peak(self) -> float:
        return max(self.generation_peak(), self.training_peak())


def generation_bytes(shape: Shape, batch: Batch, compute: int) -> dict[str, float]:
    """One generate call's memory beyond the weights: its KV cache at the widest context (plus the copy a layer's
    cache makes as it grows), the prefill's widest transient (one layer's MLP and attention on the whole prompt),
    the per-step logits (fp32: the last position's logits, the warped scores, the probabilities) and, on the old
    path, every step's scores."""
    b, width = batch.gen_episodes, batch.gen_prompt + batch.gen_new
    kv_layer = 2 * shape.k * compute * b * width
    kv = shape.layers * kv_layer + kv_layer
    prefill = b * batch.gen_prompt * compute * (3 * shape.active_intermediate + 2 * shape.q + 2 * shape.k
                                                + 2 * shape.hidden)
    step_logits = 4 * b * shape.vocab * 4
    scores = b * batch.gen_new * shape.vocab * 4 if batch.scores_kept else 0.0
    return {"kv": kv, "prefill": prefill, "step_logits": step_logits, "scores": scores,
            "total": kv + max(prefill, step_logits + scores)}


def training_bytes(shape: Shape, batch: Batch, compute: int) -> dict[str, float]:
    """One micro-batch's forward and backward beyond the weights: every layer's saved activations (with
    checkpointing: each layer's input, plus one layer recomputed), the embeddings' and final norm's, the padding
    mask, and TRL's fused LM head (``add_fused_lm_head``: log-probabilities of the completion positions in tiles of
    4,096 tokens x 32,768 vocabulary entries, so the logits are never whole: one tile in the compute dtype plus
    fp32 working copies, an upper bound)."""
    tokens = batch.train_rows * batch.train_width
    per_layer = activation_bytes_per_token(shape, compute) * tokens
    if batch.checkpointing:
        layers = shape.layers * compute * shape.hidden * tokens + per_layer
    else:
        layers = shape.layers * per_layer
    outside = tokens * (compute * shape.hidden + (4 + compute) * shape.hidden)  # embeddings, final RMSNorm
    mask = batch.train_rows * batch.train_width ** 2  # sdpa's boolean padding mask
    scored = batch.train_rows * (batch.train_completion or batch.train_width)
    logits = min(scored, 4096) * min(shape.vocab, 32768) * (compute + 8)
    return {"per_layer": per_layer, "layers": layers, "outside": outside + mask, "logits": logits}


def predict(shape: Shape, launch: Launch, batch: Batch) -> Parts:
    """Peak bytes per process, by part, for ``shape`` (at its depth) under ``launch`` with ``batch``."""
    p, n = shape.parameters(), launch.processes
    c = launch.compute_bytes
    if launch.zero_stage == 3:
        # 16-bit weights and gradients, fp32 master weights and Adam's two moments, all sharded over n
        weights = c * p / n
        optimizer = (c + 4 + 8) * p / n
        reference = c * p / n if batch.beta else 0.0
        gathered_generation = c * p * (1 - 1 / n)  # TRL gathers the whole model to generate
        gathered_training = c * min(p * (1 - 1 / n), ZERO3_LIVE_PARAMETERS)
    else:
        w = launch.weight_bytes
        weights = w * p
        optimizer = 3 * w * p  # gradients and two moments in the weights' dtype
        reference = launch.reference_bytes * p if batch.beta else 0.0
        gathered_generation = gathered_training = 0.0
    generation = generation_bytes(shape, batch, c)
    training = training_bytes(shape, batch, c)
    return Parts(weights=weights, reference=reference, optimizer=optimizer, gathered=gathered_generation,
                 generation=generation["total"], activations=training["layers"] + training["outside"],
                 logits=training["logits"], overhead=GPU_OVERHEAD if launch.gpu else 0.0,
                 gathered_generation=gathered_generation, gathered_training=gathered_training)
