"""A tiny Qwen3 causal LM and tokenizer, built offline in seconds: for tests, demos and CPU smoke runs.

The tokenizer is a byte-level BPE trained with ``tokenizers`` on a few strings, wrapped in
``PreTrainedTokenizerFast`` with TRL's bundled Qwen3 chat template (which renders tools and
``<tool_call>`` blocks). The model is ``Qwen3ForCausalLM`` from a small ``Qwen3Config``, randomly
initialised with a fixed seed. Nothing is downloaded.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from coevolve_engine.core.environment import Environment

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<tools>",
    "</tools>",
]


def qwen3_chat_template() -> str:
    """TRL's Qwen3 chat template (tools, tool calls, tool responses)."""
    return resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()


def build_tokenizer(corpus: list[str], vocab_size: int = 512, *, digits: bool = False):
    """A byte-level BPE trained on ``corpus`` with the Qwen3 chat template.

    digits: split every digit into a token of its own and let merges cross spaces and punctuation (no
    pre-tokenizer regex). Numbers are then spelled digit by digit, so a policy that learned to copy 1-digit
    operands can copy longer ones, and the template's fixed text compresses to a few dozen tokens (a calc
    prompt: ~70 tokens instead of ~310). Default False: the plain byte-level pre-tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    if digits:
        bpe.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL + MARKUP,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", clean_up_tokenization_spaces=False
    )
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    tokenizer.add_tokens(MARKUP)  # whole tokens, but not "special": decoding keeps them
    tokenizer.chat_template = qwen3_chat_template()
    return tokenizer


def build_tiny_qwen3(
    path: str | Path, corpus: list[str], *, hidden_size: int = 64, layers: int = 2, seed: int = 0, vocab_size: int = 512,
    sliding_window: int | None = None, digits: bool = False, intermediate_size: int | None = None,
) -> Path:
    """Save a tokenizer and a random tiny Qwen3 model under ``path``; returns ``path``.

    sliding_window: attend only to this many previous tokens in every layer. A random model's attention spreads
    evenly over a long prompt (a BFCL prompt is ~2,400 tokens of tool schemas), and with full attention a tiny
    model needs minutes to learn where it is in its completion; with a window of ~64 it learns to imitate
    demonstrations in seconds, since the user's request ends right before the reply.
    digits: the tokenizer spells numbers digit by digit (see ``build_tokenizer``); for short numeric prompts
    such as calc's.
    intermediate_size: the MLP width (default: twice ``hidden_size``).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size, digits=digits)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    if sliding_window is not None:
        config.use_sliding_window, config.sliding_window = True, sliding_window
        config.layer_types = ["sliding_attention"] * layers
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def demonstration_corpus(rows: list[dict], vocab_size: int = 2048) -> list[str]:
    """Texts to train a tiny policy's tokenizer on, from SFT demonstrations (``trainers.sft.demonstrations``
    rows): the chat template, each row's tools and messages, and each row rendered whole by the template (with a
    first tokenizer trained on the rest, since rendering needs one)."""
    corpus = [qwen3_chat_template()] + [json.dumps(row["tools"]) + "\n".join(
        str(m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in row["messages"]) for row in rows]
    draft = build_tokenizer(corpus, vocab_size=vocab_size)
    corpus += [draft.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False) for row in rows]
    return corpus


def environment_corpus(environment: Environment, tasks: Iterable[dict[str, Any]]) -> list[str]:
    """Texts to train a tiny policy's tokenizer on, for any environment: the chat template, and for each task the
    tool schemas its episode shows, its prompt, and its reference solution's calls written as the policy writes
    them (``<tool_call>`` blocks). Nothing of a task is played."""
    corpus = [qwen3_chat_template()]
    for task in tasks:
        episode = environment.start(str(task["task_id"]), task["spec"])
        try:
            corpus.append(json.dumps(episode.tools()))
        finally:
            episode.close()
        if task.get("prompt"):
            corpus.append(str(task["prompt"]))
        try:
            solution = environment.reference_solution(task["spec"]) or []
        except NotImplementedError:  # an environment without reference solutions: tools and prompts only
            solution = []
        corpus += [f"<tool_call>\n{json.dumps({'name': call.name, 'arguments': call.arguments})}\n</tool_call>"
                   for turn in solution for call in turn]
    return corpus


def build_tiny_policy(path: str | Path, environment: Environment, tasks: Iterable[dict[str, Any]] | None = None, *,
                      hidden_size: int = 64, layers: int = 2, vocab_size: int = 1024, sliding_window: int | None = 64,
                      seed: int = 0) -> Path:
    """A tiny random Qwen3 policy for ``environment`` under ``path`` (a folder, made if missing): its tokenizer
    trained on the environment's tools and ``tasks`` (default: the tasks it ships, ``load_tasks()``) by
    ``environment_corpus``. It learns nothing by itself; it lets the whole loop run on a CPU. Returns the folder.

    sliding_window: see ``build_tiny_qwen3`` (tool schemas make long prompts); None: full attention.
    """
    tasks = list(environment.load_tasks() if tasks is None else tasks)
    return build_tiny_qwen3(Path(path), environment_corpus(environment, tasks), hidden_size=hidden_size,
                            layers=layers, seed=seed, vocab_size=vocab_size, sliding_window=sliding_window)
