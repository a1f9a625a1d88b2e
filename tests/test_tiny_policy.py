"""The tiny-policy builder works for any environment (its tools and tasks) and takes a folder as a Path or a str."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def test_a_policy_for_any_environment_from_a_str_folder_reads_its_tools_in_few_tokens(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import build_tiny_policy, build_tiny_qwen3

    environment = load_environment("calc")
    tasks = list(environment.load_tasks(split="seed"))[:20]
    folder = build_tiny_policy(str(tmp_path / "policy"), environment, tasks)
    assert folder == tmp_path / "policy" and (folder / "config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.vocab_size == len(tokenizer)
    episode = environment.start(tasks[0]["task_id"], tasks[0]["spec"])
    tools = episode.tools()
    episode.close()
    schemas = json.dumps(tools)
    assert len(tokenizer(schemas)["input_ids"]) < len(schemas.encode()) / 3  # learned from the tools, not bytes
    chat = tokenizer.apply_chat_template([{"role": "user", "content": tasks[0]["prompt"]}], tools=tools,
                                         tokenize=False, add_generation_prompt=True)
    assert tools[0]["function"]["name"] in chat and "<tool_call>" in chat  # the template renders the tools
    assert build_tiny_qwen3(str(tmp_path / "other"), ["a b c"] * 4, vocab_size=300) == tmp_path / "other"


def test_the_recipe_builds_for_a_named_environment(tmp_path):
    built = runpy.run_path(str(RECIPES / "build_tiny_policy.py"))["build"](str(tmp_path / "calc"), env="calc")
    assert (built / "tokenizer.json").is_file() and (built / "model.safetensors").is_file()
