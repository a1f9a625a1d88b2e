"""Tests build their tiny Qwen3 policy with the package's own builder (coevolve_engine.trainers.tiny_policy)."""

from coevolve_engine.trainers.tiny_policy import (  # noqa: F401
    MARKUP,
    SPECIAL,
    build_tiny_qwen3,
    build_tokenizer,
    qwen3_chat_template,
)
